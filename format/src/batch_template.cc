// BatchTemplate (batch_template.h): object graphs of one batch shape, made
// once and handed out again for each body.
//
// A graph is one RecordBatch, one ArrayData per node (and one more per
// extension node: its storage, the same buffers and children under the
// storage type), one Buffer per present buffer, and the typed Array of each
// node a column's array needs (RecordBatch::column's; not for a column with
// a dictionary type, whose array keeps an ArrayData of its own). A batch has one reference count,
// the batch count: a control block made for each batch at the same place in its graph (no
// allocation). Every pointer inside the graph (a batch's columns, a node's children and buffers) is
// a link: it names that control block without holding a count of it (its bits are written once,
// when the graph is made, and overwritten, never dropped, when the graph goes), so a copy of a link
// (a column, a child, a buffer, a slice or export taken from the batch) counts in the batch count
// as the batch pointers do. The count falls to zero exactly when nothing of the batch is held, on
// whichever thread drops the last pointer: the control block's deleter lets go of the body's keeper
// there, and freeing the control block (once no weak pointer names it either) returns the graph to
// the template. There is no sweep and no thread (the way of ObjectMemory, a pool's graph on the
// producer side).
//
// That a shared_ptr's bits may be copied, and an empty one's bits written
// over it, without its count changing, holds for every standard library we
// build with (a pointer and a control block pointer; ObjectMemory relies on
// the same, checked by ObjectMemoryTest.LinksHoldNoCount and here by
// BatchTemplateTest's counts of held bodies).

#include "alkaid/format/batch_template.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "array_internal.h"
#include "c_data_internal.h"
#include "column_box_internal.h"

namespace alkaid::format {

namespace {

// A buffer of a graph: re-pointed at each body.
class TemplateBuffer final : public Buffer {
 public:
  TemplateBuffer() = default;
  void Point(const uint8_t* data, int64_t size) {
    data_ = const_cast<uint8_t*>(data);
    size_ = size;
    capacity_ = size;
  }
};

// Bytes for the batch's control block (libstdc++'s _Sp_counted_deleter
// with our deleter and allocator is 40 bytes; the allocator checks at
// compile time that it fits).
constexpr size_t kControlBlockBytes = 96;

// Ends a link without touching the count it names (its bits overwritten by
// an empty pointer's).
template <typename T>
void Forget(std::shared_ptr<T>& link) {
  ::new (static_cast<void*>(&link)) std::shared_ptr<T>();
}

}  // namespace

struct BatchTemplate::Graph {
  // The control block's place comes first: it outlives every link below.
  alignas(std::max_align_t) std::byte batch_block[kControlBlockBytes];
  Impl* owner = nullptr;
  Graph* next = nullptr;  // link in the returned and idle lists
  // The bits of a pointer naming the control block at batch_block, holding
  // no count: what every link is made from (Link).
  std::shared_ptr<void> count;
  std::optional<RecordBatch> batch;
  // The shape's nodes, then the storage node of each extension node
  // (Impl::storage_nodes' order).
  std::vector<ArrayData> nodes;
  // The typed array of each node a column's array needs (null: none),
  // linked as the nodes are: its data, and its children's arrays, are
  // links. The batch's column boxes link to the columns' ones.
  std::vector<std::unique_ptr<Array>> arrays;
  std::unique_ptr<TemplateBuffer[]> buffers;  // the present ones, then the whole body
  alignas(std::max_align_t) std::byte keeper[kKeeperBytes];
  // The type `keeper` holds (null: none); a resident one stays from its
  // first batch until the graph goes. `holding`: it keeps a body now.
  const KeeperOps* keeper_ops = nullptr;
  bool holding = false;
  // The ArrowArray tree of the batch's exports, laid out once (c_data_export.cc).
  internal::ExportSlot export_slot;

