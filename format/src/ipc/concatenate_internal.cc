#include "concatenate_internal.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "alkaid/format/array.h"

namespace alkaid::format::ipc::internal {

namespace {

using BufferPtr = std::shared_ptr<Buffer>;

Result<std::shared_ptr<ResizableBuffer>> Allocate(int64_t size, MemoryPool* pool) {
  return AllocateBuffer(size, pool);
}

class Concatenator {
 public:
  Concatenator(const std::vector<ArrayDataPtr>& in, MemoryPool* pool) : in_(in), pool_(pool) {}

  Result<ArrayDataPtr> Run() {
    out_ = std::make_shared<ArrayData>();
    out_->type = in_[0]->type;
    for (const auto& a : in_) {
      if (!a->type->Equals(*out_->type)) {
        return Status::TypeError("cannot concatenate ", a->type->ToString(), " with ",
                                 out_->type->ToString());
      }
      out_->length += a->length;
    }
    out_->null_count = 0;
    const DataType& storage = StorageType(*out_->type);
    const TypeId id = storage.id();
    if (id == TypeId::kNull) {
      out_->null_count = out_->length;
      out_->buffers = {nullptr};
      return out_;
    }
    if (storage.layout().has_validity) ALKAID_RETURN_NOT_OK(ConcatValidity());
    switch (id) {
      case TypeId::kBool:
        ALKAID_RETURN_NOT_OK(ConcatBits(1));
        break;
      case TypeId::kBinary:
      case TypeId::kString:
        ALKAID_RETURN_NOT_OK(ConcatBinary<int32_t>());
        break;
      case TypeId::kLargeBinary:
      case TypeId::kLargeString:
        ALKAID_RETURN_NOT_OK(ConcatBinary<int64_t>());
        break;
      case TypeId::kBinaryView:
      case TypeId::kStringView:
        ALKAID_RETURN_NOT_OK(ConcatViews());
        break;
      case TypeId::kList:
      case TypeId::kMap:
        ALKAID_RETURN_NOT_OK(ConcatList<int32_t>());
        break;
      case TypeId::kLargeList:
        ALKAID_RETURN_NOT_OK(ConcatList<int64_t>());
        break;
      case TypeId::kListView:
        ALKAID_RETURN_NOT_OK(ConcatListView<int32_t>());
        break;
      case TypeId::kLargeListView:
        ALKAID_RETURN_NOT_OK(ConcatListView<int64_t>());
        break;
      case TypeId::kFixedSizeList: {
        const int64_t n = static_cast<const FixedSizeListType&>(storage).list_size();
        std::vector<ArrayDataPtr> kids;
        for (const auto& a : in_)
          kids.push_back(a->child_data[0]->Slice(a->offset * n, a->length * n));
        ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
        out_->child_data = {child};
        break;
      }
      case TypeId::kStruct:
        for (int c = 0; c < storage.num_fields(); ++c) {
          std::vector<ArrayDataPtr> kids;
          for (const auto& a : in_) kids.push_back(a->child_data[c]->Slice(a->offset, a->length));
          ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
          out_->child_data.push_back(child);
        }
        break;
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion:
        ALKAID_RETURN_NOT_OK(ConcatUnion(id == TypeId::kDenseUnion, storage.num_fields()));
        break;
      case TypeId::kRunEndEncoded:
        ALKAID_RETURN_NOT_OK(ConcatRunEnds(storage));
        break;
      case TypeId::kDictionary: {
        const auto& dict = static_cast<const DictionaryType&>(storage);
        ALKAID_RETURN_NOT_OK(ConcatFixed(BitWidth(dict.index_type()->id()) / 8));
        out_->dictionary = in_.back()->dictionary;
        break;
      }
      default: {
        const auto& layout = storage.layout();
        if (layout.buffers.size() != 2 ||
            layout.buffers[1].kind != DataTypeLayout::BufferKind::kFixedWidth) {
          return Status::NotImplemented("concatenation of ", storage.ToString());
        }
        ALKAID_RETURN_NOT_OK(ConcatFixed(layout.buffers[1].byte_width));
        break;
      }
    }
    return out_;
  }

