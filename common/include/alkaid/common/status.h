#pragma once

/// \file
/// The error model used by every Alkaid library: a `Status` that costs one
/// null pointer on success, and `Result<T>` (see result.h) holding a value or
/// an error. No Alkaid API lets an exception escape.

#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "alkaid/common/export.h"

namespace alkaid {

/// Broad category of an error. Callers branch on the code; the message is
/// for humans.
enum class StatusCode : unsigned char {
  kOk = 0,
  kInvalid,             ///< malformed input or invalid argument
  kTypeError,           ///< operation not defined for this type
  kIndexError,          ///< index or range out of bounds
  kKeyError,            ///< name or id not found
  kCapacityError,       ///< a size exceeds what the format can represent
  kOutOfMemory,         ///< an allocation failed (heap or shared memory)
  kIOError,             ///< a system call or file operation failed
  kNotImplemented,      ///< valid input this build cannot handle
  kSerializationError,  ///< metadata could not be encoded or decoded
  kAlreadyExists,       ///< a named resource exists already
  kTimedOut,            ///< a wait ended before the condition held
  kPermissionDenied,    ///< the caller may not do this
  kEndOfStream,         ///< a stream or topic has ended; not a failure
  kCancelled,           ///< the operation was stopped on request
  kUnknown,             ///< anything else
};

/// Human-readable name of a code ("Invalid", "IOError", ...).
ALKAID_EXPORT std::string_view StatusCodeName(StatusCode code);

/// Outcome of an operation: OK or a code with a message.
///
/// Copying an error Status copies its message; moving is free. A Status is
/// not thread-safe to mutate but may be read from several threads.
class [[nodiscard]] ALKAID_EXPORT Status {
 public:
  /// An OK status.
  Status() noexcept = default;
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status OK() { return {}; }

  /// Builds an error whose message is the concatenation of `args`, each
  /// formatted with operator<<.
  template <typename... Args>
  static Status FromArgs(StatusCode code, Args&&... args) {
    std::ostringstream ss;
    (ss << ... << std::forward<Args>(args));
    return Status(code, ss.str());
  }

  template <typename... Args>
  static Status Invalid(Args&&... args) {
    return FromArgs(StatusCode::kInvalid, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status TypeError(Args&&... args) {
    return FromArgs(StatusCode::kTypeError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status IndexError(Args&&... args) {
    return FromArgs(StatusCode::kIndexError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status KeyError(Args&&... args) {
    return FromArgs(StatusCode::kKeyError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status CapacityError(Args&&... args) {
    return FromArgs(StatusCode::kCapacityError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status OutOfMemory(Args&&... args) {
    return FromArgs(StatusCode::kOutOfMemory, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status IOError(Args&&... args) {
    return FromArgs(StatusCode::kIOError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status NotImplemented(Args&&... args) {
    return FromArgs(StatusCode::kNotImplemented, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status SerializationError(Args&&... args) {
    return FromArgs(StatusCode::kSerializationError, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status AlreadyExists(Args&&... args) {
    return FromArgs(StatusCode::kAlreadyExists, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status TimedOut(Args&&... args) {
    return FromArgs(StatusCode::kTimedOut, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status PermissionDenied(Args&&... args) {
    return FromArgs(StatusCode::kPermissionDenied, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status EndOfStream(Args&&... args) {
    return FromArgs(StatusCode::kEndOfStream, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status Cancelled(Args&&... args) {
    return FromArgs(StatusCode::kCancelled, std::forward<Args>(args)...);
  }
  template <typename... Args>
  static Status Unknown(Args&&... args) {
    return FromArgs(StatusCode::kUnknown, std::forward<Args>(args)...);
  }

  /// Builds an IOError from an errno value: "<context>: <ErrnoMessage(errnum)>".
  static Status FromErrno(int errnum, std::string_view context);

  bool ok() const noexcept { return state_ == nullptr; }
  StatusCode code() const noexcept { return ok() ? StatusCode::kOk : state_->code; }
  /// The message without the code name; empty when OK.
  const std::string& message() const noexcept;
  /// "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  bool IsInvalid() const noexcept { return code() == StatusCode::kInvalid; }
  bool IsIOError() const noexcept { return code() == StatusCode::kIOError; }
  bool IsOutOfMemory() const noexcept { return code() == StatusCode::kOutOfMemory; }
  bool IsTimedOut() const noexcept { return code() == StatusCode::kTimedOut; }
  bool IsEndOfStream() const noexcept { return code() == StatusCode::kEndOfStream; }
  bool IsNotImplemented() const noexcept { return code() == StatusCode::kNotImplemented; }

  /// A copy of this error with `context` prepended to its message
  /// ("<context>: <message>"); OK stays OK.
  Status WithContext(std::string_view context) const;

  /// Aborts the process with the message if not OK. For tests, examples and
  /// invariants that cannot fail; never on input-dependent paths.
  void Abort(std::string_view what = {}) const;

  bool operator==(const Status& other) const noexcept;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

ALKAID_EXPORT std::ostream& operator<<(std::ostream& os, const Status& s);

/// The text of errno value `errnum` (thread-safe, unlike strerror).
ALKAID_EXPORT std::string ErrnoMessage(int errnum);

}  // namespace alkaid
