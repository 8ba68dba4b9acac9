// `alkaid latency`: a front end of the measurement program, alkaid-measure
// (tools/alkaid/latency*.cc, built beside this tool and not installed), so
// that no measurement code ships in the installed tool. Its arguments go to
// alkaid-measure as they are, --help too; the process becomes it (exec: the
// same pid, signals and exit code).

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include "alkaid/common/status.h"
#include "commands.h"

namespace alkaid::tools {

namespace {

// Execs alkaid-measure with `args`: the one beside this executable, else the
// first on PATH. Returns only if neither could be run.
int ExecMeasure(const std::vector<std::string>& args) {
  std::string self(PATH_MAX, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size());
  self.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  const std::string beside = self.substr(0, self.rfind('/') + 1) + "alkaid-measure";
  // execv takes char* const[] and writes nothing through them.
  std::vector<char*> argv{const_cast<char*>("alkaid-measure")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(beside.c_str(), argv.data());
  const std::string beside_error = ErrnoMessage(errno);
  ::execvp("alkaid-measure", argv.data());
  std::cerr << "alkaid latency: cannot run the measurement program alkaid-measure (" << beside
            << ": " << beside_error << "; PATH: " << ErrnoMessage(errno)
            << "). It is built with this tool (build/release/tools/alkaid/alkaid-measure) and not "
               "installed: run it from the build tree\n";
  return kExitFailure;
}

}  // namespace

void AddLatencyCommand(CLI::App* app, int* code) {
  auto* cmd = app->add_subcommand(
      "latency",
      "Measure publish-to-receive latency and throughput (channel, client or in-process layer) "
      "beside baselines of the same run: runs alkaid-measure, built beside this tool (see "
      "`alkaid latency --help`)");
  cmd->set_help_flag();  // --help is alkaid-measure's
  cmd->prefix_command();
  cmd->callback([cmd, code] { *code = ExecMeasure(cmd->remaining()); });
}

}  // namespace alkaid::tools
