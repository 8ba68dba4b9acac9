// The decode cache of BatchSubscriber (batch_subscriber_internal.h).

#include <atomic>
#include <memory>
#include <vector>

#include "batch_subscriber_internal.h"

namespace alkaid::client::internal {

uint64_t DecodePlan::NextSerial() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

bool DecodePlan::Record(const format::ArrayData& data, const format::Buffer& body, size_t* index) {
  if (data.dictionary != nullptr || data.null_count < 0) return false;
  Node node;
  node.type = data.type;
  node.length = data.length;
  node.null_count = data.null_count;
  node.offset = data.offset;
  for (const auto& b : data.buffers) {
    Buffer pb;
    if (b != nullptr) {
      if (!body.Contains(b->data(), b->size())) return false;
      pb.present = true;
      pb.offset = b->data() - body.data();
      pb.size = b->size();
    }
    node.buffers.push_back(pb);
  }
  for (const auto& child : data.child_data) {
    if (child == nullptr) return false;
    size_t c = 0;
    if (!Record(*child, body, &c)) return false;
    node.children.push_back(c);
  }
  *index = nodes.size();
  nodes.push_back(std::move(node));
  return true;
}

format::ArrayDataPtr DecodePlan::Build(size_t index,
                                       const std::shared_ptr<format::Buffer>& body) const {
  const Node& n = nodes[index];
  auto d = std::make_shared<format::ArrayData>();
  d->type = n.type;
  d->length = n.length;
  d->null_count = n.null_count;
  d->offset = n.offset;
  d->buffers.reserve(n.buffers.size());
  for (const Buffer& b : n.buffers) {
    d->buffers.push_back(b.present ? std::make_shared<format::Buffer>(body, b.offset, b.size)
                                   : nullptr);
  }
  if (!n.children.empty()) {
    d->child_data.reserve(n.children.size());
    for (size_t c : n.children) d->child_data.push_back(Build(c, body));
  }
  return d;
}

}  // namespace alkaid::client::internal
