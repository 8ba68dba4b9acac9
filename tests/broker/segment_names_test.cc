// The names of a producer's segments, built and parsed in one place
// (broker/daemon/segment_names.h): what a restarted broker reads back is
// what it handed out, and nothing else is taken for one of them.

#include "daemon/segment_names.h"

#include <gtest/gtest.h>

#include <string>

namespace alkaid::broker::internal {
namespace {

TEST(SegmentNamesTest, WhatIsBuiltParsesBack) {
  const std::string stem = ProducerSegmentStem("alkaid.18b2f0c1d2e3", 4242, 7);
  EXPECT_EQ(stem, "alkaid.18b2f0c1d2e3.4242.p7");
  for (const char* suffix : {".ring", ".ring.reg", ".ring.c3.1f", ".bodies"}) {
    SCOPED_TRACE(suffix);
    std::string parsed;
    uint32_t pid = 0;
    bool is_ring = true;
    ASSERT_TRUE(ParseSegmentName("alkaid", stem + suffix, &parsed, &pid, &is_ring));
    EXPECT_EQ(parsed, stem);
    EXPECT_EQ(pid, 4242u);
    EXPECT_EQ(is_ring, std::string(suffix) == ".ring");
  }
}

TEST(SegmentNamesTest, OtherNamesAreNotAProducers) {
  std::string stem;
  uint32_t pid = 0;
  bool is_ring = false;
  for (const char* name : {
           "other.18b2.4242.p7.ring",         // another broker's
           "alkaid.18b2.4242.p7",             // no kind
           "alkaid.18b2.4242.p7.bodies.x",    // nothing follows .bodies
           "alkaid.18b2.4242.q7.ring",        // not a producer id
           "alkaid.18b2.4242.p.ring",         // an empty id
           "alkaid.18b2.42x2.p7.ring",        // not a pid
           "alkaid.18b2.0.p7.ring",           // pid 0
           "alkaid.18b2.4294967296.p7.ring",  // beyond a pid
           "alkaid.18b2..p7.ring",            // an empty pid
           "alkaid.18b2.4242.p7.rings",       // not the channel
       }) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(ParseSegmentName("alkaid", name, &stem, &pid, &is_ring));
  }
}

}  // namespace
}  // namespace alkaid::broker::internal
