// BatchTemplate (batch_template.h): object graphs of one batch shape, made
// once and handed out again for each body.
//
// A graph is one RecordBatch, one ArrayData per node and one Buffer per
// present buffer. Every pointer inside the graph (a batch's columns, a
// node's children and buffers) aliases one control block, the graph's
// anchor, and is made once, when the graph is: the anchor's count is then
// `quiet` (the anchor itself plus those pointers) whenever nothing outside
// the graph points into it. Each handed-out batch gets a control block of
// its own, the batch count, made in the graph (no allocation) and counted
// by the caller's copies of the batch pointer only.
//
// So a batch costs two counts, not one per node: its own, which falls to
// zero when the caller drops the last batch pointer, and the anchor's,
// which a pointer taken from the batch (a column, a child, a buffer, a
// slice, an export) raises. When the batch's control block is freed the
// graph is quiet or not: quiet, its body's keeper goes and the graph is
// idle again; not, something taken from it is still held (and holds the
// body), and the graph waits on the template's pinned list until a sweep
// finds it quiet. Sweeps run in Instantiate and Sweep (the decoding
// thread), and for a template whose owner is gone on a reaper thread.
//
// Reading the anchor's count is a relaxed load followed by an acquire
// fence: every holder's last drop is an acq_rel decrement of that count,
// so whatever a holder did with the body happens before the graph is
// reused. No pointer into a quiet graph can appear: taking one needs the
// batch (whose count is gone) or a pointer already held (none is).

#include "alkaid/format/batch_template.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "c_data_internal.h"

// Built with ThreadSanitizer (gcc's macro, clang's feature test).
#if defined(__SANITIZE_THREAD__)
#define ALKAID_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ALKAID_TSAN 1
#endif
#endif
#ifndef ALKAID_TSAN
#define ALKAID_TSAN 0
#endif

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

// Bytes for one control block (libstdc++'s _Sp_counted_deleter with our
// deleter and allocator is 48 bytes; the allocator checks at compile time
// that it fits).
constexpr size_t kControlBlockBytes = 96;

// Pinned graphs looked at (the oldest first) per Instantiate, so that a
// graph let go shortly after its batch is taken again soon; more when no
// graph is idle, before another is made; and per Sweep. Bounded, so that a
// caller who keeps a column of every batch pays a constant per batch, not
// one per batch kept.
constexpr int kSweepPerInstantiate = 2;
constexpr int kSweepBeforeMaking = 8;
constexpr int kSweepPerCall = 64;

}  // namespace

struct BatchTemplate::Graph {
  // The control blocks' memory comes first: it outlives every pointer below.
  alignas(std::max_align_t) std::byte anchor_block[kControlBlockBytes];
  alignas(std::max_align_t) std::byte batch_block[kControlBlockBytes];
  Impl* owner = nullptr;
  Graph* next = nullptr;  // link in the returned, idle and pinned lists
  std::shared_ptr<void> anchor;
  long quiet = 0;  // the anchor's count when nothing outside holds a node
  std::optional<RecordBatch> batch;
  std::vector<ArrayData> nodes;
  std::unique_ptr<TemplateBuffer[]> buffers;  // the present ones, then the whole body
  alignas(std::max_align_t) std::byte keeper[kKeeperBytes];
  // The type `keeper` holds (null: none); a resident one stays from its
  // first batch until the graph goes. `holding`: it keeps a body now.
  const KeeperOps* keeper_ops = nullptr;
  bool holding = false;
  // The ArrowArray tree of the batch's exports, laid out once (c_data_export.cc).
  internal::ExportSlot export_slot;

  bool Quiet() const {
    const long n = anchor.use_count();
    // Acquire: pairs with the acq_rel decrement of each holder's last drop.
    std::atomic_thread_fence(std::memory_order_acquire);
#if ALKAID_TSAN
    // ThreadSanitizer does not model a fence: the same pairing through an
    // acq_rel decrement of the count (no holder outside can appear meanwhile).
    if (n == quiet) std::shared_ptr<void>(anchor).reset();
#endif
    return n == quiet;
  }
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    LetGoOfBody();
    if (keeper_ops != nullptr) keeper_ops->destroy(keeper);
  }

  // Lets go of the body's keeper, once (a resident one stays, empty).
  void LetGoOfBody() {
    if (!holding) return;
    holding = false;
    keeper_ops->let_go(keeper);
    if (!keeper_ops->resident) keeper_ops = nullptr;
  }
};

