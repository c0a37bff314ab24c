// The diagnosis vocabulary: every kind reads back from its JSON name, the
// predicates are the sets spec §4.5 names, and the collective rule's boundary.
#include "analysis/diagnosis_kind.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "analysis/thresholds.hpp"

namespace traceml::analysis {
namespace {

using K = DiagnosisKind;

std::vector<K> every_kind() {
  std::vector<K> all;
  for (std::size_t i = 0; i < kDiagnosisKindCount; ++i)
    all.push_back(static_cast<K>(i));
  return all;
}

TEST(DiagnosisKind, EveryKindReadsBackFromItsName) {
  std::set<std::string> names;
  for (const K k : every_kind()) {
    const std::string name = to_string(k);
    EXPECT_TRUE(names.insert(name).second) << "two kinds named " << name;
    EXPECT_EQ(kind_from_name(name), k) << name;
    EXPECT_NE(std::string(status_of(k)), "") << name;
    EXPECT_NE(std::string(label_of(k)), "") << name;
  }
  EXPECT_EQ(names.size(), kDiagnosisKindCount);
}

TEST(DiagnosisKind, UnknownNamesAreNotKinds) {
  EXPECT_FALSE(kind_from_name("").has_value());
  EXPECT_FALSE(kind_from_name("input_bound").has_value());  // names are case-sensitive
  EXPECT_FALSE(kind_from_name("INPUT-BOUND").has_value());  // a status, not a name
  EXPECT_FALSE(is_straggler("NOT_A_KIND"));
  EXPECT_FALSE(is_phase_share("NOT_A_KIND"));
}

TEST(DiagnosisKind, NamesStatusesAndLabelsOfTheStepTimeKinds) {
  EXPECT_STREQ(to_string(K::InputBound), "INPUT_BOUND");
  EXPECT_STREQ(status_of(K::InputBound), "INPUT-BOUND");
  EXPECT_STREQ(status_of(K::Straggler), "STRAGGLER");
  EXPECT_STREQ(label_of(K::Straggler), "RANK STRAGGLER");
  EXPECT_STREQ(status_of(K::IncompleteData), "INCOMPLETE DATA");
  EXPECT_STREQ(status_of(K::InsufficientStepTimeData), "INSUFFICIENT STEP-TIME DATA");
  EXPECT_STREQ(label_of(K::NoClearPerformanceBottleneck), "NO CLEAR BOTTLENECK");
}

TEST(DiagnosisKind, PredicatesAreTheSetsOfSpec45) {
  std::set<K> stragglers, shares, insufficient;
  for (const K k : every_kind()) {
    if (is_straggler(k)) stragglers.insert(k);
    if (is_phase_share(k)) shares.insert(k);
    if (is_insufficient_step_time(k)) insufficient.insert(k);
    EXPECT_EQ(is_straggler(to_string(k)), is_straggler(k));
    EXPECT_EQ(is_phase_share(to_string(k)), is_phase_share(k));
  }
  EXPECT_EQ(stragglers,
            (std::set<K>{K::InputStraggler, K::H2dStraggler, K::ComputeStraggler, K::Straggler}));
  EXPECT_EQ(shares, (std::set<K>{K::InputBound, K::H2dBound, K::ResidualHeavy, K::ComputeBound}));
  EXPECT_EQ(insufficient, (std::set<K>{K::NoData, K::Warmup, K::IncompleteData}));
}

TEST(DiagnosisKind, CulpritMetricOfEachFinding) {
  EXPECT_STREQ(culprit_metric(K::InputBound), "input_wait_ms");
  EXPECT_STREQ(culprit_metric(K::InputStraggler), "input_wait_ms");
  EXPECT_STREQ(culprit_metric(K::H2dBound), "h2d_ms");
  EXPECT_STREQ(culprit_metric(K::H2dStraggler), "h2d_ms");
  EXPECT_STREQ(culprit_metric(K::ResidualHeavy), "residual_ms");
  EXPECT_STREQ(culprit_metric(K::ComputeBound), "compute_ms");
  EXPECT_STREQ(culprit_metric(K::ComputeStraggler), "compute_ms");
  EXPECT_EQ(culprit_metric(K::Straggler), nullptr);
  EXPECT_EQ(culprit_metric(K::Balanced), nullptr);
}

TEST(DiagnosisKind, VerdictLabelSaysWhyStepTimingGaveNoVerdict) {
  EXPECT_STREQ(verdict_label(K::InsufficientStepTimeData, K::IncompleteData),
               "STEP TIMING INCOMPLETE");
  EXPECT_STREQ(verdict_label(K::InsufficientStepTimeData, K::Warmup), "NOT ENOUGH STEP DATA");
  EXPECT_STREQ(verdict_label(K::InsufficientStepTimeData, std::nullopt), "NOT ENOUGH STEP DATA");
  EXPECT_STREQ(verdict_label(K::Straggler, K::Straggler), "RANK STRAGGLER");
}

TEST(DiagnosisKind, CollectiveExplainsFromItsThresholdOn) {
  EXPECT_TRUE(collective_explains(thresholds::kCollectiveExplainsShare));
  EXPECT_TRUE(collective_explains(1.0));
  EXPECT_FALSE(collective_explains(thresholds::kCollectiveExplainsShare - 1e-9));
  EXPECT_FALSE(collective_explains(0.0));
}

// compare orders two runs' Step Time and Step Memory statuses by these ranks
// (spec §6): worse statuses rank higher; a status of another section is 0.
TEST(DiagnosisKind, StatusRankOrdersWhatCompareSees) {
  EXPECT_EQ(status_rank("NO DATA"), 0);
  EXPECT_EQ(status_rank("INCOMPLETE DATA"), 0);
  EXPECT_EQ(status_rank("BALANCED"), 1);
  EXPECT_EQ(status_rank("INPUT-BOUND"), 2);
  EXPECT_EQ(status_rank("MEMORY RISING"), 2);
  EXPECT_EQ(status_rank("RESIDUAL-HEAVY"), 3);
  EXPECT_EQ(status_rank("INPUT STRAGGLER"), 3);
  EXPECT_EQ(status_rank("IMBALANCE"), 3);
  EXPECT_EQ(status_rank("STRAGGLER"), 4);
  EXPECT_EQ(status_rank("MEMORY CREEP"), 4);
  EXPECT_EQ(status_rank("HIGH CPU"), 0);
  EXPECT_EQ(status_rank("INPUT_BOUND"), 0);  // a kind's name is not its status
}

}  // namespace
}  // namespace traceml::analysis
