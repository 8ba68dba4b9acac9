// BatchTemplate (batch_template.h): object graphs of one batch shape, made
// once and handed out again for each body.
//
// A graph is one RecordBatch, one ArrayData per node and one Buffer per
// present buffer, with a std::shared_ptr control block per *part*: the
// batch, each level of nesting (depth 0: the columns, depth 1: their
// children, ...) and the body. Every pointer into a part aliases that
// part's control block, so a copy taken anywhere owns the part. A part
// never points into itself, only into deeper parts (batch -> columns ->
// children -> ... -> body): no cycle, so each count falls to zero exactly
// when nothing outside the graph, and no shallower part, holds it.
//
// When a part's count falls to zero its deleter lets go of the pointers
// the part holds (the columns of the batch, a level's children and
// buffers, the body's keeper), which may free the deeper parts in turn.
// When the control block itself is freed (weak references included) the
// part is counted free; the last part freed returns the graph to the
// template's free list, on whatever thread that happens. The control
// blocks live in the graph (a slot per part), so no part allocates.

#include "alkaid/format/batch_template.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"

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

// Bytes for one part's control block (libstdc++'s _Sp_counted_deleter with
// our deleter and allocator is 48 bytes; the allocator checks at compile
// time that it fits).
constexpr size_t kControlBlockBytes = 96;

}  // namespace

struct BatchTemplate::Graph {
  Impl* owner = nullptr;
  Graph* next = nullptr;  // free-list link
  // Parts whose control block is still allocated; 0: the graph is free.
  std::atomic<uint32_t> live_parts{0};
  std::optional<RecordBatch> batch;
  std::vector<ArrayData> nodes;
  std::unique_ptr<TemplateBuffer[]> buffers;
  std::unique_ptr<std::byte[]> control_blocks;  // kControlBlockBytes per part
  alignas(std::max_align_t) std::byte keeper[kKeeperBytes];
  DropKeeper drop_keeper = nullptr;

  void* ControlBlock(uint32_t part) {
    return control_blocks.get() + static_cast<size_t>(part) * kControlBlockBytes;
  }
};

struct BatchTemplate::Impl {
  BatchTemplate* self = nullptr;
  // Levels of nesting; the parts are 0: the batch, 1..levels: the nodes
  // of depth 0..levels-1, levels+1: the body.
  uint32_t levels = 0;
  std::vector<std::shared_ptr<void>> level_parts;  // Instantiate's, reused
  uint32_t body_part() const { return levels + 1; }
  uint32_t parts() const { return levels + 2; }
  // Each present buffer: the node and buffer index it fills, where it lies
  // in the body, and the part (level) whose node holds it.
  struct BufferSlot {
    uint32_t node;
    uint32_t k;
    int64_t offset;
    int64_t size;
    uint32_t level;
  };
  std::vector<BufferSlot> buffer_slots;
  uint32_t num_buffers = 0;  // buffer_slots.size()
  // Each child pointer: the parent node and child index, the child node and
  // the child's level.
  struct ChildSlot {
    uint32_t node;
    uint32_t k;
    uint32_t child;
    uint32_t level;
    bool last;  // the last slot into its level: takes the level's reference
  };
  std::vector<ChildSlot> child_slots;

  // One for the owner (the shared_ptr Make returned), one per graph in
  // use; the template is deleted at zero.
  std::atomic<int64_t> refs{1};
  // Idle graphs: as many as were ever in use at once (a consumer that
  // holds many batches keeps that many graphs until the template goes).
  std::atomic<Graph*> returned{nullptr};  // pushed by any thread
  Graph* idle = nullptr;                  // taken by Instantiate's thread
  std::atomic<size_t> made{0};

  void Unref() {
    // Pairs with the acq_rel of every other Unref: the last one sees what
    // the others did to the graphs before they let go.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete self;
  }

  // A graph whose last part was freed (any thread).
  void Return(Graph* g) {
    Graph* head = returned.load(std::memory_order_relaxed);
    do {
      g->next = head;
      // Release: the graph's reset pointers are seen by the taker's acquire
      // exchange in Take.
    } while (!returned.compare_exchange_weak(head, g, std::memory_order_release,
                                             std::memory_order_relaxed));
    Unref();
  }

  Graph* Take() {
    if (idle == nullptr) idle = returned.exchange(nullptr, std::memory_order_acquire);
    Graph* g = idle;
    if (g != nullptr) idle = g->next;
    return g;
  }

