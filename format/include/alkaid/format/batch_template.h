#pragma once

/// \file
/// BatchTemplate: record batches of one shape made without allocating.
///
/// A decoder that sees many batches of one shape (a consumer of a topic, a
/// reader of a file of equal batches) learns the shape once: each array's
/// type, length, null count, offset, and where its buffers lie in the
/// message body. A BatchTemplate keeps ready-made object graphs of that
/// shape (the RecordBatch, one ArrayData per array, one Buffer per buffer,
/// and the typed Array of each column and of its children, which
/// RecordBatch::column returns) and hands one out per body: only the buffers' addresses change, and
/// a graph whose batch was dropped is taken again for the next body. In steady state a batch costs
/// no heap allocation.
///
/// The batches are ordinary RecordBatches: every API works on them, and
/// every pointer taken from one owns what it points to, whatever it is
/// taken from (a column, a child, a buffer, a slice) and on whatever
/// thread it is dropped. A batch has one reference count, not one per
/// node: the batch pointers and every pointer taken from the batch share
/// it (the graph's own links between its nodes hold none). When the last
/// of them goes, on whichever thread, the body's keeper (a shared-memory
/// block, say) is let go there and then, and the graph is idle again. No
/// sweep and no thread: a column kept after its batch holds the body until
/// it is dropped, and not a moment longer.
///
/// A weak_ptr taken from the batch or from anything of it expires with the
/// batch's count; while one exists the graph is not reused (its control
/// block lives on), though the body goes with the count.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// The shape of a batch, as a decoder learned it.
struct BatchShape {
  /// One array: a column or a child of one.
  struct Node {
    TypePtr type;
    int64_t length = 0;
    int64_t null_count = 0;
    int64_t offset = 0;
    /// The array's buffers, in layout order: where each lies in the body
    /// (`offset` from the body's start), or absent (`offset` < 0).
    struct BufferRange {
      int64_t offset = -1;
      int64_t size = 0;
    };
    std::vector<BufferRange> buffers;
    /// Indexes of the children in `nodes`; each below this node's index.
    std::vector<uint32_t> children;
  };
  SchemaPtr schema;
  int64_t num_rows = 0;
  /// The batch's custom metadata (null: none).
  MetadataPtr metadata;
  /// Children before their parents.
  std::vector<Node> nodes;
  /// The root node of each column.
  std::vector<uint32_t> columns;
  /// Bytes of the body from `base`, for the whole-body buffer Instantiate
  /// can hand out.
  int64_t body_length = 0;
  /// The numbers (row count, lengths, null counts, buffer ranges, body
  /// length) come with each batch: the template's batches are made by
  /// InstantiateWith (those above are the first batch's). An export parked
  /// in such a graph takes each batch's numbers again.
  bool varying = false;
};

/// Makes record batches of one shape over successive bodies; see the file
/// comment. Thread safety: Instantiate from one thread at a time; the
/// batches may be used and dropped on any thread, and may outlive the
/// template.
class ALKAID_EXPORT BatchTemplate {
 public:
  /// Bytes a body keeper may take (Instantiate's `keep`).
  static constexpr size_t kKeeperBytes = 64;

  /// A template of `shape`. Checks the shape's structure (indexes, column
  /// count and types against the schema, lengths), not the bodies: the
  /// caller has validated what the shape came from.
  static Result<std::shared_ptr<BatchTemplate>> Make(BatchShape shape);

  BatchTemplate(const BatchTemplate&) = delete;
  BatchTemplate& operator=(const BatchTemplate&) = delete;

  /// A batch of the shape over the body at `base` (each buffer at `base`
  /// plus its offset), keeping `keep` (moved in; any movable object of at
  /// most kKeeperBytes, e.g. the handle of a shared-memory block) until the
  /// batch and everything taken from it are dropped. Allocates only when
  /// every graph made so far is still in use. With `body`, also a buffer of
  /// the whole body (BatchShape::body_length bytes), held like the others.
  ///
  /// A keeper type with `void TakeFrom(Keep*)` and `void Release()`
  /// (shm::ChannelBlock) is *resident*: a graph makes one the first time
  /// and keeps it until the graph itself goes, taking each batch's keeper
  /// into it (TakeFrom) and releasing it when the batch is let go
  /// (Release), so that what the keepers share (a consumer's return queue)
  /// is referenced once per graph, not once per batch. Other keepers are
  /// moved in and destroyed per batch.
  template <typename Keep>
  [[gnu::always_inline]] RecordBatchPtr Instantiate(const uint8_t* base, Keep&& keep,
                                                    std::shared_ptr<Buffer>* body = nullptr) {
    if constexpr (Keeper<Keep>::kResident) {
      // The batch is made first and the keeper taken into its graph here,
      // where the keeper's type is known: no indirect call per batch.
      // Nothing else sees the batch before it is returned.
      RecordBatchPtr batch;
      const ResidentPlace place = InstantiateResident(base, &Keeper<Keep>::kOps, &batch, body);
      Keeper<Keep>::Take(place.keeper, &keep, place.there);
      return batch;
    } else {
      return InstantiateErased(base, &Keeper<Keep>::kOps, &keep, body);
    }
  }