  // A link to `to`, an object of this graph.
  template <typename T>
  std::shared_ptr<T> Link(T* to) const {
    static_assert(sizeof(std::shared_ptr<T>) == sizeof(count), "a pointer and a count");
    std::shared_ptr<void> bits;
    std::memcpy(static_cast<void*>(&bits), static_cast<const void*>(&count), sizeof(bits));
    // The aliasing move: the bits go over, no count changes; `bits` is empty.
    return std::shared_ptr<T>(std::move(bits), to);
  }

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    // Nothing of a batch is held (the graph is idle): the links are
    // forgotten, not dropped.
    for (ArrayData& d : nodes) {
      for (auto& b : d.buffers) Forget(b);
      for (auto& c : d.child_data) Forget(c);
    }
    if (batch.has_value()) {
      for (auto& c : batch->columns_) Forget(c);
      if (internal::ColumnBox* boxes = batch->boxes_.load(std::memory_order_relaxed)) {
        for (size_t i = 0; i < batch->columns_.size(); ++i) Forget(boxes[i].array);
      }
    }
    for (auto& a : arrays) {
      if (a != nullptr) internal::ForgetLinks(a.get());
    }
    Forget(count);
    LetGoOfBody();
    if (keeper_ops != nullptr) keeper_ops->destroy(keeper);
  }

  // The typed array of node `k` (its type one LinkableArrayType accepts),
  // made the first time it is asked for, with its children's.
  Array* ArrayOf(size_t k) {
    if (arrays[k] == nullptr) {
      const internal::ChildArrays children{&ChildArray, this, &StorageArray};
      arrays[k].reset(internal::NewLinkedArray(Link(&nodes[k]), children));
    }
    return arrays[k].get();
  }
  // ChildArrays' maker: a link to the array of `child` (a link to a node).
  static ArrayPtr ChildArray(void* graph, const ArrayDataPtr& child) {
    auto* g = static_cast<Graph*>(graph);
    return g->Link(g->ArrayOf(static_cast<size_t>(child.get() - g->nodes.data())));
  }
  // ChildArrays' storage maker: a link to the array of the storage node of
  // `extension` (a link to an extension node).
  static ArrayPtr StorageArray(void* graph, const ArrayDataPtr& extension);

  // Lets go of the body's keeper, once (a resident one stays, empty).
  void LetGoOfBody() {
    if (!holding) return;
    holding = false;
    const KeeperOps* ops = keeper_ops;
    // Nothing else reads the graph now (its batch is let go on this
    // thread): a keeper that is not resident is forgotten before it goes,
    // so that the let-go is the last call (a jump, no frame).
    if (!ops->resident) keeper_ops = nullptr;
    ops->let_go(keeper);
  }
};

// A lock-free stack of graphs pushed by any thread and taken whole.
struct BatchTemplate::GraphStack {
  std::atomic<Graph*> head{nullptr};
  void Push(Graph* g) {
    Graph* h = head.load(std::memory_order_relaxed);
    do {
      g->next = h;
      // Release: what the pusher did to the graph (its body let go) is seen
      // by the taker's acquire exchange.
    } while (
        !head.compare_exchange_weak(h, g, std::memory_order_release, std::memory_order_relaxed));
  }
  Graph* TakeAll() { return head.exchange(nullptr, std::memory_order_acquire); }
};

struct BatchTemplate::Impl {
  BatchTemplate* self = nullptr;
  // Each present buffer: the node and buffer index it fills and where it
  // lies in the body.
  struct BufferSlot {
    uint32_t node;
    uint32_t k;
    int64_t offset;
    int64_t size;
  };
  std::vector<BufferSlot> buffer_slots;
  uint32_t num_buffers = 0;  // buffer_slots.size()
  // Each extension node whose array the graph makes, and the graph node
  // that is its storage (after the shape's nodes, in this order).
  struct StorageNode {
    uint32_t extension;
    uint32_t storage;
  };
  std::vector<StorageNode> storage_nodes;

  // One for the owner (the shared_ptr Make returned), one per graph in
  // use; deleted at zero.
  std::atomic<int64_t> refs{1};
  GraphStack returned;    // graphs whose batch is let go, pushed by any thread
  Graph* idle = nullptr;  // Instantiate's thread's
  std::atomic<size_t> made{0};

  void Unref() {
    // Pairs with the acq_rel of every other Unref: the last one sees what
    // the others did to the graphs before they let go.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete self;
  }

