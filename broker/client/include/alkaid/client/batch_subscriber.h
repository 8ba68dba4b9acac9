#pragma once

/// \file
/// Receiving record batches published by a BatchPublisher, zero-copy: the
/// arrays' buffers point into the producer's channel arena, mapped
/// read-only.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "alkaid/client/batch_view.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"

namespace alkaid::client {

/// One received batch.
struct ReceivedBatch {
  /// The batch; its buffers point into the shared body block, which stays
  /// held (the producer does not reuse it) until the last buffer is
  /// dropped.
  format::RecordBatchPtr batch;
  /// The Message flatbuffer (a private copy) and the body (the shared
  /// region): framed together they form a valid encapsulated IPC message,
  /// e.g. to append to a stream file without re-encoding. (With
  /// dictionary-encoded fields a stream also needs the dictionary messages,
  /// which are not returned: write such batches with an IPC writer, which
  /// emits them, as `alkaid subscribe` does.)
  std::shared_ptr<format::Buffer> metadata;
  std::shared_ptr<format::Buffer> body;
  /// Channel sequence of the message.
  uint64_t sequence = 0;
  /// Batches lost just before this one: dropped by the channel
  /// (kDropOldest), or undecodable for want of dictionaries
  /// (DictionaryStats).
  uint64_t lost_before = 0;
};

/// What a subscriber did about dictionaries (schemas with
/// dictionary-encoded fields).
struct DictionaryStats {
  /// Dictionary messages received through the channel and applied.
  uint64_t messages_applied = 0;
  /// Replays of every current dictionary taken (a consumer that started
  /// after the first message, or lost messages while some dictionary
  /// changed).
  uint64_t replays_loaded = 0;
  /// Batches that could not be decoded because this subscriber did not know
  /// their dictionaries yet (published before the replay that reached it:
  /// from_oldest, or after a gap); each is counted in the next batch's
  /// `lost_before`.
  uint64_t undecodable_batches = 0;
};

/// How much a consumer checks of what a producer sends (docs/RELIABILITY.md,
/// "Trust between processes").
enum class Verification : uint8_t {
  /// Every offset and length read from the slot and the Message, and every
  /// buffer's place in the body, checked; each batch structurally validated
  /// (format::Validate: buffer sizes, the first and last offset). Zero-copy
  /// and cheap. Values are not read: an inner offset, a dictionary index, a
  /// view's buffer index or offset, a run end or a list view's offset may
  /// point anywhere, and code that reads the values follows it. For
  /// producers you trust (the same program, the same team).
  kStructure,
  /// As kStructure, plus format::ValidateFull on every batch (every offset,
  /// index and run end read and checked), still zero-copy. Protects against
  /// a buggy producer; not against a hostile one, which can rewrite the body
  /// after the check (nothing can check against that in shared memory).
  kFull,
  /// Each body (and dictionary body) copied into private memory, its block
  /// returned at once, and the copy validated in full before use: what the
  /// consumer then reads cannot change and has been checked. For producers
  /// you do not trust. One copy per batch (its cost: docs/RELIABILITY.md,
  /// "Trust between processes").
  kPrivateCopy,
};

/// "structure", "full", "private-copy".
ALKAID_EXPORT const char* VerificationName(Verification v);

/// Options for BatchSubscriber::Open().
struct SubscriberOptions {
  /// How Receive waits, and where the subscriber starts.
  shm::ChannelConsumerOptions consumer;
  /// Decoding options (validation is always on; validate_full is implied
  /// by Verification::kFull and kPrivateCopy).
  format::ipc::IpcReadOptions read;
  Verification verification = Verification::kStructure;
  /// Fill ReceivedBatch::metadata and ReceivedBatch::body. A caller that
  /// only wants the batch (Consumer) sets false: two fewer reference counts
  /// taken and dropped per batch.
  bool with_message = true;
};

/// Consumes batches of a known schema from a channel, in any process.
///
/// Every offset and length that comes from shared memory is checked: the
/// user word and inline payload against the body block, the Message by
/// format::ipc::Message::Open and ReadRecordBatch (which validate every
/// buffer against the body). A bad message is reported as an error for that
/// message only. Every batch is structurally validated (format::Validate;
/// ValidateFull with IpcReadOptions::validate_full).
///
/// Decode cache: a message that names a shape of the channel's table
/// (a batch of a shape the producer published before) is made by the plan
/// made when that shape was first decoded in full (the shape's bytes are
/// copied out of shared memory once, verified, parsed and validated).
/// Messages with their metadata inline or in the region are compared with
/// the last four distinct ones decoded in full (on a private copy). A plan
/// makes its batches from recycled objects (format::BatchTemplate): a
/// receive of a cached shape allocates nothing in steady state. Validate
/// is re-run on each batch unless its verdict cannot depend on the values
/// (columns of fixed-width, struct and fixed-size-list types only), and
/// ValidateFull on each with Verification::kFull and kPrivateCopy.
///
/// Dictionaries: dictionary messages travel through the channel before the
/// batches that need them and are applied in order (zero-copy: the
/// dictionaries point into the shared blocks, like batch bodies). A
/// subscriber that starts after the first message, or loses messages while
/// a dictionary changed, takes the producer's replay of every current
/// dictionary, which reaches it before its next batch (docs/CLIENT.md,
/// "Dictionaries"), so every batch it returns decodes with exactly the
/// dictionaries it was published with.
///
/// Lifetime: batches keep their block (and the mapping) alive on their own
/// and may outlive the subscriber. Thread safety: Receive from one thread
/// at a time; received batches may be used and dropped anywhere.
class ALKAID_EXPORT BatchSubscriber {
 public:
  ~BatchSubscriber();
  BatchSubscriber(const BatchSubscriber&) = delete;
  BatchSubscriber& operator=(const BatchSubscriber&) = delete;