// A lock-free stack of graphs pushed by any thread and taken whole.
struct BatchTemplate::GraphStack {
  std::atomic<Graph*> head{nullptr};
  void Push(Graph* g) {
    Graph* h = head.load(std::memory_order_relaxed);
    do {
      g->next = h;
      // Seq_cst (release at least): what the pusher did to the graph is
      // seen by the taker's exchange; seq_cst for PartFreed's pairing with
      // the owner's going (see Orphan).
    } while (
        !head.compare_exchange_weak(h, g, std::memory_order_seq_cst, std::memory_order_relaxed));
  }
  Graph* TakeAll() { return head.exchange(nullptr, std::memory_order_acquire); }
  bool empty() const { return head.load(std::memory_order_seq_cst) == nullptr; }
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

  // One for the owner (the shared_ptr Make returned), one per graph in use
  // or pinned, one for the reaper while it watches; deleted at zero.
  std::atomic<int64_t> refs{1};
  std::atomic<bool> orphaned{false};  // the owner is gone
  GraphStack returned;                // quiet graphs, pushed by any thread
  GraphStack pinned_in;               // not yet quiet, pushed by any thread
  // The sweeping thread's (Instantiate's, or the reaper's once orphaned).
  Graph* idle = nullptr;
  Graph* pinned_head = nullptr;  // oldest first
  Graph* pinned_tail = nullptr;
  std::atomic<size_t> made{0};

  void Unref() {
    // Pairs with the acq_rel of every other Unref: the last one sees what
    // the others did to the graphs before they let go.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete self;
  }

  // A quiet graph: its keeper goes, and it is idle again (any thread).
  void Return(Graph* g) {
    g->LetGoOfBody();
    returned.Push(g);
    Unref();
  }

  void PinLocal(Graph* g) {
    g->next = nullptr;
    if (pinned_tail == nullptr) {
      pinned_head = g;
    } else {
      pinned_tail->next = g;
    }
    pinned_tail = g;
  }

  // Moves newly pinned graphs to the local list (oldest first), then looks
  // at up to `budget` of the oldest (all when negative): the quiet ones are
  // returned. True if graphs are still pinned.
  bool Sweep(int budget) {
    Graph* in = pinned_in.TakeAll();
    Graph* reversed = nullptr;
    while (in != nullptr) {
      Graph* next = in->next;
      in->next = reversed;
      reversed = in;
      in = next;
    }
    while (reversed != nullptr) {
      Graph* next = reversed->next;
      PinLocal(reversed);
      reversed = next;
    }
    Graph* keep_head = nullptr;
    Graph* keep_tail = nullptr;
    while (pinned_head != nullptr && budget-- != 0) {
      Graph* g = pinned_head;
      pinned_head = g->next;
      if (pinned_head == nullptr) pinned_tail = nullptr;
      if (g->Quiet()) {
        Return(g);  // may delete this template (the reaper's last graph)
        continue;
      }
      g->next = nullptr;
      if (keep_tail == nullptr) {
        keep_head = g;
      } else {
        keep_tail->next = g;
      }
      keep_tail = g;
    }
    // The ones still pinned go to the back: the next sweep starts with
    // those it has not looked at.
    if (keep_head != nullptr) {
      if (pinned_tail == nullptr) {
        pinned_head = keep_head;
      } else {
        pinned_tail->next = keep_head;
      }
      pinned_tail = keep_tail;
    }
    return pinned_head != nullptr;
  }

  Graph* Take() {
    if (idle == nullptr) idle = returned.TakeAll();
    Graph* g = idle;
    if (g != nullptr) idle = g->next;
    return g;
  }

  ~Impl() {
    for (Graph* list : {idle, returned.TakeAll(), pinned_head, pinned_in.TakeAll()}) {
      while (list != nullptr) {
        Graph* next = list->next;
        delete list;
        list = next;
      }
    }
  }
};

// Sweeps the templates whose owner is gone while graphs of theirs are still
// pinned (held through a column, buffer, slice or export taken from a
// batch), so that their bodies are let go soon after the last such pointer
// is dropped even though nobody decodes with them any more. A thread runs
// while there are any, and ends when there are none.
class BatchTemplate::Reaper {
 public:
  static Reaper& Get() {
    // Never destroyed: its thread may outlive static destruction at exit.
    static Reaper* reaper = new Reaper;
    return *reaper;
  }

  // Watches `im` until nothing of it is pinned, holding a reference to it
  // meanwhile.
  void Watch(Impl* im) {
    std::lock_guard<std::mutex> lock(mutex_);
    WatchLocked(im);
  }

