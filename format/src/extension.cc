#include "alkaid/format/extension.h"

#include <map>
#include <mutex>
#include <utility>

namespace alkaid::format {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, ExtensionTypeFactory> factories;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: usable at exit
  return *registry;
}

}  // namespace

Status RegisterExtensionType(const std::string& name, ExtensionTypeFactory factory) {
  if (name.empty()) return Status::Invalid("extension type name is empty");
  if (!factory) return Status::Invalid("extension type '", name, "': factory is empty");
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.factories.emplace(name, std::move(factory)).second) {
    return Status::AlreadyExists("extension type '", name, "' is already registered");
  }
  return Status::OK();
}

Status UnregisterExtensionType(const std::string& name) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.factories.erase(name) == 0) {
    return Status::KeyError("extension type '", name, "' is not registered");
  }
  return Status::OK();
}

ExtensionTypeFactory GetExtensionType(const std::string& name) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.factories.find(name);
  return it == r.factories.end() ? ExtensionTypeFactory() : it->second;
}

std::vector<std::string> RegisteredExtensionTypes() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

}  // namespace alkaid::format
