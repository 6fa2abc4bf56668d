// The planted-fault registry: names round-trip, an unknown name is an error that lists
// the known ones, and a ScopedFault restores the state it found.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "engine/core/fault_injection.hpp"

namespace dpt::test {
namespace {

TEST(FaultInjection, NamesRoundTripAndAreDistinct) {
  for (Fault f : all_faults()) {
    EXPECT_EQ(fault_from_name(fault_name(f)), f) << fault_name(f);
    for (Fault g : all_faults())
      if (f != g) {
        EXPECT_STRNE(fault_name(f), fault_name(g));
      }
  }
}

TEST(FaultInjection, UnknownNameListsTheKnownOnes) {
  try {
    fault_from_name("drop-chunks");
    FAIL() << "no error for an unknown fault";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'drop-chunks'"), std::string::npos) << what;
    EXPECT_NE(what.find("drop-chunk, "), std::string::npos) << what;
    EXPECT_NE(what.find("ring-step"), std::string::npos) << what;
  }
}

TEST(FaultInjection, AllOffByDefaultAndScopedFaultRestores) {
  for (Fault f : all_faults()) EXPECT_FALSE(fault_active(f)) << fault_name(f);
  {
    const ScopedFault outer(Fault::ddp_skip_divide);
    EXPECT_TRUE(fault_active(Fault::ddp_skip_divide));
    EXPECT_FALSE(fault_active(Fault::ring_skips_last_all_gather_step));
    {
      const ScopedFault inner(Fault::ddp_skip_divide);
      EXPECT_TRUE(fault_active(Fault::ddp_skip_divide));
    }
    // Invariant: the inner scope restores what it found (on), not off.
    EXPECT_TRUE(fault_active(Fault::ddp_skip_divide));
  }
  EXPECT_FALSE(fault_active(Fault::ddp_skip_divide));
}

}  // namespace
}  // namespace dpt::test