  Graph* Take() {
    Graph* g = Idle();
    if (g != nullptr) Pop(g);
    return g;
  }
  // The next idle graph, or the first of those returned since when there
  // is none (null: neither); the caller takes it with Pop(g), which keeps
  // the rest of its list.
  Graph* Idle() { return idle != nullptr ? idle : returned.TakeAll(); }
  void Pop(Graph* g) { idle = g->next; }

  // Points graph `g`'s buffers at their places in a body at `base`.
  void PointBuffers(Graph* g, const uint8_t* base) const {
    const BufferSlot* slots = buffer_slots.data();
    for (uint32_t i = 0; i < num_buffers; ++i) {
      g->buffers[i].Point(base + slots[i].offset, slots[i].size);
    }
  }

  ~Impl() {
    for (Graph* list : {idle, returned.TakeAll()}) {
      while (list != nullptr) {
        Graph* next = list->next;
        delete list;
        list = next;
      }
    }
  }
};

// Called only while a graph is made (its arrays are made with it): the
// few extension nodes are looked through.
ArrayPtr BatchTemplate::Graph::StorageArray(void* graph, const ArrayDataPtr& extension) {
  auto* g = static_cast<Graph*>(graph);
  const auto k = static_cast<uint32_t>(extension.get() - g->nodes.data());
  for (const Impl::StorageNode& e : g->owner->storage_nodes) {
    if (e.extension == k) return g->Link(g->ArrayOf(e.storage));
  }
  return nullptr;  // not reached: NewLinkedArray asks only for extension nodes with a storage
}

// The batch count's deleter: nothing of the batch is held any more, on
// this thread's drop; the body goes now, even if weak pointers keep the
// control block (and with it the graph) a while longer.
struct BatchTemplate::Deleter {
  Graph* graph;
  void operator()(const void* /*unused*/) const { graph->LetGoOfBody(); }
};

// The allocator of the batch's control block: its place in the graph.
// Freeing it hands the graph back (PartFreed). `kLive` false: the probe
// NewGraph makes (with a deleter that does nothing), whose end returns
// nothing; a type of its own, so that a batch's deleter and allocator test
// nothing.
template <typename T, bool kLive>
struct BatchTemplate::Allocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = Allocator<U, kLive>;
  };
  Graph* graph;

  explicit Allocator(Graph* g) : graph(g) {}
  template <typename U>
  explicit Allocator(const Allocator<U, kLive>& o) : graph(o.graph) {}

  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kControlBlockBytes && alignof(T) <= alignof(std::max_align_t),
                  "a control block must fit its place");
    if (n != 1) throw std::bad_alloc();  // only one control block per place
    return static_cast<T*>(static_cast<void*>(graph->batch_block));
  }
  void deallocate(T* /*p*/, size_t /*n*/) {
    if constexpr (kLive) PartFreed(graph);
  }
  template <typename U>
  bool operator==(const Allocator<U, kLive>& o) const {
    return graph == o.graph;
  }
};

namespace {
// The probe's deleter (it owns a null pointer).
struct NoDeleter {
  void operator()(const void* /*unused*/) const {}
};
}  // namespace

// Inline (in this file only): the control block's end calls it directly.
inline void BatchTemplate::PartFreed(Graph* g) {
  // The batch's control block is free: nothing holds the batch or anything
  // of it, weakly or not, and its deleter let go of the body. The graph is
  // idle again (any thread).
  Impl& im = *g->owner;
  im.returned.Push(g);
  im.Unref();
}

BatchTemplate::BatchTemplate(BatchShape shape)
    : shape_(std::move(shape)), impl_(std::make_unique<Impl>()) {
  impl_->self = this;
}

BatchTemplate::~BatchTemplate() = default;

size_t BatchTemplate::graphs_made() const { return impl_->made.load(std::memory_order_relaxed); }

void BatchTemplate::Sweep() {}

