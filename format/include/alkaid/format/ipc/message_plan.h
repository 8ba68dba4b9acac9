#pragma once

/// \file
/// MessagePlan: record batch Messages of a shape decoded before, made into
/// batches without decoding them again; MessagePlanCache: which plans a
/// reader keeps.
///
/// A reader that decoded a record batch Message in full (ReadRecordBatch)
/// has learned a shape: each array's type, length and null count, and where
/// each buffer lies in the body. When Messages of that shape come again (a
/// stream of like batches, a topic's batches), a plan makes their batches
/// over each new body with a format::BatchTemplate: no flatbuffer parsed,
/// no allocation in steady state, and validation only where its verdict can
/// differ from the first batch's. Two kinds:
/// - exact: Messages of the very bytes and body length the plan came from.
///   Their shape is the plan's, so of the structural Validate only the few
///   values it reads are read again (ShapeValidator);
/// - varying: Messages whose bytes are the plan's but for the numbers (row
///   count, each node's length and null count, each buffer's range: a batch
///   with a variable-width column has numbers of its own nearly every
///   time), read through a RecordBatchMessageTemplate and checked as the
///   reader checks them; each batch is validated as a decoded one is.
///
/// Never planned (decoded in full each time): compressed Messages,
/// dictionary-encoded columns, buffers the reader copied to align them;
/// varying plans also need layouts whose field nodes and buffers follow the
/// type one for one (no union, run-end encoding, view or null type) and a
/// Message that stores every number.
///
/// The bytes a plan compares against are its own copy. Safety rests on the
/// caller's Messages being private while they are taken and made (a
/// shared-memory reader copies them out first), and on each body being at
/// least as long as the Message says.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/batch_template.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/shape_validator.h"

namespace alkaid::format::ipc {

/// Makes the batches of the record batch Messages of one shape; see the
/// file comment. Thread safety: one thread at a time (Take and MakeBatch);
/// the batches may be used and dropped on any thread and outlive the plan.
class ALKAID_EXPORT MessagePlan {
 public:
  enum class Kind : uint8_t {
    kExact,    ///< the same Message bytes and body length
    kVarying,  ///< the same bytes but for the numbers
  };

  /// The plan of `batch`, which ReadRecordBatch(..., `options`) made from
  /// the record batch Message `message` (a verified flatbuffer) over `body`
  /// (its buffers lie inside `body`). Null when such Messages cannot be
  /// planned (see the file comment).
  static std::unique_ptr<MessagePlan> Make(Kind kind, const RecordBatch& batch, const Buffer& body,
                                           std::span<const uint8_t> message,
                                           const IpcReadOptions& options);
  /// Whether varying plans can be made for batches of `schema`.
  static bool CanVary(const Schema& schema);

  MessagePlan(const MessagePlan&) = delete;
  MessagePlan& operator=(const MessagePlan&) = delete;
  ~MessagePlan();

  /// Whether `message` with a body of `body_length` bytes is a Message of
  /// the plan: exact, the same bytes; varying, the same bytes but for the
  /// numbers, and numbers that pass the reader's checks (kept for the next
  /// MakeBatch). False: decode it in full (which says what is wrong).
  bool Take(std::span<const uint8_t> message, int64_t body_length);

  /// The batch of the Message taken (an exact plan's Messages need no Take
  /// when the caller knows they are its: a shape id) over the body at
  /// `base` (8-byte aligned, at least the Message's body length), keeping
  /// `keep` as BatchTemplate::Instantiate does, validated as ReadRecordBatch
  /// validates. On an error `*out` holds the batch refused.
  template <typename Keep>
  [[gnu::always_inline]] Status MakeBatch(const uint8_t* base, Keep&& keep, RecordBatchPtr* out,
                                          std::shared_ptr<Buffer>* body = nullptr) const {
    *out = Instantiate(base, std::forward<Keep>(keep), body);
    return validates() ? Validate(**out) : Status::OK();
  }
  /// MakeBatch in two steps, for a caller that keeps a Status off its fast
  /// path: the batch, not validated; whether it must be; the validation.
  template <typename Keep>
  [[gnu::always_inline]] RecordBatchPtr Instantiate(const uint8_t* base, Keep&& keep,
                                                    std::shared_ptr<Buffer>* body = nullptr) const {
    if (kind_ == Kind::kExact) return batches_->Instantiate(base, std::forward<Keep>(keep), body);
    return batches_->InstantiateWith(numbers_, base, std::forward<Keep>(keep), body);
  }
  bool validates() const { return validate_each_; }
  Status Validate(const RecordBatch& batch) const {
    return checker_ != nullptr ? checker_->Validate(batch) : ValidateAll(batch);
  }

