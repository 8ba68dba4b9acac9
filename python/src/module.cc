// The extension module alkaid._alkaid; the package alkaid (python/alkaid)
// re-exports it with the pure-Python parts (exceptions, Broker, commands).

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "py_common.h"
#include "py_consumer.h"
#include "py_producer.h"
#include "py_types.h"

namespace alkaid::python {
namespace {

nb::list ListTopics(const std::optional<std::string>& socket) {
  Result<std::vector<client::TopicStatus>> topics = Status::Unknown("not run");
  {
    nb::gil_scoped_release release;
    auto connected = client::BrokerClient::Connect(socket.value_or(""));
    if (connected.ok()) {
      topics = (*connected)->ListTopics();
    } else {
      topics = connected.status();
    }
  }
  nb::list out;
  for (const auto& t : Unwrap(std::move(topics))) {
    nb::dict d;
    d["name"] = t.name;
    d["schema"] = PySchema{t.schema};
    d["kind"] = client::TopicKindName(t.kind);
    d["payload_kind"] =
        client::TopicKindName(t.kind);  // the same, under the key scripts read before
    d["slot_count"] = t.slot_count;
    d["arena_bytes"] = t.arena_bytes;
    d["policy"] = t.policy == shm::SlowConsumerPolicy::kDropOldest ? "drop-oldest" : "block";
    d["producers"] = t.producers;
    d["consumers"] = t.consumers;
    d["published"] = t.published;
    d["depth"] = t.depth;
    d["drops"] = t.drops;
    d["held"] = t.held;
    d["publish_timestamps"] = t.publish_timestamps;
    d["published_bytes"] = t.published_bytes;
    out.append(d);
  }
  return out;
}

void RemoveTopic(const std::string& name, const std::optional<std::string>& socket) {
  Status removed;
  {
    nb::gil_scoped_release release;
    auto connected = client::BrokerClient::Connect(socket.value_or(""));
    removed = connected.ok() ? (*connected)->RemoveTopic(name) : connected.status();
  }
  Check(removed);
}

nb::dict ListAwaitedTopics(const std::optional<std::string>& socket) {
  Result<std::vector<client::AwaitedTopic>> topics = Status::Unknown("not run");
  {
    nb::gil_scoped_release release;
    auto connected = client::BrokerClient::Connect(socket.value_or(""));
    if (connected.ok()) {
      topics = (*connected)->ListAwaitedTopics();
    } else {
      topics = connected.status();
    }
  }
  nb::dict out;
  for (const auto& t : Unwrap(std::move(topics))) out[nb::str(t.name.c_str())] = t.consumers;
  return out;
}

}  // namespace
}  // namespace alkaid::python

NB_MODULE(_alkaid, m) {
  namespace py = alkaid::python;
  m.doc() = "Alkaid's Python binding (the C++ part; use the package `alkaid`).";
  py::BindTypes(m);
  py::BindProducer(m);
  py::BindConsumer(m);
  m.def("_list_topics", &py::ListTopics, nanobind::arg("socket").none() = nanobind::none(),
        "Every topic of the broker at `socket` as a list of dicts (see alkaid.topics).");
  m.def("remove_topic", &py::RemoveTopic, nanobind::arg("name"),
        nanobind::arg("socket").none() = nanobind::none(),
        "Removes topic `name`, which has no producer, from the broker at `socket` (`alkaid "
        "topics rm`): its consumers end their stream, and a producer may create it again "
        "with another schema. InvalidError while it has producers, NotFoundError if there "
        "is no such topic.");
  m.def("awaited_topics", &py::ListAwaitedTopics, nanobind::arg("socket").none() = nanobind::none(),
        "Topics that do not exist yet but have consumers waiting for them (Consumer's "
        "wait_for_topic), as {name: waiting consumers}, on the broker at `socket`.");
  m.def("default_socket", &alkaid::client::DefaultBrokerSocket,
        "The socket clients use when none is given: $ALKAID_BROKER_SOCKET, else "
        "$XDG_RUNTIME_DIR/alkaid/broker.sock, else /tmp/alkaid-<uid>/broker.sock.");
}