  /// One batch's numbers, for a template of a `varying` shape.
  struct Numbers {
    int64_t num_rows = 0;
    int64_t body_length = 0;
    /// Per node of the shape, in BatchShape::nodes' order.
    struct Node {
      int64_t length = 0;
      int64_t null_count = 0;
    };
    const Node* nodes = nullptr;
    /// Per present buffer of the shape (offset >= 0 there), nodes in order
    /// and each node's buffers in order: where it lies in the body.
    const BatchShape::Node::BufferRange* buffers = nullptr;
  };

  /// Instantiate, with the numbers of this batch in place of the shape's.
  /// The caller has checked them against the body (each buffer inside it)
  /// and validates the batch made, as it would a decoded one.
  template <typename Keep>
  RecordBatchPtr InstantiateWith(const Numbers& numbers, const uint8_t* base, Keep&& keep,
                                 std::shared_ptr<Buffer>* body = nullptr) {
    return InstantiateErasedWith(numbers, base, &Keeper<Keep>::kOps, &keep, body);
  }

  /// Does nothing. (It let go of bodies held through something taken from
  /// a batch once that was dropped; each body now goes with the last
  /// pointer of its batch.) Kept for callers; deprecated.
  [[deprecated(
      "BatchTemplate::Sweep does nothing: a body goes with its batch's last pointer")]] void
  Sweep();

  /// The shape the template makes.
  const BatchShape& shape() const { return shape_; }
  /// Graphs made so far (in use or idle). Diagnostics.
  size_t graphs_made() const;

 private:
  struct Graph;
  struct Impl;
  struct Deleter;
  struct GraphStack;
  template <typename T, bool kLive>
  struct Allocator;
  explicit BatchTemplate(BatchShape shape);
  ~BatchTemplate();

  // A batch's control block was freed: the graph is returned.
  static void PartFreed(Graph* g);
  Graph* NewGraph();

  // How a graph holds a keeper of one type (Keeper<Keep>::kOps).
  struct KeeperOps {
    // Puts `from`'s keeper into the graph's storage `to`; `there`: `to`
    // holds a resident keeper of this type already.
    void (*take)(void* to, void* from, bool there);
    // The batch is let go: a resident keeper releases, others are destroyed.
    void (*let_go)(void* p);
    // The graph goes: destroys a resident keeper.
    void (*destroy)(void* p);
    bool resident;
  };
  template <typename Keep>
  struct Keeper {
    static_assert(!std::is_lvalue_reference_v<Keep>,
                  "the keeper is moved in: pass an rvalue (std::move, or a temporary)");
    using K = std::remove_cv_t<Keep>;
    static_assert(sizeof(K) <= kKeeperBytes && alignof(K) <= alignof(std::max_align_t),
                  "a body keeper must fit BatchTemplate::kKeeperBytes");
    static constexpr bool kResident = requires(K & k) {
      k.TakeFrom(&k);
      k.Release();
    };
    static void Take(void* to, void* from, bool there) {
      if constexpr (kResident) {
        if (!there) ::new (to) K();
        static_cast<K*>(to)->TakeFrom(static_cast<K*>(from));
      } else {
        (void)there;
        ::new (to) K(std::move(*static_cast<K*>(from)));
      }
    }
    static void LetGo(void* p) {
      if constexpr (kResident) {
        static_cast<K*>(p)->Release();
      } else {
        static_cast<K*>(p)->~K();
      }
    }
    static void Destroy(void* p) { static_cast<K*>(p)->~K(); }
    static constexpr KeeperOps kOps{&Take, &LetGo, &Destroy, kResident};
  };
  RecordBatchPtr InstantiateErased(const uint8_t* base, const KeeperOps* ops, void* keep,
                                   std::shared_ptr<Buffer>* body);
  // Where a resident keeper goes: the graph's storage, and whether it
  // holds one of this type already (Keeper::Take's `there`).
  struct ResidentPlace {
    void* keeper = nullptr;
    bool there = false;
  };
  // InstantiateErased for a resident keeper (`ops->resident`) that the
  // caller takes into the place returned itself, before anything else sees
  // the batch (made into `*out`, empty before). Its common case (an idle graph that holds
  // a keeper of this type already, no whole-body buffer) needs no frame;
  // the rest is InstantiateResidentSlow's.
  ResidentPlace InstantiateResident(const uint8_t* base, const KeeperOps* ops, RecordBatchPtr* out,
                                    std::shared_ptr<Buffer>* body);
  ResidentPlace InstantiateResidentSlow(Graph* g, const uint8_t* base, const KeeperOps* ops,
                                        RecordBatchPtr* out, std::shared_ptr<Buffer>* body);
  RecordBatchPtr InstantiateErasedWith(const Numbers& numbers, const uint8_t* base,
                                       const KeeperOps* ops, void* keep,
                                       std::shared_ptr<Buffer>* body);
  Graph* TakeGraph(const KeeperOps* ops, void* keep);
  Graph* TakeGraphFor(const KeeperOps* ops, ResidentPlace* place);
  void TakeGraphWith(Graph* g, const KeeperOps* ops, ResidentPlace* place);
  RecordBatchPtr HandOut(Graph* g, const uint8_t* base, int64_t body_length,
                         std::shared_ptr<Buffer>* body_out);

  BatchShape shape_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::format