  /// Maps channel `channel_name` read-only and registers as its consumer.
  static Result<std::unique_ptr<BatchSubscriber>> Open(std::string_view channel_name,
                                                       format::SchemaPtr schema,
                                                       const SubscriberOptions& options = {});

  /// The next batch, waiting up to `timeout`. TimedOut, EndOfStream (the
  /// producer closed the channel), Cancelled (detached), or the decoding error
  /// of a bad message (which is then skipped).
  Result<ReceivedBatch> Receive(std::chrono::nanoseconds timeout);

  /// The next batch if one is there; a null `batch` otherwise.
  Result<ReceivedBatch> TryReceive();

  /// The next batch if one is there into `*batch` (null if none; the batch
  /// it held is let go), the cheapest receive: no Result and no
  /// ReceivedBatch (neither its metadata nor its body buffer is made, as
  /// with SubscriberOptions::with_message false); last_sequence() and
  /// last_lost_before() tell of the batch. Errors as TryReceive().
  Status TryReceive(format::RecordBatchPtr* batch);
  /// As TryReceive(batch), waiting up to `timeout`; errors as Receive().
  Status Receive(format::RecordBatchPtr* batch, std::chrono::nanoseconds timeout);
  /// The channel sequence of the batch the last receive returned (any of
  /// the calls above), and the batches lost just before it.
  uint64_t last_sequence() const;
  uint64_t last_lost_before() const;

  /// Deprecated: Receive allocates nothing in steady state either. The
  /// next batch into `view` (which lets go of the batch it held), waiting
  /// up to `timeout`; errors as Receive.
  [[deprecated("use Receive: it allocates nothing for a cached shape")]] Status ReceiveInto(
      BatchView* view, std::chrono::nanoseconds timeout);
  /// Deprecated: use TryReceive. As ReceiveInto if a batch is there: true,
  /// else false.
  [[deprecated("use TryReceive")]] Result<bool> TryReceiveInto(BatchView* view);

  const format::SchemaPtr& schema() const;
  /// When the producer published the batch the last Receive or TryReceive
  /// returned: CLOCK_REALTIME ns, 0 unless the channel stamps publish times
  /// (shm::ChannelOptions::stamp_publish_time). Read from the message the
  /// subscriber keeps, so a receive pays nothing for it.
  uint64_t last_publish_ns() const;
  /// The underlying channel consumer (index, sequence, lost count).
  const shm::ChannelConsumer& consumer() const;
  /// The same, for its doorbell (DoorbellFd, ArmDoorbell).
  shm::ChannelConsumer& mutable_consumer();

  /// Messages decoded through the decode cache: a shape id seen before, or
  /// metadata bytes (and body length) equal to those of a message decoded
  /// in full before, so its verified plan made the batch over the new body
  /// instead of verifying and parsing the flatbuffer again.
  /// Diagnostics.
  uint64_t decode_cache_hits() const;

  /// Dictionary messages and replays used, batches skipped.
  DictionaryStats dictionary_stats() const;

 private:
  struct Impl;
  explicit BatchSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::client
