#include "alkaid/measure/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace alkaid::measure {
namespace {

// A row of `transport` at `size`: nine samples of `ns`, one of `tail_ns`
// (p50 `ns`, p99 `tail_ns`).
Measurement Row(const std::string& transport, int64_t size, int64_t ns, int64_t tail_ns) {
  Measurement m;
  m.transport = transport;
  m.mode = "spin";
  m.pattern = "pingpong";
  m.payload_bytes = size;
  m.histogram = std::make_shared<Histogram>();
  m.histogram->Reset();
  for (int i = 0; i < 9; ++i) m.histogram->Record(ns);
  m.histogram->Record(tail_ns);
  m.summary = Summarize(*m.histogram);
  return m;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
}

TEST(ReportTest, TheTableOfASizeHasItsRowsAndTheirRatiosToTheBaselines) {
  std::vector<Measurement> all = {Row("alkaid", 64, 300, 3000), Row("floor", 64, 100, 200),
                                  Row("body", 64, 120, 240), Row("alkaid", 4096, 999, 999)};
  std::ostringstream out;
  PrintRows(out, all, 64, {"floor"});
  const std::string text = out.str();
  EXPECT_NE(text.find("p50/floor"), std::string::npos) << text;
  // alkaid over floor: p50 3.00x, p99 15.00x; body over floor: 1.20x both.
  EXPECT_NE(text.find("3.00x      15.00x"), std::string::npos) << text;
  EXPECT_NE(text.find("1.20x       1.20x"), std::string::npos) << text;
  EXPECT_NE(text.find("overhead over body floor: +180 ns (p50), +2.76 us (p99)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("999"), std::string::npos) << "a row of another size: " << text;
}

TEST(ReportTest, TheJsonHasARowPerMeasurementAndNullWhereNothingWasTimedOneByOne) {
  Measurement peer = Row("iceoryx", 64, 500, 500);
  peer.wait = "busy-poll";
  Measurement inproc;
  inproc.transport = "alkaid";
  inproc.layer = "inproc";
  inproc.mode = "spin";
  inproc.pattern = "stream";
  inproc.writer = "fixed";
  inproc.payload_bytes = 512;
  inproc.summary.samples = 1000;
  inproc.summary.mean_ns = 42.5;
  inproc.paired = {7, 1, 2, 3, 4};
  const std::string path = TempPath("report.json");
  ASSERT_TRUE(WriteJson(path, {peer, inproc}, {0, 1}).ok());
  const auto doc = nlohmann::json::parse(std::ifstream(path));
  (void)std::remove(path.c_str());
  ASSERT_EQ(doc["results"].size(), 2u);
  const auto& p = doc["results"][0];
  EXPECT_EQ(p["transport"], "iceoryx");
  EXPECT_EQ(p["wait"], "busy-poll");
  EXPECT_FALSE(p.contains("layer"));
  EXPECT_FALSE(p.contains("timestamps"));
  EXPECT_EQ(p["p50_ns"], 500);
  EXPECT_EQ(p["samples"], 10);
  const auto& i = doc["results"][1];
  EXPECT_EQ(i["layer"], "inproc");
  EXPECT_EQ(i["writer"], "fixed");
  EXPECT_EQ(i["timestamps"], false);
  EXPECT_TRUE(i["p50_ns"].is_null());
  EXPECT_TRUE(i["max_ns"].is_null());
  EXPECT_EQ(i["mean_ns"], 42.5);
  EXPECT_EQ(i["paired"]["pairs"], 7);
  EXPECT_EQ(i["paired"]["diff_hi_ns"], 4);
  EXPECT_EQ(doc["host"]["pinned_cpus"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(doc["host"]["loadavg"].size(), 3u);
}

TEST(ReportTest, AJsonPathThatCannotBeWrittenIsAnErrorNamingIt) {
  const std::string path = TempPath("no-such-directory") + "/report.json";
  const Status st = WriteJson(path, {Row("alkaid", 64, 300, 300)}, {});
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace alkaid::measure
