#pragma once

// The subcommands of the `alkaid` tool. Each returns the process exit code:
// 0 success, 1 the data is invalid or differs, 2 usage or I/O error.

#include <cstdint>
#include <string>

namespace alkaid::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CatOptions {
  std::string input;
  int64_t limit = -1;  ///< rows to print; -1: all
};
int RunCat(const CatOptions& options);

int RunSchema(const std::string& input);

int RunValidate(const std::string& input);

struct WriteChoice {
  std::string to = "stream";        ///< stream | file
  std::string compression = "none";  ///< none | lz4 | zstd
  std::string magic = "alkaid";      ///< alkaid | arrow
};

struct ConvertOptions {
  std::string input;
  std::string output;
  WriteChoice write;
};
int RunConvert(const ConvertOptions& options);

struct IntegrationOptions {
  std::string json;
  std::string ipc;
  WriteChoice write;
};
int RunIntegrationValidate(const IntegrationOptions& options);
int RunJsonToIpc(const IntegrationOptions& options);
int RunIpcToJson(const IntegrationOptions& options);

struct RowsOptions {
  std::string input;
  std::string output;
  std::string schema_from;      ///< decode: IPC input whose schema the rows have
  int64_t batch_rows = 65536;   ///< decode: rows per output record batch
};
/// IPC stream/file -> one UnsafeRow batch file (every batch's rows in order).
int RunRowsEncode(const RowsOptions& options);
/// UnsafeRow batch file + schema -> IPC stream.
int RunRowsDecode(const RowsOptions& options);

}  // namespace alkaid::tools
