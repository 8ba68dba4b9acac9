#pragma once

// Helpers shared by the subcommands: error reporting and IPC output.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/status.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "commands.h"

namespace alkaid::tools {

/// Prints "alkaid <command>: <status message>" on stderr and returns the
/// exit code for it: 2 for I/O and usage-like errors, 1 for bad data.
int ReportError(const char* command, const Status& status);

/// Write options from the user's choices (values were checked by the parser).
format::ipc::IpcWriteOptions MakeWriteOptions(const WriteChoice& choice);

/// Writes `batches` to `path` ("-": stdout) as a stream or a file, keeping the
/// dictionary ids of `ids`.
Status WriteIpc(const std::string& path, const WriteChoice& choice, const format::SchemaPtr& schema,
                const std::vector<format::RecordBatchPtr>& batches,
                const format::ipc::DictionaryMemo* ids);

}  // namespace alkaid::tools
