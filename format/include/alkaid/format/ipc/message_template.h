#pragma once

/// \file
/// RecordBatchMessageTemplate: the Message flatbuffer of a record batch,
/// encoded once and re-numbered per batch.
///
/// A topic's batches have one schema, so their Messages differ only in
/// numbers whenever the schema fixes how many field nodes and buffers a
/// batch has (every layout but the views, whose variadic buffers vary): the
/// row count, each node's length and null count, each buffer's offset and
/// length, and the body length. A batch with a variable-width column has
/// numbers of its own nearly every time, so a cache keyed by the Message's
/// bytes never hits for it. A template keeps the bytes of one Message with
/// every number stored (none left out as a default), and where each number
/// lies:
/// - a writer fills a copy with the next batch's numbers instead of
///   encoding it (Fill);
/// - a reader tells a Message of the same structure from its bytes outside
///   the numbers (Matches), and reads the numbers (Read) instead of
///   verifying and parsing the flatbuffer again. The bytes compared were
///   verified once, in the Message the template came from, and the numbers
///   are plain integers inside structs and tables: any value leaves a valid
///   flatbuffer. Whether the numbers make a valid batch is the reader's to
///   check, as for any Message.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/type.h"

namespace alkaid::format::ipc {

class ALKAID_EXPORT RecordBatchMessageTemplate {
 public:
  /// A FieldNode's numbers.
  struct Node {
    int64_t length = 0;
    int64_t null_count = 0;
  };
  /// A Buffer's numbers: where it lies in the body.
  struct Range {
    int64_t offset = 0;
    int64_t length = 0;
  };

  /// The template of uncompressed record batch Messages with `num_nodes`
  /// field nodes, `num_buffers` buffers and `custom_metadata` (or none).
  static Result<RecordBatchMessageTemplate> Make(size_t num_nodes, size_t num_buffers,
                                                 const MetadataPtr& custom_metadata = nullptr);
  /// The template of `message`, a record batch Message that Message::Open
  /// verified. Invalid when it is compressed or leaves a number out (as
  /// writers do for a number equal to its default, 0): such Messages are
  /// decoded in full.
  static Result<RecordBatchMessageTemplate> FromMessage(std::span<const uint8_t> message);

  /// Bytes of every Message of the template.
  size_t size() const { return bytes_.size(); }
  size_t num_nodes() const { return num_nodes_; }
  size_t num_buffers() const { return num_buffers_; }

  /// Writes the Message of these numbers to `out` (size() bytes). `nodes`
  /// and `buffers` have num_nodes() and num_buffers() entries.
  void Fill(int64_t length, int64_t body_length, const Node* nodes, const Range* buffers,
            uint8_t* out) const;
  /// Whether `message` is a Message of the template: its bytes equal the
  /// template's everywhere but in the numbers.
  bool Matches(std::span<const uint8_t> message) const;
  /// The numbers of `message`, a Message the template Matches: the row
  /// count and the body length returned through the pointers, the nodes'
  /// and buffers' into arrays of num_nodes() and num_buffers() entries.
  void Read(const uint8_t* message, int64_t* length, int64_t* body_length, Node* nodes,
            Range* buffers) const;

 private:
  RecordBatchMessageTemplate() = default;

  std::vector<uint8_t> bytes_;
  size_t num_nodes_ = 0;
  size_t num_buffers_ = 0;
  int64_t length_at_ = 0;
  int64_t body_length_at_ = 0;
  int64_t nodes_at_ = 0;
  int64_t buffers_at_ = 0;
  // The bytes between the numbers (offset, size), in order: what Matches
  // compares.
  struct Gap {
    size_t offset;
    size_t size;
  };
  std::vector<Gap> gaps_;
};

}  // namespace alkaid::format::ipc