  Kind kind() const { return kind_; }
  /// An exact plan's Message (its own copy), and its body length; null and
  /// -1 for a varying plan.
  const std::shared_ptr<Buffer>& message() const { return message_; }
  int64_t body_length() const { return body_length_; }

 private:
  struct Numbering;
  MessagePlan() = default;
  // Records `data` (a node of a batch decoded from `body`) into `shape`;
  // with `numbering`, also numbers its Message node and buffers.
  static bool Record(const ArrayData& data, const Buffer& body, BatchShape* shape, uint32_t* index,
                     Numbering* numbering);
  // Validate without a checker: ValidateFull or Validate.
  Status ValidateAll(const RecordBatch& batch) const;

  Kind kind_ = Kind::kExact;
  // Whether a batch made must be validated: a varying plan's always; an
  // exact plan's with validate_full, or when the structural verdict reads
  // values (offsets, run ends).
  bool validate_each_ = true;
  bool validate_full_ = false;
  bool decimal_precision_ = true;
  std::shared_ptr<BatchTemplate> batches_;
  std::unique_ptr<const ShapeValidator> checker_;  // exact, without validate_full
  std::shared_ptr<Buffer> message_;
  int64_t body_length_ = -1;
  // Varying: the Message's numbers mapped onto the template's, and the
  // numbers of the Message taken last.
  std::unique_ptr<Numbering> numbering_;
  BatchTemplate::Numbers numbers_;
};

/// The plans a reader of one schema keeps for the record batch Messages
/// that come again: exact plans of the last kEntries distinct Messages
/// decoded in full that came at least twice, varying plans of the last
/// kEntries structures that came twice in a row. Not thread-safe.
class ALKAID_EXPORT MessagePlanCache {
 public:
  static constexpr size_t kEntries = 4;

  /// For batches of `schema` read with `options` (kept: a plan validates as
  /// they say).
  MessagePlanCache(const Schema& schema, const IpcReadOptions& options);
  ~MessagePlanCache();
  MessagePlanCache(const MessagePlanCache&) = delete;
  MessagePlanCache& operator=(const MessagePlanCache&) = delete;

  /// The plan that took `message` with a body of `body_length` bytes
  /// (MessagePlan::Take), or null.
  MessagePlan* Find(std::span<const uint8_t> message, int64_t body_length);
  /// After `batch` was decoded in full from `message` over `body`: notes
  /// the Message, and makes a plan once it came again.
  void Learn(const RecordBatch& batch, const Buffer& body, std::span<const uint8_t> message);

 private:
  // Whether `message` came recently; otherwise notes it.
  bool SeenBefore(std::span<const uint8_t> message);

  IpcReadOptions options_;
  bool exact_possible_ = false;
  bool vary_possible_ = false;
  std::vector<std::unique_ptr<MessagePlan>> exact_;
  std::vector<std::unique_ptr<MessagePlan>> varying_;
  size_t next_exact_ = 0;
  size_t next_varying_ = 0;
  std::vector<std::vector<uint8_t>> recent_;
  size_t next_recent_ = 0;
  // The structure of the last Message decoded in full, to tell when one
  // comes again.
  std::optional<RecordBatchMessageTemplate> last_structure_;
};

}  // namespace alkaid::format::ipc