Result<std::shared_ptr<BatchTemplate>> BatchTemplate::Make(BatchShape shape) {
  if (shape.schema == nullptr) return Status::Invalid("BatchTemplate: null schema");
  if (shape.num_rows < 0) return Status::Invalid("BatchTemplate: negative row count");
  if (shape.columns.size() != static_cast<size_t>(shape.schema->num_fields())) {
    return Status::Invalid("BatchTemplate: ", shape.columns.size(), " columns for a schema of ",
                           shape.schema->num_fields(), " fields");
  }
  std::vector<bool> has_parent(shape.nodes.size(), false);
  for (size_t i = 0; i < shape.nodes.size(); ++i) {
    const BatchShape::Node& n = shape.nodes[i];
    if (n.type == nullptr) return Status::Invalid("BatchTemplate: node ", i, " has no type");
    if (n.length < 0 || n.offset < 0) {
      return Status::Invalid("BatchTemplate: node ", i, " has a negative length or offset");
    }
    for (uint32_t c : n.children) {
      if (c >= i || has_parent[c]) {
        return Status::Invalid("BatchTemplate: node ", i, " names child ", c,
                               ", not an earlier node without a parent");
      }
      has_parent[c] = true;
    }
    for (const auto& b : n.buffers) {
      if (b.offset >= 0 && b.size < 0) {
        return Status::Invalid("BatchTemplate: node ", i, ": negative size");
      }
    }
  }
  for (size_t c = 0; c < shape.columns.size(); ++c) {
    const uint32_t root = shape.columns[c];
    if (root >= shape.nodes.size() || has_parent[root]) {
      return Status::Invalid("BatchTemplate: column ", c, " names node ", root,
                             ", not a root node");
    }
    has_parent[root] = true;
    const BatchShape::Node& n = shape.nodes[root];
    if (n.length != shape.num_rows || !n.type->Equals(*shape.schema->field(c)->type())) {
      return Status::Invalid("BatchTemplate: column ", c, " does not match field '",
                             shape.schema->field(c)->name(), "'");
    }
  }
  if (std::find(has_parent.begin(), has_parent.end(), false) != has_parent.end()) {
    return Status::Invalid("BatchTemplate: a node belongs to no column");
  }
  auto* t = new BatchTemplate(std::move(shape));
  Impl& im = *t->impl_;
  const BatchShape& sh = t->shape_;
  for (uint32_t i = 0; i < sh.nodes.size(); ++i) {
    const BatchShape::Node& n = sh.nodes[i];
    for (uint32_t k = 0; k < n.buffers.size(); ++k) {
      if (n.buffers[k].offset >= 0) {
        im.buffer_slots.push_back({i, k, n.buffers[k].offset, n.buffers[k].size});
      }
    }
  }
  im.num_buffers = static_cast<uint32_t>(im.buffer_slots.size());
  for (uint32_t i = 0; i < sh.nodes.size(); ++i) {
    if (sh.nodes[i].type->id() == TypeId::kExtension &&
        internal::LinkableArrayType(*sh.nodes[i].type)) {
      const auto storage = static_cast<uint32_t>(sh.nodes.size() + im.storage_nodes.size());
      im.storage_nodes.push_back({i, storage});
    }
  }
  // The owner's reference; graphs in use hold theirs.
  return std::shared_ptr<BatchTemplate>(t, [](BatchTemplate* p) { p->impl_->Unref(); });
}

