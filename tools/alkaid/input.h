#pragma once

// Opening whatever IPC input the user names: a stream (current or legacy
// framing) or a file (ALKAID1 or ARROW1 magic), from a path or stdin.

#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::tools {

enum class InputKind { kStream, kLegacyStream, kFile };

/// Everything read from one IPC input.
struct IpcInput {
  InputKind kind = InputKind::kStream;
  format::ipc::FileMagic magic = format::ipc::FileMagic::kAlkaid;  // files only
  format::SchemaPtr schema;
  std::vector<format::RecordBatchPtr> batches;
  /// Dictionary ids of the dictionary-encoded fields, and the final dictionaries.
  format::ipc::DictionaryMemo memo;
  /// Dictionary batches that replaced an earlier dictionary (streams only).
  int64_t num_replaced_dictionaries = 0;
  int64_t num_dictionary_deltas = 0;
};

/// Reads `path` ("-" for stdin), detecting its kind from its first bytes.
/// Files are memory-mapped: the batches point into the mapping.
Result<IpcInput> ReadIpcInput(const std::string& path, const format::ipc::IpcReadOptions& options);

/// "stream", "legacy stream", "file (ALKAID1)" or "file (ARROW1)".
std::string DescribeInput(const IpcInput& input);

}  // namespace alkaid::tools
