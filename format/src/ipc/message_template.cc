// RecordBatchMessageTemplate (message_template.h): a record batch Message
// encoded once, its numbers found through the flatbuffer (metadata_internal).

#include "alkaid/format/ipc/message_template.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "alkaid/format/ipc/options.h"
#include "metadata_internal.h"
#include "util_internal.h"

namespace alkaid::format::ipc {

namespace {

void Store(uint8_t* at, int64_t v) { std::memcpy(at, &v, sizeof(v)); }
using internal::LoadInt64LE;

}  // namespace

Result<RecordBatchMessageTemplate> RecordBatchMessageTemplate::Make(
    size_t num_nodes, size_t num_buffers, const MetadataPtr& custom_metadata) {
  internal::RecordBatchMeta meta;
  meta.nodes.assign(num_nodes, {0, 0});
  meta.buffers.assign(num_buffers, {0, 0});
  ALKAID_ASSIGN_OR_RAISE(
      auto encoded, internal::WriteRecordBatchMessage(meta, 0, IpcWriteOptions{}, custom_metadata,
                                                      /*store_defaults=*/true));
  return FromMessage({encoded->data(), static_cast<size_t>(encoded->size())});
}

Result<RecordBatchMessageTemplate> RecordBatchMessageTemplate::FromMessage(
    std::span<const uint8_t> message) {
  if (message.empty()) return Status::Invalid("an empty Message");
  ALKAID_ASSIGN_OR_RAISE(const internal::RecordBatchNumbersAt at,
                         internal::LocateRecordBatchNumbers(message.data()));
  RecordBatchMessageTemplate t;
  t.bytes_.assign(message.begin(), message.end());
  t.num_nodes_ = at.num_nodes;
  t.num_buffers_ = at.num_buffers;
  t.length_at_ = at.length;
  t.body_length_at_ = at.body_length;
  t.nodes_at_ = at.nodes;
  t.buffers_at_ = at.buffers;
  // The numbers' places, in order; between them, the gaps Matches compares.
  std::array<std::pair<int64_t, int64_t>, 4> numbers = {{
      {at.length, 8},
      {at.body_length, 8},
      {at.nodes, static_cast<int64_t>(16 * at.num_nodes)},
      {at.buffers, static_cast<int64_t>(16 * at.num_buffers)},
  }};
  std::sort(numbers.begin(), numbers.end());
  int64_t pos = 0;
  const auto size = static_cast<int64_t>(message.size());
  for (const auto& [start, bytes] : numbers) {
    // The verifier checked that each lies inside the buffer; they cannot
    // overlap in a flatbuffer, but a template relies on it: checked.
    if (start < pos || bytes > size - start) {
      return Status::Invalid("a record batch Message whose numbers overlap");
    }
    if (start > pos) {
      t.gaps_.push_back({static_cast<size_t>(pos), static_cast<size_t>(start - pos)});
    }
    pos = start + bytes;
  }
  if (pos < size) t.gaps_.push_back({static_cast<size_t>(pos), static_cast<size_t>(size - pos)});
  return t;
}

void RecordBatchMessageTemplate::Fill(int64_t length, int64_t body_length, const Node* nodes,
                                      const Range* buffers, uint8_t* out) const {
  std::memcpy(out, bytes_.data(), bytes_.size());
  Store(out + length_at_, length);
  Store(out + body_length_at_, body_length);
  uint8_t* n = out + nodes_at_;
  for (size_t i = 0; i < num_nodes_; ++i, n += 16) {
    Store(n, nodes[i].length);
    Store(n + 8, nodes[i].null_count);
  }
  uint8_t* b = out + buffers_at_;
  for (size_t i = 0; i < num_buffers_; ++i, b += 16) {
    Store(b, buffers[i].offset);
    Store(b + 8, buffers[i].length);
  }
}

bool RecordBatchMessageTemplate::Matches(std::span<const uint8_t> message) const {
  if (message.size() != bytes_.size()) return false;
  for (const Gap& g : gaps_) {
    if (std::memcmp(message.data() + g.offset, bytes_.data() + g.offset, g.size) != 0) return false;
  }
  return true;
}

void RecordBatchMessageTemplate::Read(const uint8_t* message, int64_t* length, int64_t* body_length,
                                      Node* nodes, Range* buffers) const {
  *length = LoadInt64LE(message + length_at_);
  *body_length = LoadInt64LE(message + body_length_at_);
  const uint8_t* n = message + nodes_at_;
  for (size_t i = 0; i < num_nodes_; ++i, n += 16) {
    nodes[i].length = LoadInt64LE(n);
    nodes[i].null_count = LoadInt64LE(n + 8);
  }
  const uint8_t* b = message + buffers_at_;
  for (size_t i = 0; i < num_buffers_; ++i, b += 16) {
    buffers[i].offset = LoadInt64LE(b);
    buffers[i].length = LoadInt64LE(b + 8);
  }
}

}  // namespace alkaid::format::ipc