 private:
  Status ConcatValidity() {
    int64_t nulls = 0;
    for (const auto& a : in_) nulls += a->GetNullCount();
    out_->null_count = nulls;
    if (nulls == 0) {
      out_->buffers.push_back(nullptr);
      return Status::OK();
    }
    ALKAID_ASSIGN_OR_RAISE(auto bitmap, Allocate(bit_util::BytesForBits(out_->length), pool_));
    int64_t pos = 0;
    for (const auto& a : in_) {
      if (a->HasValidityBitmap()) {
        bit_util::CopyBitmap(a->buffers[0]->data(), a->offset, a->length, bitmap->mutable_data(),
                             pos);
      } else {
        for (int64_t i = 0; i < a->length; ++i) bit_util::SetBit(bitmap->mutable_data(), pos + i);
      }
      pos += a->length;
    }
    out_->buffers.push_back(std::move(bitmap));
    return Status::OK();
  }

  Status ConcatBits(int buffer_index) {
    ALKAID_ASSIGN_OR_RAISE(auto bits, Allocate(bit_util::BytesForBits(out_->length), pool_));
    int64_t pos = 0;
    for (const auto& a : in_) {
      bit_util::CopyBitmap(a->buffers[buffer_index]->data(), a->offset, a->length,
                           bits->mutable_data(), pos);
      pos += a->length;
    }
    out_->buffers.push_back(std::move(bits));
    return Status::OK();
  }

  Status ConcatFixed(int64_t width) {
    ALKAID_ASSIGN_OR_RAISE(auto values, Allocate(out_->length * width, pool_));
    uint8_t* dst = values->mutable_data();
    for (const auto& a : in_) {
      const int64_t n = a->length * width;
      if (n > 0)
        std::memcpy(dst, a->buffers[1]->data() + a->offset * width, static_cast<size_t>(n));
      dst += n;
    }
    out_->buffers.push_back(std::move(values));
    return Status::OK();
  }

  // Writes re-based offsets for all inputs; returns the [begin, end) child
  // range of each input in `ranges`.
  template <typename O>
  Status ConcatOffsets(std::vector<std::pair<int64_t, int64_t>>* ranges) {
    ALKAID_ASSIGN_OR_RAISE(auto offsets,
                           Allocate((out_->length + 1) * static_cast<int64_t>(sizeof(O)), pool_));
    O* dst = offsets->template mutable_data_as<O>();
    int64_t base = 0;
    int64_t pos = 0;
    for (const auto& a : in_) {
      const O* src = a->GetValues<O>(1);
      const int64_t begin = a->length > 0 ? src[0] : 0;
      const int64_t end = a->length > 0 ? src[a->length] : 0;
      for (int64_t i = 0; i < a->length; ++i) dst[pos + i] = static_cast<O>(src[i] - begin + base);
      pos += a->length;
      base += end - begin;
      if (base > std::numeric_limits<O>::max()) {
        return Status::CapacityError("concatenated offsets overflow ", sizeof(O) * 8,
                                     "-bit offsets");
      }
      ranges->emplace_back(begin, end);
    }
    dst[pos] = static_cast<O>(base);
    out_->buffers.push_back(std::move(offsets));
    return Status::OK();
  }

  template <typename O>
  Status ConcatBinary() {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ALKAID_RETURN_NOT_OK(ConcatOffsets<O>(&ranges));
    int64_t total = 0;
    for (const auto& r : ranges) total += r.second - r.first;
    ALKAID_ASSIGN_OR_RAISE(auto data, Allocate(total, pool_));
    uint8_t* dst = data->mutable_data();
    for (size_t i = 0; i < in_.size(); ++i) {
      const int64_t n = ranges[i].second - ranges[i].first;
      if (n > 0)
        std::memcpy(dst, in_[i]->buffers[2]->data() + ranges[i].first, static_cast<size_t>(n));
      dst += n;
    }
    out_->buffers.push_back(std::move(data));
    return Status::OK();
  }

  template <typename O>
  Status ConcatList() {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ALKAID_RETURN_NOT_OK(ConcatOffsets<O>(&ranges));
    std::vector<ArrayDataPtr> kids;
    for (size_t i = 0; i < in_.size(); ++i) {
      kids.push_back(
          in_[i]->child_data[0]->Slice(ranges[i].first, ranges[i].second - ranges[i].first));
    }
    ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
    out_->child_data = {child};
    return Status::OK();
  }

