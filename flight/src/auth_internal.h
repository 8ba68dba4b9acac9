#pragma once

// Bearer tokens and their topic permissions (docs/FLIGHT.md, "Security").
//
// The token file is JSON:
//   {"tokens": [{"token": "s3cret", "read": ["ticks", "*"], "write": ["orders"]}]}
// "*" in a list stands for every topic. A token is checked on every call,
// compared in constant time.

#include <optional>
#include <string>
#include <vector>

#include "alkaid/common/result.h"

namespace alkaid::flight::internal {

struct TokenGrant {
  std::string token;
  std::vector<std::string> read;
  std::vector<std::string> write;
};

class TokenTable {
 public:
  /// Parses a token file's text; Invalid naming the entry at fault.
  static Result<TokenTable> Parse(const std::string& json_text, const std::string& origin);
  /// Reads and parses `path`.
  static Result<TokenTable> Load(const std::string& path);

  /// The grant of the token in an `authorization` header value ("Bearer
  /// TOKEN"), or nothing if it is missing, malformed or unknown.
  const TokenGrant* Find(const std::string& authorization) const;

  static bool MayRead(const TokenGrant& grant, const std::string& topic);
  static bool MayWrite(const TokenGrant& grant, const std::string& topic);

 private:
  std::vector<TokenGrant> grants_;
};

}  // namespace alkaid::flight::internal
