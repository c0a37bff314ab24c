// Field-by-field gtest equality of the model types (absent stays distinct from
// 0), from the records' field lists, with a message naming the record and
// field that differ. Shared by the
// run database and collector tests, which both check "read back == written".
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <type_traits>

#include "model/telemetry.hpp"

namespace traceml::testing {

template <class R>
void expect_same_fields(const R& a, const R& b, const std::string& where);

/// One member of two records: values compared as they are (absent stays
/// distinct from 0), nested records and lists field by field.
template <class V>
void expect_same_value(const V& a, const V& b, const std::string& where) {
  if constexpr (model::schema::is_vector_v<V>) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (std::size_t i = 0; i < a.size(); ++i)
      expect_same_fields(a[i], b[i], where + "[" + std::to_string(i) + "]");
  } else if constexpr (model::schema::has_schema_v<model::schema::value_type_t<V>> &&
                       model::schema::is_optional_v<V>) {
    ASSERT_EQ(a.has_value(), b.has_value()) << where;
    if (a) expect_same_fields(*a, *b, where);
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

/// Every field of two records, from the record's field list.
template <class R>
void expect_same_fields(const R& a, const R& b, const std::string& where) {
  model::schema::for_each_field<R>([&](const auto& f) {
    expect_same_value(a.*(f.member), b.*(f.member), where + " ." + f.name);
  });
}

inline void expect_same(const model::StepEvents& a, const model::StepEvents& b,
                        const std::string& where) {
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = static_cast<model::Event>(i);
    EXPECT_EQ(a.has(e), b.has(e)) << where << " " << model::event_name(e);
    EXPECT_EQ(a.cpu_ms(e), b.cpu_ms(e)) << where << " " << model::event_name(e);
    EXPECT_EQ(a.gpu_ms(e), b.gpu_ms(e)) << where << " " << model::event_name(e);
    EXPECT_EQ(a.begin_ms(e), b.begin_ms(e)) << where << " " << model::event_name(e) << " begin";
  }
}

template <class R>
void expect_same(const R& a, const R& b, const std::string& where) {
  expect_same_fields(a, b, where);
  if constexpr (std::is_same_v<R, model::StepRecord>) {
    expect_same(a.events, b.events, where);
    EXPECT_EQ(a.thread, b.thread) << where << " .thread";
  }
}

/// Every element of two record lists, in order.
template <typename A, typename B>
void expect_same_rows(const A& a, const B& b, const std::string& name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  for (std::size_t i = 0; i < a.size(); ++i)
    expect_same(a[i], b[i], name + "[" + std::to_string(i) + "]");
}
template <typename T>
void expect_same_list(const std::vector<T>& a, const std::vector<T>& b, const std::string& name) {
  expect_same_rows(a, b, name);
}
inline void expect_same_list(const model::StepLog& a, const model::StepLog& b,
                             const std::string& name) {
  expect_same_rows(a, b, name);
}
inline void expect_same_list(const model::StepLog& a, const std::vector<model::StepRecord>& b,
                             const std::string& name) {
  expect_same_rows(a, b, name);
}
inline void expect_same_list(const std::vector<model::StepRecord>& a, const model::StepLog& b,
                             const std::string& name) {
  expect_same_rows(a, b, name);
}

/// Two whole telemetries: run info, then every record list in order.
inline void expect_same(const model::Telemetry& a, const model::Telemetry& b) {
  expect_same_fields(a.run, b.run, "run");
  EXPECT_EQ(a.run.strategy, b.run.strategy) << "run .strategy";
  expect_same_list(a.ranks, b.ranks, "ranks");
  expect_same_list(a.steps, b.steps, "steps");
  expect_same_list(a.step_memory, b.step_memory, "step_memory");
  expect_same_list(a.system, b.system, "system");
  expect_same_list(a.process, b.process, "process");
}

}  // namespace traceml::testing
