#include "auth_internal.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

namespace alkaid::flight::internal {

namespace {

// Equal length and bytes, in time that depends on the lengths only.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool Listed(const std::vector<std::string>& topics, const std::string& topic) {
  return std::any_of(topics.begin(), topics.end(),
                     [&](const std::string& t) { return t == "*" || t == topic; });
}

Result<std::vector<std::string>> TopicList(const nlohmann::json& entry, const char* key,
                                           const std::string& where) {
  std::vector<std::string> out;
  const auto it = entry.find(key);
  if (it == entry.end()) return out;
  if (!it->is_array()) return Status::Invalid(where, ": '", key, "' is not a list of topics");
  for (const auto& t : *it) {
    if (!t.is_string() || t.get<std::string>().empty()) {
      return Status::Invalid(where, ": '", key, "' holds something that is not a topic name");
    }
    out.push_back(t.get<std::string>());
  }
  return out;
}

}  // namespace

Result<TokenTable> TokenTable::Parse(const std::string& json_text, const std::string& origin) {
  const auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Status::Invalid(origin, ": not valid JSON");
  if (!json.is_object() || !json.contains("tokens") || !json["tokens"].is_array()) {
    return Status::Invalid(origin, ": expected {\"tokens\": [...]}");
  }
  TokenTable table;
  size_t index = 0;
  for (const auto& entry : json["tokens"]) {
    const std::string where = origin + ": token " + std::to_string(index++);
    if (!entry.is_object()) return Status::Invalid(where, ": not an object");
    const auto token = entry.find("token");
    if (token == entry.end() || !token->is_string() || token->get<std::string>().empty()) {
      return Status::Invalid(where, ": 'token' missing or empty");
    }
    TokenGrant grant;
    grant.token = token->get<std::string>();
    if (grant.token.find_first_of(" \t\r\n") != std::string::npos) {
      return Status::Invalid(where, ": 'token' contains white space");
    }
    for (const auto& other : table.grants_) {
      if (other.token == grant.token) return Status::Invalid(where, ": token given twice");
    }
    ALKAID_ASSIGN_OR_RAISE(grant.read, TopicList(entry, "read", where));
    ALKAID_ASSIGN_OR_RAISE(grant.write, TopicList(entry, "write", where));
    table.grants_.push_back(std::move(grant));
  }
  if (table.grants_.empty()) return Status::Invalid(origin, ": no tokens");
  return table;
}

Result<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("token file '", path, "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str(), "token file '" + path + "'");
}

const TokenGrant* TokenTable::Find(const std::string& authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view value = authorization;
  if (!value.starts_with(kBearer)) return nullptr;
  value.remove_prefix(kBearer.size());
  const TokenGrant* found = nullptr;
  // Every grant is compared, so the time does not say which one matched.
  for (const auto& grant : grants_) {
    if (ConstantTimeEquals(grant.token, value)) found = &grant;
  }
  return found;
}

bool TokenTable::MayRead(const TokenGrant& grant, const std::string& topic) {
  return Listed(grant.read, topic);
}

bool TokenTable::MayWrite(const TokenGrant& grant, const std::string& topic) {
  return Listed(grant.write, topic);
}

}  // namespace alkaid::flight::internal
