#pragma once

/// \file
/// Receiving record batches published by a BatchPublisher, zero-copy: the
/// arrays' buffers point into the producer's body segment.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/ring.h"

namespace alkaid::client {

/// One received batch.
struct ReceivedBatch {
  /// The batch; its buffers point into the shared body block, which stays
  /// referenced (cross-process count) until the last buffer is dropped.
  format::RecordBatchPtr batch;
  /// The Message flatbuffer (a private copy) and the body (the shared
  /// region): framed together they form a valid encapsulated IPC message,
  /// e.g. to append to a stream file without re-encoding. (With
  /// dictionary-encoded fields a stream also needs the dictionary messages,
  /// which are not returned: write such batches with an IPC writer, which
  /// emits them, as `alkaid subscribe` does.)
  std::shared_ptr<format::Buffer> metadata;
  std::shared_ptr<format::Buffer> body;
  /// Ring sequence of the message.
  uint64_t sequence = 0;
  /// Batches lost just before this one: dropped by the ring (kDropOldest),
  /// or undecodable for want of dictionaries (DictionaryStats).
  uint64_t lost_before = 0;
};

/// What a subscriber did about dictionaries (schemas with
/// dictionary-encoded fields).
struct DictionaryStats {
  /// Dictionary messages received through the ring and applied.
  uint64_t messages_applied = 0;
  /// Producer snapshots loaded (at the first batch of a late joiner, and
  /// after a gap).
  uint64_t snapshots_loaded = 0;
  /// Batches that could not be decoded because the dictionaries they use
  /// were replaced before this subscriber could load them (a late joiner or
  /// a gap, while the producer kept changing its dictionaries); each is
  /// counted in the next batch's `lost_before`.
  uint64_t undecodable_batches = 0;
};

/// Options for BatchSubscriber::Open().
struct SubscriberOptions {
  /// How Receive waits (the ring's WaitMode and spin count). The `bodies`
  /// field is ignored: the subscriber supplies its own reader.
  shm::ConsumerOptions consumer;
  /// Decoding options (validation is always on).
  format::ipc::IpcReadOptions read;
};

/// Consumes batches of a known schema from a ring and its body segment, in
/// any process.
///
/// Every offset and length that comes from shared memory is checked: the
/// slot descriptor against the ring's inline capacity and the body block,
/// the Message by format::ipc::Message::Open and ReadRecordBatch (which
/// validate every buffer against the body). A bad message is reported as
/// an error for that message only. Every batch is structurally validated
/// (format::Validate; ValidateFull with IpcReadOptions::validate_full).
///
/// Decode cache: the subscriber keeps the shapes of the last four distinct
/// batches it decoded in full (their verified metadata bytes, body length,
/// and where each buffer lay). A message whose metadata is byte-identical to
/// one of them (compared on a private copy) and whose body has the same
/// length is rebuilt from that shape without verifying or parsing the flatbuffer; Validate is
/// re-run on it unless its verdict cannot depend on the values (columns of
/// fixed-width, struct and fixed-size-list types only).
///
/// Dictionaries: dictionary messages travel through the ring before the
/// batches that need them and are applied in order (zero-copy: the
/// dictionaries point into the shared blocks, like batch bodies). A
/// subscriber that starts after the first message, or loses messages, takes
/// the producer's snapshot of every current dictionary at its next batch
/// (docs/CLIENT.md, "Dictionaries"), so every batch it returns decodes with
/// exactly the dictionaries it was published with.
///
/// Lifetime: batches keep the body segment mapping and their block alive on
/// their own and may outlive the subscriber. Thread safety: Receive from one
/// thread at a time; received batches may be used and dropped anywhere.
class ALKAID_EXPORT BatchSubscriber {
 public:
  ~BatchSubscriber();
  BatchSubscriber(const BatchSubscriber&) = delete;
  BatchSubscriber& operator=(const BatchSubscriber&) = delete;

  /// Opens body segment `bodies_name` and registers as a consumer of ring
  /// `ring_name`.
  static Result<std::unique_ptr<BatchSubscriber>> Open(std::string_view ring_name,
                                                       std::string_view bodies_name,
                                                       format::SchemaPtr schema,
                                                       const SubscriberOptions& options = {});

  /// Same, through existing mappings (e.g. a consumer thread in the
  /// producer's process: RingProducer::segment(), BodyAllocator::segment()).
  static Result<std::unique_ptr<BatchSubscriber>> Open(std::shared_ptr<shm::Segment> ring,
                                                       std::shared_ptr<shm::Segment> bodies,
                                                       format::SchemaPtr schema,
                                                       const SubscriberOptions& options = {});

  /// The next batch, waiting up to `timeout`. TimedOut, EndOfStream (the
  /// producer closed the ring), Cancelled (detached), or the decoding error
  /// of a bad message (which is then skipped).
  Result<ReceivedBatch> Receive(std::chrono::nanoseconds timeout);

  /// The next batch if one is there; a null `batch` otherwise.
  Result<ReceivedBatch> TryReceive();

  const format::SchemaPtr& schema() const;
  /// The underlying ring consumer (id, sequence, lost count).
  const shm::RingConsumer& consumer() const;

  /// Messages decoded through the decode cache: their metadata bytes (and
  /// body length) equalled those of a message decoded in full before, so
  /// its verified, validated shape was replayed over the new body
  /// instead of verifying and parsing the flatbuffer again. Diagnostics.
  uint64_t decode_cache_hits() const;

  /// Dictionary messages and snapshots used, batches skipped.
  DictionaryStats dictionary_stats() const;

 private:
  struct Impl;
  explicit BatchSubscriber(std::unique_ptr<Impl> impl);
  Result<ReceivedBatch> Decode();
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::client
