#pragma once

// Test-support macros shared by every Alkaid test.

#include <gtest/gtest.h>

#include <string>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

#define ALKAID_TEST_CONCAT_IMPL(a, b) a##b
#define ALKAID_TEST_CONCAT(a, b) ALKAID_TEST_CONCAT_IMPL(a, b)

/// Fails the test (fatally) unless `expr` (Status or Result) is OK.
#define ASSERT_OK(expr)                                                \
  do {                                                                 \
    auto&& _st = ::alkaid::internal::GenericToStatus((expr));          \
    ASSERT_TRUE(_st.ok()) << "'" #expr "' failed: " << _st.ToString(); \
  } while (false)

#define EXPECT_OK(expr)                                                \
  do {                                                                 \
    auto&& _st = ::alkaid::internal::GenericToStatus((expr));          \
    EXPECT_TRUE(_st.ok()) << "'" #expr "' failed: " << _st.ToString(); \
  } while (false)

#define ASSERT_OK_AND_ASSIGN_IMPL(res, lhs, rexpr)                             \
  auto res = (rexpr);                                                          \
  ASSERT_TRUE(res.ok()) << "'" #rexpr "' failed: " << res.status().ToString(); \
  lhs = std::move(res).ValueOrDie()

/// `lhs = value of rexpr`, failing the test if it is an error.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL(ALKAID_TEST_CONCAT(_res_, __COUNTER__), lhs, rexpr)

/// Asserts that `expr` fails with StatusCode `code` (e.g. kInvalid).
#define ASSERT_RAISES(status_code, expr)                      \
  do {                                                        \
    auto&& _st = ::alkaid::internal::GenericToStatus((expr)); \
    ASSERT_EQ(_st.code(), ::alkaid::StatusCode::status_code)  \
        << "'" #expr "' gave " << _st.ToString();             \
  } while (false)

/// Asserts that `expr` fails with `code` and that its message contains
/// `substr`.
#define ASSERT_RAISES_WITH_MESSAGE(status_code, substr, expr)              \
  do {                                                                     \
    auto&& _st = ::alkaid::internal::GenericToStatus((expr));              \
    ASSERT_EQ(_st.code(), ::alkaid::StatusCode::status_code)               \
        << "'" #expr "' gave " << _st.ToString();                          \
    ASSERT_NE(_st.message().find(substr), std::string::npos)               \
        << "message '" << _st.message() << "' lacks '" << (substr) << "'"; \
  } while (false)
