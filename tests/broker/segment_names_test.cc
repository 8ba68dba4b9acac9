// The names of a producer's segments, built and parsed in one place
// (broker/daemon/segment_names.h): what a restarted broker reads back is
// what it handed out, and nothing else is taken for one of them.

#include "daemon/segment_names.h"

#include <gtest/gtest.h>

#include <string>

namespace alkaid::broker::internal {
namespace {

// What is built parses back. The previous release named the channel
// "<stem>.ring" (kLegacyChannelSuffix): a restarted broker still knows
// those names as a producer's (deprecated, one release).
TEST(SegmentNamesTest, WhatIsBuiltParsesBackInBothForms) {
  const std::string stem = ProducerSegmentStem("alkaid.18b2f0c1d2e3", 4242, 7);
  EXPECT_EQ(stem, "alkaid.18b2f0c1d2e3.4242.p7");
  EXPECT_EQ(stem + kChannelSuffix, "alkaid.18b2f0c1d2e3.4242.p7.channel");
  for (const char* suffix : {kChannelSuffix, kLegacyChannelSuffix}) {
    const std::string channel = stem + suffix;
    for (const std::string& name :
         {channel, channel + ".reg", channel + ".c3.1f", channel + ".x2"}) {
      SCOPED_TRACE(name);
      std::string parsed;
      uint32_t pid = 0;
      bool is_channel = name != channel;
      ASSERT_TRUE(ParseSegmentName("alkaid", name, &parsed, &pid, &is_channel));
      EXPECT_EQ(parsed, stem);
      EXPECT_EQ(pid, 4242u);
      EXPECT_EQ(is_channel, name == channel);
    }
  }
}

TEST(SegmentNamesTest, OtherNamesAreNotAProducers) {
  std::string stem;
  uint32_t pid = 0;
  bool is_channel = false;
  for (const char* name : {
           "other.18b2.4242.p7.channel",         // another broker's
           "alkaid.18b2.4242.p7",                // no kind
           "alkaid.18b2.4242.p7.bodies",         // the body segment of releases long gone
           "alkaid.18b2.4242.q7.channel",        // not a producer id
           "alkaid.18b2.4242.p.channel",         // an empty id
           "alkaid.18b2.42x2.p7.channel",        // not a pid
           "alkaid.18b2.0.p7.channel",           // pid 0
           "alkaid.18b2.4294967296.p7.channel",  // beyond a pid
           "alkaid.18b2..p7.channel",            // an empty pid
           "alkaid.18b2.4242.p7.channels",       // not the channel
       }) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(ParseSegmentName("alkaid", name, &stem, &pid, &is_channel));
  }
}

// A restarted broker keeps a dead producer's extensions (and only those)
// for its consumers: both channel forms, ids from 1.
TEST(SegmentNamesTest, ExtensionNamesAreToldFromTheOthers) {
  for (const char* name : {"alkaid.18b2.4242.p7.channel.x1", "alkaid.18b2.4242.p7.ring.x63",
                           "alkaid.18b2.4242.p7.channel.x4294967295"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(IsExtensionName(name));
  }
  for (const char* name : {
           "alkaid.18b2.4242.p7.channel",                // the channel
           "alkaid.18b2.4242.p7.channel.reg",            // its registry
           "alkaid.18b2.4242.p7.channel.c3.1234",        // a consumer's segment
           "alkaid.18b2.4242.p7.channel.x0",             // no extension 0
           "alkaid.18b2.4242.p7.channel.x",              // no id
           "alkaid.18b2.4242.p7.channel.x12a",           // not a number
           "alkaid.18b2.4242.p7.channel.x123456789012",  // too long for an id
           "alkaid.18b2.4242.p7.channels.x1",            // not a channel's
           "x1",
       }) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(IsExtensionName(name));
  }
}

}  // namespace
}  // namespace alkaid::broker::internal