  template <typename O>
  Status ConcatListView() {
    const int64_t w = sizeof(O);
    ALKAID_ASSIGN_OR_RAISE(auto offsets, Allocate(out_->length * w, pool_));
    ALKAID_ASSIGN_OR_RAISE(auto sizes, Allocate(out_->length * w, pool_));
    O* od = offsets->template mutable_data_as<O>();
    O* sd = sizes->template mutable_data_as<O>();
    int64_t base = 0;
    int64_t pos = 0;
    std::vector<ArrayDataPtr> kids;
    for (const auto& a : in_) {
      const O* os = a->GetValues<O>(1);
      const O* ss = a->GetValues<O>(2);
      for (int64_t i = 0; i < a->length; ++i) {
        od[pos + i] = ss[i] == 0 ? 0 : static_cast<O>(os[i] + base);
        sd[pos + i] = ss[i];
      }
      pos += a->length;
      base += a->child_data[0]->length;
      kids.push_back(a->child_data[0]);
    }
    if (base > std::numeric_limits<O>::max()) {
      return Status::CapacityError("concatenated list view children overflow offsets");
    }
    out_->buffers.push_back(std::move(offsets));
    out_->buffers.push_back(std::move(sizes));
    ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
    out_->child_data = {child};
    return Status::OK();
  }

  Status ConcatViews() {
    ALKAID_ASSIGN_OR_RAISE(auto views, Allocate(out_->length * 16, pool_));
    auto* dst = views->mutable_data_as<BinaryViewHeader>();
    std::vector<BufferPtr> data_buffers;
    int64_t pos = 0;
    for (const auto& a : in_) {
      const int32_t shift = static_cast<int32_t>(data_buffers.size());
      const auto* src = a->GetValues<BinaryViewHeader>(1);
      for (int64_t i = 0; i < a->length; ++i) {
        BinaryViewHeader h;
        std::memcpy(&h, src + i, sizeof(h));
        if (!h.is_inline()) h.ref.buffer_index += shift;
        std::memcpy(dst + pos + i, &h, sizeof(h));
      }
      pos += a->length;
      for (size_t b = 2; b < a->buffers.size(); ++b) data_buffers.push_back(a->buffers[b]);
    }
    out_->buffers.push_back(std::move(views));
    for (auto& b : data_buffers) out_->buffers.push_back(std::move(b));
    return Status::OK();
  }

  Status ConcatUnion(bool dense, int num_children) {
    out_->buffers.clear();  // unions have no validity bitmap
    ALKAID_ASSIGN_OR_RAISE(auto codes, Allocate(out_->length, pool_));
    int64_t pos = 0;
    for (const auto& a : in_) {
      if (a->length > 0) {
        std::memcpy(codes->mutable_data() + pos, a->buffers[0]->data() + a->offset,
                    static_cast<size_t>(a->length));
      }
      pos += a->length;
    }
    out_->buffers.push_back(std::move(codes));
    const auto& type = static_cast<const UnionType&>(StorageType(*out_->type));
    if (!dense) {
      for (int c = 0; c < num_children; ++c) {
        std::vector<ArrayDataPtr> kids;
        for (const auto& a : in_) kids.push_back(a->child_data[c]->Slice(a->offset, a->length));
        ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
        out_->child_data.push_back(child);
      }
      return Status::OK();
    }
    ALKAID_ASSIGN_OR_RAISE(auto offsets, Allocate(out_->length * 4, pool_));
    auto* od = offsets->mutable_data_as<int32_t>();
    std::vector<int64_t> base(static_cast<size_t>(num_children), 0);
    pos = 0;
    for (const auto& a : in_) {
      const auto* cs = a->GetValues<int8_t>(0);
      const auto* os = a->GetValues<int32_t>(1);
      for (int64_t i = 0; i < a->length; ++i) {
        const int child = type.child_ids()[static_cast<size_t>(cs[i])];
        od[pos + i] = static_cast<int32_t>(os[i] + base[static_cast<size_t>(child)]);
      }
      pos += a->length;
      for (int c = 0; c < num_children; ++c)
        base[static_cast<size_t>(c)] += a->child_data[c]->length;
    }
    out_->buffers.push_back(std::move(offsets));
    for (int c = 0; c < num_children; ++c) {
      std::vector<ArrayDataPtr> kids;
      for (const auto& a : in_) kids.push_back(a->child_data[c]);
      ALKAID_ASSIGN_OR_RAISE(auto child, Concatenate(kids, pool_));
      out_->child_data.push_back(child);
    }
    return Status::OK();
  }