BatchTemplate::Graph* BatchTemplate::NewGraph() {
  Impl& im = *impl_;
  auto g = std::make_unique<Graph>();
  g->owner = &im;
  g->nodes.resize(shape_.nodes.size() + im.storage_nodes.size());
  g->buffers = std::make_unique<TemplateBuffer[]>(im.num_buffers + 1);
  {
    // A control block made at batch_block and ended at once (its deleter
    // and allocator do nothing): its bits are what the links are made of.
    // Each batch's is made at the same place.
    RecordBatchPtr probe(static_cast<RecordBatch*>(nullptr), NoDeleter{},
                         Allocator<RecordBatch, false>(g.get()));
    static_assert(sizeof(probe) == sizeof(g->count), "a pointer and a count");
    std::memcpy(static_cast<void*>(&g->count), static_cast<const void*>(&probe), sizeof(probe));
  }
  for (size_t i = 0; i < shape_.nodes.size(); ++i) {
    const BatchShape::Node& n = shape_.nodes[i];
    ArrayData& d = g->nodes[i];
    d.type = n.type;
    d.length = n.length;
    d.null_count = n.null_count;
    d.offset = n.offset;
    d.buffers.resize(n.buffers.size());
    d.child_data.reserve(n.children.size());
    for (uint32_t c : n.children) d.child_data.push_back(g->Link(&g->nodes[c]));
  }
  for (uint32_t i = 0; i < im.num_buffers; ++i) {
    const Impl::BufferSlot& b = im.buffer_slots[i];
    g->nodes[b.node].buffers[b.k] = g->Link<Buffer>(&g->buffers[i]);
  }
  // Each extension node's storage: its numbers, buffers and children under
  // the storage type (links to the same objects).
  for (const Impl::StorageNode& e : im.storage_nodes) {
    const ArrayData& x = g->nodes[e.extension];
    ArrayData& d = g->nodes[e.storage];
    d.type = static_cast<const ExtensionType&>(*x.type).storage_type();
    d.length = x.length;
    d.null_count = x.null_count;
    d.offset = x.offset;
    d.buffers.resize(x.buffers.size());
    for (size_t k = 0; k < x.buffers.size(); ++k) {
      if (x.buffers[k] != nullptr) d.buffers[k] = g->Link(x.buffers[k].get());
    }
    d.child_data.reserve(x.child_data.size());
    for (const auto& c : x.child_data) d.child_data.push_back(g->Link(c.get()));
  }
  std::vector<ArrayDataPtr> columns;
  columns.reserve(shape_.columns.size());
  for (uint32_t c : shape_.columns) columns.push_back(g->Link(&g->nodes[c]));
  g->batch.emplace(RecordBatch::Key{}, shape_.schema, shape_.num_rows, std::move(columns));
  g->batch->metadata_ = shape_.metadata;
  g->batch->export_slot_ = &g->export_slot;
  // column(i)'s arrays, made now with the graph: a link to each column's
  // array, or (a dictionary type in it) one per call.
  g->arrays.resize(g->nodes.size());
  auto* boxes = new internal::ColumnBox[shape_.columns.size()];
  for (size_t c = 0; c < shape_.columns.size(); ++c) {
    const uint32_t root = shape_.columns[c];
    if (internal::LinkableArrayType(*shape_.nodes[root].type)) {
      boxes[c].array = g->Link(g->ArrayOf(root));
      boxes[c].state.store(internal::ColumnBox::kReady, std::memory_order_relaxed);
    } else {
      boxes[c].state.store(internal::ColumnBox::kPerCall, std::memory_order_relaxed);
    }
  }
  // Relaxed: the graph reaches other threads only in a batch handed out.
  g->batch->boxes_.store(boxes, std::memory_order_relaxed);
  g->export_slot.varying = shape_.varying;
  im.made.fetch_add(1, std::memory_order_relaxed);
  return g.release();
}

// TakeGraph for a resident keeper the caller takes into the graph itself:
// where it goes, and whether one of this type is there already.
inline BatchTemplate::Graph* BatchTemplate::TakeGraphFor(const KeeperOps* ops,
                                                         ResidentPlace* place) {
  Graph* g = impl_->Take();
  if (g == nullptr) g = NewGraph();
  TakeGraphWith(g, ops, place);
  return g;
}

// TakeGraphFor's steps once graph `g` is taken (idle or new).
inline void BatchTemplate::TakeGraphWith(Graph* g, const KeeperOps* ops, ResidentPlace* place) {
  impl_->refs.fetch_add(1, std::memory_order_relaxed);  // the graph's, until it returns
  if (g->keeper_ops != ops && g->keeper_ops != nullptr) {
    g->keeper_ops->destroy(g->keeper);  // a resident keeper of another type
    g->keeper_ops = nullptr;
  }
  place->keeper = g->keeper;
  place->there = g->keeper_ops != nullptr;
  g->keeper_ops = ops;
  g->holding = true;
}

// Instantiate's first half: an idle graph (or a new one), holding the
// keeper.
inline BatchTemplate::Graph* BatchTemplate::TakeGraph(const KeeperOps* ops, void* keep) {
  ResidentPlace place;
  Graph* g = TakeGraphFor(ops, &place);
  ops->take(place.keeper, keep, place.there);
  return g;
}

