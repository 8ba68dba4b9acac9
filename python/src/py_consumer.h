#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/format/record_batch.h"

namespace alkaid::python {

namespace nb = nanobind;

/// alkaid.Consumer (py_consumer.cc has the docstrings).
class PyConsumer {
 public:
  PyConsumer(const std::string& topic, std::optional<double> wait_for_topic,
             const std::optional<std::string>& socket,
             const std::optional<std::vector<std::string>>& columns, bool from_oldest,
             const std::string& wait_mode, const std::string& verification);
  ~PyConsumer();
  PyConsumer(const PyConsumer&) = delete;
  PyConsumer& operator=(const PyConsumer&) = delete;

  nb::object Next(std::optional<double> timeout);
  /// The batch already there, or None; StopIteration at the end of the
  /// stream. Never waits (but for a thread receiving from the consumer at
  /// the same moment, with the GIL released).
  nb::object TryNext();
  /// Consumer::WaitFd and Consumer::ArmWait, for waiting on an event loop.
  int WaitFd();
  bool ArmWait();
  void Close();
  bool closed() const;
  const std::string& topic() const;
  format::SchemaPtr schema() const;
  nb::dict Stats() const;
  nb::object ExportStream();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

void BindConsumer(nb::module_& m);

}  // namespace alkaid::python