  template <typename R>
  Status AppendRunEnds(const ArrayData& a, std::vector<int64_t>* ends, int64_t base,
                       std::pair<int64_t, int64_t>* physical) {
    const ArrayData& re = *a.child_data[0];
    const R* v = re.GetValues<R>(1);
    // First run whose end is past the logical offset.
    int64_t first = std::upper_bound(v, v + re.length, static_cast<R>(a.offset)) - v;
    int64_t p = first;
    for (; p < re.length; ++p) {
      const int64_t e = std::min<int64_t>(v[p] - a.offset, a.length);
      ends->push_back(e + base);
      if (e >= a.length) {
        ++p;
        break;
      }
    }
    *physical = {first, p};
    return Status::OK();
  }

  Status ConcatRunEnds(const DataType& storage) {
    const auto& ree = static_cast<const RunEndEncodedType&>(storage);
    const TypeId rid = ree.run_end_type()->id();
    std::vector<int64_t> ends;
    std::vector<ArrayDataPtr> values;
    int64_t base = 0;
    for (const auto& a : in_) {
      if (a->length == 0) continue;
      std::pair<int64_t, int64_t> phys;
      if (rid == TypeId::kInt16) {
        ALKAID_RETURN_NOT_OK(AppendRunEnds<int16_t>(*a, &ends, base, &phys));
      } else if (rid == TypeId::kInt32) {
        ALKAID_RETURN_NOT_OK(AppendRunEnds<int32_t>(*a, &ends, base, &phys));
      } else {
        ALKAID_RETURN_NOT_OK(AppendRunEnds<int64_t>(*a, &ends, base, &phys));
      }
      values.push_back(a->child_data[1]->Slice(phys.first, phys.second - phys.first));
      base += a->length;
    }
    const int64_t w = BitWidth(rid) / 8;
    const int64_t max_end = w == 2   ? std::numeric_limits<int16_t>::max()
                            : w == 4 ? std::numeric_limits<int32_t>::max()
                                     : std::numeric_limits<int64_t>::max();
    if (base > max_end) {
      return Status::CapacityError("concatenated run ends overflow ",
                                   ree.run_end_type()->ToString());
    }
    ALKAID_ASSIGN_OR_RAISE(auto buf, Allocate(static_cast<int64_t>(ends.size()) * w, pool_));
    for (size_t i = 0; i < ends.size(); ++i) {
      if (w == 2) buf->mutable_data_as<int16_t>()[i] = static_cast<int16_t>(ends[i]);
      if (w == 4) buf->mutable_data_as<int32_t>()[i] = static_cast<int32_t>(ends[i]);
      if (w == 8) buf->mutable_data_as<int64_t>()[i] = ends[i];
    }
    out_->buffers.clear();
    auto run_ends = ArrayData::Make(ree.run_end_type(), static_cast<int64_t>(ends.size()),
                                    {nullptr, std::move(buf)}, 0);
    ArrayDataPtr vals;
    if (values.empty()) {
      vals = in_[0]->child_data[1]->Slice(0, 0);
    } else {
      ALKAID_ASSIGN_OR_RAISE(vals, Concatenate(values, pool_));
    }
    out_->child_data = {std::move(run_ends), std::move(vals)};
    return Status::OK();
  }

  const std::vector<ArrayDataPtr>& in_;
  MemoryPool* pool_;
  ArrayDataPtr out_;
};

}  // namespace

Result<ArrayDataPtr> Concatenate(const std::vector<ArrayDataPtr>& arrays, MemoryPool* pool) {
  if (arrays.empty()) return Status::Invalid("nothing to concatenate");
  return Concatenator(arrays, pool).Run();
}

}  // namespace alkaid::format::ipc::internal