  ~Impl() {
    for (Graph* list : {idle, returned.load(std::memory_order_acquire)}) {
      while (list != nullptr) {
        Graph* next = list->next;
        delete list;
        list = next;
      }
    }
  }
};

// A part's control block's deleter: its count fell to zero.
struct BatchTemplate::Deleter {
  Graph* graph;
  uint32_t part;
  void operator()(const void* /*unused*/) const { Dispose(graph, part); }
};

// The allocator of a part's control block: the part's slot in the graph.
// Freeing it counts the part free.
template <typename T>
struct BatchTemplate::Allocator {
  using value_type = T;
  Graph* graph;
  uint32_t part;

  Allocator(Graph* g, uint32_t p) : graph(g), part(p) {}
  template <typename U>
  explicit Allocator(const Allocator<U>& o) : graph(o.graph), part(o.part) {}

  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kControlBlockBytes && alignof(T) <= alignof(std::max_align_t),
                  "a control block must fit its slot");
    if (n != 1) throw std::bad_alloc();  // only one control block per part
    return static_cast<T*>(graph->ControlBlock(part));
  }
  void deallocate(T* /*p*/, size_t /*n*/) { PartFreed(graph); }
  template <typename U>
  bool operator==(const Allocator<U>& o) const {
    return graph == o.graph && part == o.part;
  }
};

void BatchTemplate::Dispose(Graph* g, uint32_t part) {
  Impl& im = *g->owner;
  if (part == 0) {
    for (auto& c : g->batch->columns_) c.reset();
  } else if (part == im.body_part()) {
    g->drop_keeper(g->keeper);
  } else {
    const uint32_t level = part - 1;
    for (const Impl::BufferSlot& b : im.buffer_slots) {
      if (b.level == level) g->nodes[b.node].buffers[b.k].reset();
    }
    for (const Impl::ChildSlot& c : im.child_slots) {
      // The parent is one level up from the child.
      if (c.level == level + 1) g->nodes[c.node].child_data[c.k].reset();
    }
  }
}

void BatchTemplate::PartFreed(Graph* g) {
  // Acq_rel: the last part to go sees what the others released (their
  // resets), and hands the graph on with them.
  if (g->live_parts.fetch_sub(1, std::memory_order_acq_rel) == 1) g->owner->Return(g);
}

BatchTemplate::BatchTemplate(BatchShape shape)
    : shape_(std::move(shape)), impl_(std::make_unique<Impl>()) {
  impl_->self = this;
}

BatchTemplate::~BatchTemplate() = default;

size_t BatchTemplate::graphs_made() const { return impl_->made.load(std::memory_order_relaxed); }

Result<std::shared_ptr<BatchTemplate>> BatchTemplate::Make(BatchShape shape) {
  if (shape.schema == nullptr) return Status::Invalid("BatchTemplate: null schema");
  if (shape.num_rows < 0) return Status::Invalid("BatchTemplate: negative row count");
  if (shape.columns.size() != static_cast<size_t>(shape.schema->num_fields())) {
    return Status::Invalid("BatchTemplate: ", shape.columns.size(), " columns for a schema of ",
                           shape.schema->num_fields(), " fields");
  }
  std::vector<uint32_t> depth(shape.nodes.size(), 0);
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
  // Depths, from the roots down (parents come after their children).
  uint32_t levels = shape.nodes.empty() ? 0 : 1;
  for (size_t i = shape.nodes.size(); i-- > 0;) {
    for (uint32_t c : shape.nodes[i].children) {
      depth[c] = depth[i] + 1;
      levels = std::max(levels, depth[c] + 1);
    }
  }
  auto* t = new BatchTemplate(std::move(shape));
  Impl& im = *t->impl_;
  const BatchShape& sh = t->shape_;
  for (uint32_t i = 0; i < sh.nodes.size(); ++i) {
    const BatchShape::Node& n = sh.nodes[i];
    for (uint32_t k = 0; k < n.buffers.size(); ++k) {
      if (n.buffers[k].offset >= 0) {
        im.buffer_slots.push_back({i, k, n.buffers[k].offset, n.buffers[k].size, depth[i]});
      }
    }
    for (uint32_t k = 0; k < n.children.size(); ++k) {
      im.child_slots.push_back({i, k, n.children[k], depth[n.children[k]], false});
    }
  }
  im.num_buffers = static_cast<uint32_t>(im.buffer_slots.size());
  for (size_t i = im.child_slots.size(); i-- > 0;) {
    bool later = false;
    for (size_t j = i + 1; j < im.child_slots.size(); ++j) {
      later = later || im.child_slots[j].level == im.child_slots[i].level;
    }
    im.child_slots[i].last = !later;
  }
  im.levels = levels;
  im.level_parts.resize(levels);
  // The owner's reference; graphs in use hold theirs.
  return std::shared_ptr<BatchTemplate>(t, [](BatchTemplate* p) { p->impl_->Unref(); });
}