  // The owner of `im` goes: from now on the reaper sweeps it, if anything
  // of it is pinned now or gets pinned later (PartFreed then calls Watch).
  void Orphan(Impl* im) {
    // The owner's last sweep: what is already let go needs no reaper thread.
    im->Sweep(-1);
    std::lock_guard<std::mutex> lock(mutex_);
    // Seq_cst, with PartFreed's push and load: either this sees the graph it
    // pinned, or it sees `orphaned` (both: watched twice, which is harmless).
    im->orphaned.store(true, std::memory_order_seq_cst);
    if (im->pinned_head != nullptr || !im->pinned_in.empty()) WatchLocked(im);
  }

 private:
  void WatchLocked(Impl* im) {
    im->refs.fetch_add(1, std::memory_order_relaxed);
    watched_.push_back(im);
    if (!running_ || pid_ != ::getpid()) {  // a fork has no thread of ours
      running_ = true;
      pid_ = ::getpid();
      std::thread([this] { Run(); }).detach();
    }
  }

  void Run() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::vector<Impl*> done;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < watched_.size();) {
          Impl* im = watched_[i];
          if (im->Sweep(-1)) {
            ++i;
          } else {
            done.push_back(im);
            watched_[i] = watched_.back();
            watched_.pop_back();
          }
        }
        if (watched_.empty() && done.empty()) {
          running_ = false;
          return;
        }
      }
      for (Impl* im : done) im->Unref();
    }
  }

  std::mutex mutex_;
  std::vector<Impl*> watched_;
  bool running_ = false;
  pid_t pid_ = 0;
};

// The control blocks' deleter: a batch's count fell to zero (the anchor's
// falls to zero only when its graph is deleted: nothing to do then). If
// nothing taken from the batch is held either, the body goes now, even if
// weak pointers keep the batch's control block (and with it the graph) a
// while longer.
struct BatchTemplate::Deleter {
  Graph* graph = nullptr;  // null: the anchor's
  void operator()(const void* /*unused*/) const {
    if (graph != nullptr && graph->Quiet()) graph->LetGoOfBody();
  }
};

// The allocator of a control block: its place in the graph. Freeing the
// batch's block hands the graph back (PartFreed).
template <typename T>
struct BatchTemplate::Allocator {
  using value_type = T;
  Graph* graph;
  uint32_t part;  // 0: the batch's block, 1: the anchor's

  Allocator(Graph* g, uint32_t p) : graph(g), part(p) {}
  template <typename U>
  explicit Allocator(const Allocator<U>& o) : graph(o.graph), part(o.part) {}

  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kControlBlockBytes && alignof(T) <= alignof(std::max_align_t),
                  "a control block must fit its place");
    if (n != 1) throw std::bad_alloc();  // only one control block per place
    return static_cast<T*>(
        static_cast<void*>(part == 0 ? graph->batch_block : graph->anchor_block));
  }
  void deallocate(T* /*p*/, size_t /*n*/) {
    if (part == 0) PartFreed(graph);
  }
  template <typename U>
  bool operator==(const Allocator<U>& o) const {
    return graph == o.graph && part == o.part;
  }
};

void BatchTemplate::PartFreed(Graph* g) {
  // The batch's block is free: nothing holds the batch, weakly or not. The
  // graph was quiet when the count fell (the body is gone), or is now.
  Impl& im = *g->owner;
  if (!g->holding || g->Quiet()) {
    im.Return(g);
    return;
  }
  // Something taken from the batch is still held: a sweep returns the graph
  // once it is let go (the owner's, or the reaper's once the owner is gone).
  im.pinned_in.Push(g);
  if (im.orphaned.load(std::memory_order_seq_cst)) Reaper::Get().Watch(&im);
}

BatchTemplate::BatchTemplate(BatchShape shape)
    : shape_(std::move(shape)), impl_(std::make_unique<Impl>()) {
  impl_->self = this;
}

BatchTemplate::~BatchTemplate() = default;

size_t BatchTemplate::graphs_made() const { return impl_->made.load(std::memory_order_relaxed); }

void BatchTemplate::Sweep() {
  Impl& im = *impl_;
  if (im.pinned_head != nullptr || !im.pinned_in.empty()) im.Sweep(kSweepPerCall);
}

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
  // The owner's reference; graphs in use or pinned hold theirs. Graphs
  // still pinned when the owner goes are the reaper's to sweep.
  return std::shared_ptr<BatchTemplate>(t, [](BatchTemplate* p) {
    Impl* owner = p->impl_.get();
    Reaper::Get().Orphan(owner);
    owner->Unref();
  });
}

