#pragma once

/// \file
/// `Result<T>`: either a value of type T or an error Status.

#include <cassert>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#include "alkaid/common/status.h"

namespace alkaid {

/// Holds a T or an error Status (never an OK status).
///
/// Accessing the value of an error Result aborts; check ok() first or use
/// ALKAID_ASSIGN_OR_RAISE.
template <typename T>
class [[nodiscard]] Result {
 public:
  using ValueType = T;

  /// An error result. Passing an OK status is a programming error and is
  /// turned into an Unknown error.
  Result(Status status)  // NOLINT(google-explicit-constructor): implicit by design
      : storage_(status.ok() ? Status::Unknown("Result built from an OK status")
                             : std::move(status)) {}

  /// A value result.
  template <typename U = T, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                                        !std::is_same_v<std::decay_t<U>, Result>>>
  Result(U&& value)  // NOLINT(google-explicit-constructor): implicit by design
      : storage_(std::in_place_index<1>, std::forward<U>(value)) {}

  bool ok() const noexcept { return storage_.index() == 1; }

  /// The error, or OK when holding a value.
  Status status() const& { return ok() ? Status::OK() : std::get<0>(storage_); }
  Status status() && { return ok() ? Status::OK() : std::get<0>(std::move(storage_)); }

  const T& ValueOrDie() const& {
    if (!ok()) std::get<0>(storage_).Abort("ValueOrDie on an error Result");
    return std::get<1>(storage_);
  }
  T& ValueOrDie() & {
    if (!ok()) std::get<0>(storage_).Abort("ValueOrDie on an error Result");
    return std::get<1>(storage_);
  }
  T ValueOrDie() && {
    if (!ok()) std::get<0>(storage_).Abort("ValueOrDie on an error Result");
    return std::get<1>(std::move(storage_));
  }

  const T& operator*() const& { return ValueOrDie(); }
  T& operator*() & { return ValueOrDie(); }
  T operator*() && { return std::move(*this).ValueOrDie(); }
  const T* operator->() const { return &ValueOrDie(); }
  T* operator->() { return &ValueOrDie(); }

  /// The value, or `alternative` on error.
  template <typename U>
  T ValueOr(U&& alternative) && {
    return ok() ? std::get<1>(std::move(storage_)) : T(std::forward<U>(alternative));
  }

  /// Moves the value out; only valid when ok(). Used by the macros.
  T MoveValueUnsafe() { return std::get<1>(std::move(storage_)); }

 private:
  std::variant<Status, T> storage_;
};

namespace internal {
inline Status GenericToStatus(const Status& s) { return s; }
inline Status GenericToStatus(Status&& s) { return std::move(s); }
template <typename T>
Status GenericToStatus(const Result<T>& r) {
  return r.status();
}
template <typename T>
Status GenericToStatus(Result<T>&& r) {
  return std::move(r).status();
}
}  // namespace internal

}  // namespace alkaid

#define ALKAID_CONCAT_IMPL(a, b) a##b
#define ALKAID_CONCAT(a, b) ALKAID_CONCAT_IMPL(a, b)

/// Evaluates `expr` (a Status or Result); returns its error from the
/// enclosing function if it failed. An lvalue `expr` is copied, never moved
/// from, so a stored Status keeps its error.
#define ALKAID_RETURN_NOT_OK(expr)                                                              \
  do {                                                                                          \
    auto&& _alkaid_s = (expr);                                                                  \
    if (!_alkaid_s.ok()) {                                                                      \
      return ::alkaid::internal::GenericToStatus(std::forward<decltype(_alkaid_s)>(_alkaid_s)); \
    }                                                                                           \
  } while (false)

/// Like ALKAID_RETURN_NOT_OK, prefixing the error message with `context`
/// (anything streamable, evaluated only on error).
#define ALKAID_RETURN_NOT_OK_CTX(expr, ...)                                                    \
  do {                                                                                         \
    auto&& _alkaid_s = (expr);                                                                 \
    if (!_alkaid_s.ok()) {                                                                     \
      std::ostringstream _alkaid_ctx;                                                          \
      _alkaid_ctx << __VA_ARGS__;                                                              \
      return ::alkaid::internal::GenericToStatus(std::forward<decltype(_alkaid_s)>(_alkaid_s)) \
          .WithContext(_alkaid_ctx.str());                                                     \
    }                                                                                          \
  } while (false)

// `lhs` may be a declaration ("auto x") and `result_name` is a declared
// name: neither can be wrapped in parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses): see above
#define ALKAID_ASSIGN_OR_RAISE_IMPL(result_name, lhs, rexpr)     \
  auto&& result_name = (rexpr);                                  \
  if (!result_name.ok()) return std::move(result_name).status(); \
  lhs = result_name.MoveValueUnsafe()
// NOLINTEND(bugprone-macro-parentheses)

/// `lhs = value of rexpr`, or return its error. `lhs` may declare a
/// variable: ALKAID_ASSIGN_OR_RAISE(auto buf, AllocateBuffer(n));
#define ALKAID_ASSIGN_OR_RAISE(lhs, rexpr) \
  ALKAID_ASSIGN_OR_RAISE_IMPL(ALKAID_CONCAT(_alkaid_r_, __COUNTER__), lhs, rexpr)

/// Returns Status::Invalid(...) from the enclosing function unless `cond`.
#define ALKAID_CHECK_INPUT(cond, ...)                           \
  do {                                                          \
    if (!(cond)) return ::alkaid::Status::Invalid(__VA_ARGS__); \
  } while (false)
