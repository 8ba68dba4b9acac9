#pragma once

/// \file
/// A process-wide registry of extension types.
///
/// IPC carries an extension type as its storage type plus two field metadata
/// entries, `<NS>:extension:name` and `<NS>:extension:metadata` (NS is
/// "ALKAID", or "ARROW" for files Arrow tools should recognise). When a reader
/// meets a name registered here it calls the factory and the column comes back
/// with the ExtensionType it returns; an unregistered name comes back as the
/// plain storage type with the metadata kept, so it is written back unchanged.
///
/// All functions are thread-safe.

#include <functional>
#include <string>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// Builds the extension type for a storage type and the serialized metadata.
/// It should check both and return an error when they do not fit.
using ExtensionTypeFactory =
    std::function<Result<TypePtr>(const TypePtr& storage_type, const std::string& serialized)>;

/// Registers `factory` under `name`. AlreadyExists if the name is taken.
ALKAID_EXPORT Status RegisterExtensionType(const std::string& name, ExtensionTypeFactory factory);

/// Removes `name`. KeyError if it is not registered.
ALKAID_EXPORT Status UnregisterExtensionType(const std::string& name);

/// The factory registered under `name`, or an empty function.
ALKAID_EXPORT ExtensionTypeFactory GetExtensionType(const std::string& name);

/// Names currently registered, sorted.
ALKAID_EXPORT std::vector<std::string> RegisteredExtensionTypes();

}  // namespace alkaid::format