BatchTemplate::Graph* BatchTemplate::NewGraph() {
  Impl& im = *impl_;
  auto g = std::make_unique<Graph>();
  g->owner = &im;
  g->nodes.resize(shape_.nodes.size());
  g->buffers = std::make_unique<TemplateBuffer[]>(im.num_buffers + 1);
  // The graph's own pointers, made once: each aliases the anchor.
  g->anchor = std::shared_ptr<void>(g.get(), Deleter{}, Allocator<void>(g.get(), 1));
  for (size_t i = 0; i < shape_.nodes.size(); ++i) {
    const BatchShape::Node& n = shape_.nodes[i];
    ArrayData& d = g->nodes[i];
    d.type = n.type;
    d.length = n.length;
    d.null_count = n.null_count;
    d.offset = n.offset;
    d.buffers.resize(n.buffers.size());
    d.child_data.reserve(n.children.size());
    for (uint32_t c : n.children) d.child_data.emplace_back(g->anchor, &g->nodes[c]);
  }
  for (uint32_t i = 0; i < im.num_buffers; ++i) {
    const Impl::BufferSlot& b = im.buffer_slots[i];
    g->nodes[b.node].buffers[b.k] = std::shared_ptr<Buffer>(g->anchor, &g->buffers[i]);
  }
  std::vector<ArrayDataPtr> columns;
  columns.reserve(shape_.columns.size());
  for (uint32_t c : shape_.columns) columns.emplace_back(g->anchor, &g->nodes[c]);
  g->batch.emplace(RecordBatch::Key{}, shape_.schema, shape_.num_rows, std::move(columns));
  g->batch->metadata_ = shape_.metadata;
  g->batch->export_slot_ = &g->export_slot;
  g->export_slot.varying = shape_.varying;
  g->quiet = g->anchor.use_count();
  im.made.fetch_add(1, std::memory_order_relaxed);
  return g.release();
}

// Instantiate's first half: an idle graph (swept for, or made), holding
// the keeper.
inline BatchTemplate::Graph* BatchTemplate::TakeGraph(const KeeperOps* ops, void* keep) {
  Impl& im = *impl_;
  const bool pinned = im.pinned_head != nullptr || !im.pinned_in.empty();
  if (pinned) im.Sweep(kSweepPerInstantiate);
  Graph* g = im.Take();
  if (g == nullptr && pinned) {
    // Before making another graph, look at more of the pinned ones.
    im.Sweep(kSweepBeforeMaking);
    g = im.Take();
  }
  if (g == nullptr) g = NewGraph();
  im.refs.fetch_add(1, std::memory_order_relaxed);  // the graph's, until it returns
  if (g->keeper_ops != ops && g->keeper_ops != nullptr) {
    g->keeper_ops->destroy(g->keeper);  // a resident keeper of another type
    g->keeper_ops = nullptr;
  }
  ops->take(g->keeper, keep, g->keeper_ops != nullptr);
  g->keeper_ops = ops;
  g->holding = true;
  return g;
}

// Instantiate's second half: the whole-body buffer if asked, and the batch.
inline RecordBatchPtr BatchTemplate::HandOut(Graph* g, const uint8_t* base, int64_t body_length,
                                             std::shared_ptr<Buffer>* body_out) {
  const uint32_t whole = impl_->num_buffers;
  if (body_out != nullptr) {
    g->buffers[whole].Point(base, body_length);
    *body_out = std::shared_ptr<Buffer>(g->anchor, &g->buffers[whole]);
  }
  return RecordBatchPtr(&*g->batch, Deleter{g}, Allocator<RecordBatch>(g, 0));
}

RecordBatchPtr BatchTemplate::InstantiateErased(const uint8_t* base, const KeeperOps* ops,
                                                void* keep, std::shared_ptr<Buffer>* body_out) {
  Graph* g = TakeGraph(ops, keep);
  const Impl::BufferSlot* slots = impl_->buffer_slots.data();
  for (uint32_t i = 0; i < impl_->num_buffers; ++i) {
    g->buffers[i].Point(base + slots[i].offset, slots[i].size);
  }
  return HandOut(g, base, shape_.body_length, body_out);
}

RecordBatchPtr BatchTemplate::InstantiateErasedWith(const Numbers& numbers, const uint8_t* base,
                                                    const KeeperOps* ops, void* keep,
                                                    std::shared_ptr<Buffer>* body_out) {
  Graph* g = TakeGraph(ops, keep);
  // The graph is idle (taken above): nothing else reads its nodes now.
  g->batch->num_rows_ = numbers.num_rows;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    g->nodes[i].length = numbers.nodes[i].length;
    g->nodes[i].null_count = numbers.nodes[i].null_count;
  }
  for (uint32_t i = 0; i < impl_->num_buffers; ++i) {
    g->buffers[i].Point(base + numbers.buffers[i].offset, numbers.buffers[i].size);
  }
  return HandOut(g, base, numbers.body_length, body_out);
}

}  // namespace alkaid::format