// Instantiate's second half: the batch's count made, the whole-body buffer
// if asked, and the batch.
inline RecordBatchPtr BatchTemplate::HandOut(Graph* g, const uint8_t* base, int64_t body_length,
                                             std::shared_ptr<Buffer>* body_out) {
  RecordBatchPtr batch(&*g->batch, Deleter{g}, Allocator<RecordBatch, true>(g));
  if (body_out != nullptr) {
    const uint32_t whole = impl_->num_buffers;
    g->buffers[whole].Point(base, body_length);
    *body_out = std::shared_ptr<Buffer>(batch, &g->buffers[whole]);
  }
  return batch;
}

RecordBatchPtr BatchTemplate::InstantiateErased(const uint8_t* base, const KeeperOps* ops,
                                                void* keep, std::shared_ptr<Buffer>* body_out) {
  Graph* g = TakeGraph(ops, keep);
  impl_->PointBuffers(g, base);
  return HandOut(g, base, shape_.body_length, body_out);
}

BatchTemplate::ResidentPlace BatchTemplate::InstantiateResident(const uint8_t* base,
                                                                const KeeperOps* ops,
                                                                RecordBatchPtr* out,
                                                                std::shared_ptr<Buffer>* body_out) {
  Impl& im = *impl_;
  Graph* g = im.Idle();
  if (g == nullptr || g->keeper_ops != ops || body_out != nullptr) [[unlikely]] {
    return InstantiateResidentSlow(g, base, ops, out, body_out);
  }
  // TakeGraphFor's steps for a graph that holds a keeper of this type.
  im.Pop(g);
  im.refs.fetch_add(1, std::memory_order_relaxed);  // the graph's, until it returns
  g->holding = true;
  im.PointBuffers(g, base);
  // Made in place: `*out` is empty (Instantiate's own), so nothing is let
  // go there (an assignment would test it, in a frame of its own).
  ::new (static_cast<void*>(out))
      RecordBatchPtr(&*g->batch, Deleter{g}, Allocator<RecordBatch, true>(g));
  return {g->keeper, true};
}

// InstantiateResident's other cases: no idle graph (`g` null: a new one),
// a graph without a keeper of this type yet, a whole-body buffer asked for.
[[gnu::noinline]] BatchTemplate::ResidentPlace BatchTemplate::InstantiateResidentSlow(
    Graph* g, const uint8_t* base, const KeeperOps* ops, RecordBatchPtr* out,
    std::shared_ptr<Buffer>* body_out) {
  Impl& im = *impl_;
  if (g != nullptr) {
    im.Pop(g);
  } else {
    g = NewGraph();
  }
  ResidentPlace place;
  TakeGraphWith(g, ops, &place);
  im.PointBuffers(g, base);
  *out = HandOut(g, base, shape_.body_length, body_out);
  return place;
}

RecordBatchPtr BatchTemplate::InstantiateErasedWith(const Numbers& numbers, const uint8_t* base,
                                                    const KeeperOps* ops, void* keep,
                                                    std::shared_ptr<Buffer>* body_out) {
  Graph* g = TakeGraph(ops, keep);
  // The graph is idle (taken above): nothing else reads its nodes now.
  g->batch->num_rows_ = numbers.num_rows;
  for (size_t i = 0; i < shape_.nodes.size(); ++i) {
    g->nodes[i].length = numbers.nodes[i].length;
    g->nodes[i].null_count = numbers.nodes[i].null_count;
  }
  for (const Impl::StorageNode& e : impl_->storage_nodes) {
    g->nodes[e.storage].length = g->nodes[e.extension].length;
    g->nodes[e.storage].null_count = g->nodes[e.extension].null_count;
  }
  for (uint32_t i = 0; i < impl_->num_buffers; ++i) {
    g->buffers[i].Point(base + numbers.buffers[i].offset, numbers.buffers[i].size);
  }
  return HandOut(g, base, numbers.body_length, body_out);
}

}  // namespace alkaid::format
