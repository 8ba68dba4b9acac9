#include "alkaid/common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

namespace alkaid {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalid:
      return "Invalid";
    case StatusCode::kTypeError:
      return "TypeError";
    case StatusCode::kIndexError:
      return "IndexError";
    case StatusCode::kKeyError:
      return "KeyError";
    case StatusCode::kCapacityError:
      return "CapacityError";
    case StatusCode::kOutOfMemory:
      return "OutOfMemory";
    case StatusCode::kIOError:
      return "IOError";
    case StatusCode::kNotImplemented:
      return "NotImplemented";
    case StatusCode::kSerializationError:
      return "SerializationError";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kTimedOut:
      return "TimedOut";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kEndOfStream:
      return "EndOfStream";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::move(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  }
  return *this;
}

std::string ErrnoMessage(int errnum) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be `buf`.
  return strerror_r(errnum, buf, sizeof(buf));
}

Status Status::FromErrno(int errnum, std::string_view context) {
  const std::string msg = ErrnoMessage(errnum);
  StatusCode code = StatusCode::kIOError;
  if (errnum == ENOMEM || errnum == ENOSPC) code = StatusCode::kOutOfMemory;
  if (errnum == EACCES || errnum == EPERM) code = StatusCode::kPermissionDenied;
  if (errnum == EEXIST) code = StatusCode::kAlreadyExists;
  if (errnum == ETIMEDOUT) code = StatusCode::kTimedOut;
  return FromArgs(code, context, ": ", msg);
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return ok() ? kEmpty : state_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(state_->code));
  out += ": ";
  out += state_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return {};
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, std::move(msg));
}

void Status::Abort(std::string_view what) const {
  if (ok()) return;
  // Best effort: the process aborts next whether or not the message got out.
  (void)std::fprintf(stderr, "alkaid: fatal: %.*s%s%s\n", static_cast<int>(what.size()),
                     what.data(), what.empty() ? "" : ": ", ToString().c_str());
  std::abort();
}

bool Status::operator==(const Status& other) const noexcept {
  if (ok() || other.ok()) return ok() == other.ok();
  return state_->code == other.state_->code && state_->message == other.state_->message;
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

}  // namespace alkaid
