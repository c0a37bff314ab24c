// TRACEML_DISABLE_MACROS turns every macro into nothing: with tracing on,
// steps marked only by macros are not recorded.
#define TRACEML_DISABLE_MACROS
#include <gtest/gtest.h>

#include <traceml/traceml.hpp>

#include "../support/subprocess.hpp"
#include "store/run_db.hpp"

namespace {

TEST(DisabledMacros, ExpandToNothing) {
  traceml::testing::TempDir dir;
  traceml::Options o;
  o.logs_dir = dir.path().string();
  o.run_name = "off";
  traceml::init(o);
  ASSERT_TRUE(traceml::is_recording());
  for (int i = 0; i < 10; ++i) {
    TRACEML_STEP();
    TRACEML_PHASE(Forward);
    TRACEML_FETCH();
  }
  { traceml::StepScope one; }  // the classes still work
  traceml::shutdown();
  const auto db = traceml::store::read_run_db((dir.path() / "off" / "telemetry.db").string());
  EXPECT_EQ(db.telemetry.steps.size(), 1u);
}

}  // namespace
