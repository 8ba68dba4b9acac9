#pragma once

// What the Arrow C++ interop tests share: assertions on arrow::Status and
// arrow::Result, and the gold cases of ALKAID_GOLD_DIR (when defined).

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <gtest/gtest.h>

#include "test_util.h"

#define ASSERT_ARROW_OK(expr)                                            \
  do {                                                                   \
    ::arrow::Status _ast = (expr);                                       \
    ASSERT_TRUE(_ast.ok()) << "'" #expr "' failed: " << _ast.ToString(); \
  } while (false)
#define ASSERT_ARROW_OK_AND_ASSIGN_IMPL(res, lhs, rexpr)                       \
  auto res = (rexpr);                                                          \
  ASSERT_TRUE(res.ok()) << "'" #rexpr "' failed: " << res.status().ToString(); \
  lhs = std::move(res).ValueOrDie()
#define ASSERT_ARROW_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_ARROW_OK_AND_ASSIGN_IMPL(ALKAID_TEST_CONCAT(_ares_, __COUNTER__), lhs, rexpr)

#ifdef ALKAID_GOLD_DIR
namespace alkaid::interop_testing {

// The gold cases' names (files NAME.arrow_file), sorted.
inline std::vector<std::string> GoldCases() {
  std::vector<std::string> names;
  DIR* dir = opendir(ALKAID_GOLD_DIR);
  if (dir == nullptr) return names;
  const std::string suffix = ".arrow_file";
  while (dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    if (n.size() > suffix.size() && n.ends_with(suffix)) {
      names.push_back(n.substr(0, n.size() - suffix.size()));
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string GoldFile(const std::string& name) {
  return std::string(ALKAID_GOLD_DIR) + "/" + name + ".arrow_file";
}

}  // namespace alkaid::interop_testing
#endif