RecordBatchPtr BatchTemplate::InstantiateErased(const uint8_t* base, MoveKeeper move,
                                                DropKeeper drop, void* keep,
                                                std::shared_ptr<Buffer>* body_out) {
  Impl& im = *impl_;
  Graph* g = im.Take();
  if (g == nullptr) {
    g = new Graph;
    g->owner = impl_.get();
    g->batch.emplace(RecordBatch::Key{}, shape_.schema, shape_.num_rows,
                     std::vector<ArrayDataPtr>(shape_.columns.size()));
    g->batch->metadata_ = shape_.metadata;
    g->nodes.resize(shape_.nodes.size());
    for (size_t i = 0; i < shape_.nodes.size(); ++i) {
      const BatchShape::Node& n = shape_.nodes[i];
      ArrayData& d = g->nodes[i];
      d.type = n.type;
      d.length = n.length;
      d.null_count = n.null_count;
      d.offset = n.offset;
      d.buffers.resize(n.buffers.size());
      d.child_data.resize(n.children.size());
    }
    // The present buffers, then the whole body.
    g->buffers = std::make_unique<TemplateBuffer[]>(im.num_buffers + 1);
    g->control_blocks = std::make_unique<std::byte[]>(im.parts() * kControlBlockBytes);
    im.made.fetch_add(1, std::memory_order_relaxed);
  }
  im.refs.fetch_add(1, std::memory_order_relaxed);  // the graph's, until it returns
  g->live_parts.store(im.parts(), std::memory_order_relaxed);
  move(g->keeper, keep);
  g->drop_keeper = drop;

  auto part = [g](uint32_t p) {
    return std::shared_ptr<void>(g, Deleter{g, p}, Allocator<void>(g, p));
  };
  {
    // The body part, held by every buffer; the levels from the deepest up,
    // each held by the one above (the batch holds level 0). The last
    // pointer into each part takes the part's first reference (a move, no
    // count taken and dropped).
    std::shared_ptr<void> body = part(im.body_part());
    std::vector<std::shared_ptr<void>>& level = im.level_parts;
    for (uint32_t d = im.levels; d-- > 0;) level[d] = part(1 + d);
    for (uint32_t i = 0; i < im.num_buffers; ++i) {
      const Impl::BufferSlot& b = im.buffer_slots[i];
      g->buffers[i].Point(base + b.offset, b.size);
      std::shared_ptr<Buffer>& slot = g->nodes[b.node].buffers[b.k];
      if (i + 1 == im.num_buffers && body_out == nullptr) {
        slot = std::shared_ptr<Buffer>(std::move(body), &g->buffers[i]);
      } else {
        slot = std::shared_ptr<Buffer>(body, &g->buffers[i]);
      }
    }
    if (body_out != nullptr) {
      g->buffers[im.num_buffers].Point(base, shape_.body_length);
      *body_out = std::shared_ptr<Buffer>(std::move(body), &g->buffers[im.num_buffers]);
    }
    for (const Impl::ChildSlot& c : im.child_slots) {
      ArrayDataPtr& slot = g->nodes[c.node].child_data[c.k];
      if (c.last) {
        slot = ArrayDataPtr(std::move(level[c.level]), &g->nodes[c.child]);
      } else {
        slot = ArrayDataPtr(level[c.level], &g->nodes[c.child]);
      }
    }
    const size_t columns = shape_.columns.size();
    for (size_t c = 0; c < columns; ++c) {
      ArrayData* node = &g->nodes[shape_.columns[c]];
      if (c + 1 == columns) {
        g->batch->columns_[c] = ArrayDataPtr(std::move(level[0]), node);
      } else {
        g->batch->columns_[c] = ArrayDataPtr(level[0], node);
      }
    }
    for (auto& l : level) l.reset();
  }
  return RecordBatchPtr(&*g->batch, Deleter{g, 0}, Allocator<RecordBatch>(g, 0));
}

}  // namespace alkaid::format
