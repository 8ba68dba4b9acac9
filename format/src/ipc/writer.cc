#include "alkaid/format/ipc/writer.h"

#include <cstring>
#include <utility>

#include "alkaid/format/ipc/dictionary_tracker.h"
#include "compression_internal.h"
#include "concatenate_internal.h"
#include "metadata_internal.h"
#include "util_internal.h"

namespace alkaid::format::ipc {

using internal::BlockMeta;
using internal::PadTo;
using internal::RecordBatchMeta;
using BufferPtr = std::shared_ptr<Buffer>;

namespace {

constexpr uint8_t kPadding[64] = {};

Status CheckOptions(const IpcWriteOptions& o) {
  if (o.alignment != 8 && o.alignment != 64) {
    return Status::Invalid("IpcWriteOptions::alignment must be 8 or 64, got ", o.alignment);
  }
  if (o.pool == nullptr) return Status::Invalid("IpcWriteOptions::pool is null");
  if (o.min_space_savings.has_value() &&
      !(*o.min_space_savings >= 0.0 && *o.min_space_savings <= 1.0)) {
    return Status::Invalid("IpcWriteOptions::min_space_savings must be in [0, 1], got ",
                           *o.min_space_savings);
  }
  return Status::OK();
}

// A zero-copy slice, or null for a null buffer.
BufferPtr SafeSlice(const BufferPtr& buffer, int64_t offset, int64_t length) {
  if (buffer == nullptr) return nullptr;
  return SliceBuffer(buffer, offset, length);
}

// Flattens arrays into the FieldNodes and buffers of a body, pre-order, as
// the format lays them out; re-bases sliced arrays. With `no_copy`, any
// re-basing is refused instead (for bodies that must stay where they are).
class BodyAssembler {
 public:
  BodyAssembler(const IpcWriteOptions& options, bool no_copy)
      : options_(options), no_copy_(no_copy) {}

  Status Visit(const ArrayDataPtr& data, const std::string& dotted, int depth) {
    if (depth > options_.max_recursion_depth) {
      return Status::Invalid("field '", dotted, "': nesting deeper than max_recursion_depth (",
                             options_.max_recursion_depth, ")");
    }
    const ArrayData& a = *data;
    const DataType* storage = &StorageType(*a.type);
    if (storage->id() == TypeId::kDictionary) {
      storage = static_cast<const DictionaryType*>(storage)->index_type().get();
    }
    const TypeId id = storage->id();
    switch (id) {
      case TypeId::kNull:
        meta_.nodes.push_back({a.length, a.length});
        return Status::OK();
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion:
      case TypeId::kRunEndEncoded:
        meta_.nodes.push_back({a.length, 0});
        break;
      default:
        meta_.nodes.push_back({a.length, a.GetNullCount()});
        ALKAID_RETURN_NOT_OK(AddBitmap(a, 0, /*is_validity=*/true, dotted));
        break;
    }
    auto child_name = [&](int i) { return dotted + "." + storage->field(i)->name(); };
    switch (id) {
      case TypeId::kBool:
        return AddBitmap(a, 1, /*is_validity=*/false, dotted);
      case TypeId::kBinary:
      case TypeId::kString:
        return AddBinary<int32_t>(a, dotted);
      case TypeId::kLargeBinary:
      case TypeId::kLargeString:
        return AddBinary<int64_t>(a, dotted);
      case TypeId::kBinaryView:
      case TypeId::kStringView:
        Add(SafeSlice(a.buffers[1], a.offset * 16, a.length * 16));
        meta_.variadic_counts.push_back(static_cast<int64_t>(a.buffers.size()) - 2);
        for (size_t i = 2; i < a.buffers.size(); ++i) Add(a.buffers[i]);
        return Status::OK();
      case TypeId::kList:
      case TypeId::kMap: {
        ALKAID_ASSIGN_OR_RAISE(auto range, AddOffsets<int32_t>(a, dotted));
        return Visit(a.child_data[0]->Slice(range.first, range.second - range.first), child_name(0),
                     depth + 1);
      }
      case TypeId::kLargeList: {
        ALKAID_ASSIGN_OR_RAISE(auto range, AddOffsets<int64_t>(a, dotted));
        return Visit(a.child_data[0]->Slice(range.first, range.second - range.first), child_name(0),
                     depth + 1);
      }
      case TypeId::kListView:
        return AddListView<int32_t>(a, dotted, child_name(0), depth);
      case TypeId::kLargeListView:
        return AddListView<int64_t>(a, dotted, child_name(0), depth);
      case TypeId::kFixedSizeList: {
        const int64_t n = static_cast<const FixedSizeListType*>(storage)->list_size();
        return Visit(a.child_data[0]->Slice(a.offset * n, a.length * n), child_name(0), depth + 1);
      }
      case TypeId::kStruct:
        for (int i = 0; i < storage->num_fields(); ++i) {
          ALKAID_RETURN_NOT_OK(
              Visit(a.child_data[static_cast<size_t>(i)]->Slice(a.offset, a.length), child_name(i),
                    depth + 1));
        }
        return Status::OK();
      case TypeId::kSparseUnion:
        Add(SafeSlice(a.buffers[0], a.offset, a.length));
        for (int i = 0; i < storage->num_fields(); ++i) {
          ALKAID_RETURN_NOT_OK(
              Visit(a.child_data[static_cast<size_t>(i)]->Slice(a.offset, a.length), child_name(i),
                    depth + 1));
        }
        return Status::OK();
      case TypeId::kDenseUnion:
        Add(SafeSlice(a.buffers[0], a.offset, a.length));
        Add(SafeSlice(a.buffers[1], a.offset * 4, a.length * 4));
        for (int i = 0; i < storage->num_fields(); ++i) {
          ALKAID_RETURN_NOT_OK(
              Visit(a.child_data[static_cast<size_t>(i)], child_name(i), depth + 1));
        }
        return Status::OK();
      case TypeId::kRunEndEncoded: {
        ArrayDataPtr ree = data;
        const ArrayData& ends = *a.child_data[0];
        bool trivial = a.offset == 0;
        if (trivial && ends.length > 0) {
          int64_t last = 0;
          const int w = BitWidth(ends.type->id()) / 8;
          const uint8_t* p = ends.buffers[1]->data() + (ends.offset + ends.length - 1) * w;
          if (w == 2) last = *reinterpret_cast<const int16_t*>(p);
          if (w == 4) last = *reinterpret_cast<const int32_t*>(p);
          if (w == 8) last = *reinterpret_cast<const int64_t*>(p);
          trivial = last == a.length;
        }
        if (!trivial) {
          ALKAID_RETURN_NOT_OK(RefuseCopy(dotted, "a sliced run-end encoded array"));
          ALKAID_ASSIGN_OR_RAISE(ree, internal::Concatenate({data}, options_.pool));
        }
        ALKAID_RETURN_NOT_OK(Visit(ree->child_data[0], child_name(0), depth + 1));
        return Visit(ree->child_data[1], child_name(1), depth + 1);
      }
      case TypeId::kNull:
        return Status::OK();
      default: {
        const DataTypeLayout& layout = storage->layout();
        if (layout.buffers.size() != 2 ||
            layout.buffers[1].kind != DataTypeLayout::BufferKind::kFixedWidth) {
          return Status::NotImplemented("field '", dotted, "': cannot write ", storage->ToString());
        }
        const int64_t w = layout.buffers[1].byte_width;
        Add(a.buffers[1] == nullptr ? nullptr
                                    : SafeSlice(a.buffers[1], a.offset * w, a.length * w));
        return Status::OK();
      }
    }
  }

  RecordBatchMeta& meta() { return meta_; }
  std::vector<BufferPtr>& buffers() { return buffers_; }

  // Compresses the buffers if asked and assigns body offsets.
  Result<int64_t> Finish() {
    if (options_.compression != CompressionType::kNone) {
      meta_.compression = options_.compression;
      for (auto& b : buffers_) {
        if (b == nullptr || b->size() == 0) continue;
        ALKAID_ASSIGN_OR_RAISE(b, CompressWithPrefix(*b));
      }
    }
    // In a compressed body a buffer is an 8-byte length, then its bytes
    // (compressed, or as they are for length -1): with 64-byte alignment
    // the bytes, not the prefix, start on a multiple of 64 (the padding in
    // between is ours to choose; offsets stay multiples of 8).
    const bool prefixed = options_.compression != CompressionType::kNone;
    const int64_t align = options_.alignment;
    int64_t pos = 0;
    meta_.buffers.clear();
    for (const auto& b : buffers_) {
      const int64_t size = b == nullptr ? 0 : b->size();
      pos = prefixed && align > 8 && size > 0 ? PadTo(pos + 8, align) - 8 : PadTo(pos, align);
      meta_.buffers.push_back({pos, size});
      pos += size;
    }
    return PadTo(pos, align);
  }

 private:
  void Add(BufferPtr buffer) { buffers_.push_back(std::move(buffer)); }

  Status RefuseCopy(const std::string& dotted, const char* what) const {
    if (!no_copy_) return Status::OK();
    return Status::Invalid("field '", dotted, "': ", what,
                           " would need re-basing, which copies out of the region");
  }

  Status AddBitmap(const ArrayData& a, int index, bool is_validity, const std::string& dotted) {
    const BufferPtr& src = a.buffers[static_cast<size_t>(index)];
    if (src == nullptr || (is_validity && a.GetNullCount() == 0)) {
      Add(nullptr);
      return Status::OK();
    }
    const int64_t bytes = bit_util::BytesForBits(a.length);
    if (a.offset % 8 == 0) {
      Add(SafeSlice(src, a.offset / 8, bytes));
      return Status::OK();
    }
    ALKAID_RETURN_NOT_OK(RefuseCopy(dotted, "a bitmap at a bit offset"));
    ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(bytes, options_.pool));
    bit_util::CopyBitmap(src->data(), a.offset, a.length, out->mutable_data(), 0);
    Add(std::move(out));
    return Status::OK();
  }

  // Writes the offsets of [offset, offset + length), re-based to start at 0;
  // returns the child range they cover.
  template <typename O>
  Result<std::pair<int64_t, int64_t>> AddOffsets(const ArrayData& a, const std::string& dotted) {
    if (a.length == 0) {
      ALKAID_ASSIGN_OR_RAISE(auto zero, AllocateBuffer(sizeof(O), options_.pool));
      if (no_copy_) {
        // Point at the array's own first offset when it is 0, else refuse.
        const O* src = a.buffers[1] ? a.buffers[1]->data_as<O>() + a.offset : nullptr;
        if (src != nullptr && *src == 0) {
          Add(SafeSlice(a.buffers[1], a.offset * static_cast<int64_t>(sizeof(O)), sizeof(O)));
          return std::make_pair(int64_t{0}, int64_t{0});
        }
        ALKAID_RETURN_NOT_OK(RefuseCopy(dotted, "an empty array without offsets"));
      }
      Add(std::move(zero));
      return std::make_pair(int64_t{0}, int64_t{0});
    }
    const O* src = a.buffers[1]->data_as<O>() + a.offset;
    const int64_t first = src[0];
    const int64_t last = src[a.length];
    const int64_t n = (a.length + 1) * static_cast<int64_t>(sizeof(O));
    if (first == 0) {
      Add(SafeSlice(a.buffers[1], a.offset * static_cast<int64_t>(sizeof(O)), n));
    } else {
      ALKAID_RETURN_NOT_OK(RefuseCopy(dotted, "offsets not starting at 0"));
      ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(n, options_.pool));
      O* dst = out->template mutable_data_as<O>();
      for (int64_t i = 0; i <= a.length; ++i) dst[i] = static_cast<O>(src[i] - first);
      Add(std::move(out));
    }
    return std::make_pair(first, last);
  }

  template <typename O>
  Status AddBinary(const ArrayData& a, const std::string& dotted) {
    ALKAID_ASSIGN_OR_RAISE(auto range, AddOffsets<O>(a, dotted));
    const BufferPtr& data = a.buffers[2];
    if (data == nullptr) {
      Add(nullptr);
    } else {
      Add(SafeSlice(data, range.first, range.second - range.first));
    }
    return Status::OK();
  }

  template <typename O>
  Status AddListView(const ArrayData& a, const std::string& dotted, const std::string& child,
                     int depth) {
    const int64_t w = sizeof(O);
    const ArrayDataPtr& values = a.child_data[0];
    if (a.length == 0) {
      Add(nullptr);
      Add(nullptr);
      return Visit(values->Slice(0, 0), child, depth + 1);
    }
    const O* offsets = a.buffers[1]->data_as<O>() + a.offset;
    const O* sizes = a.buffers[2]->data_as<O>() + a.offset;
    int64_t lo = values->length;
    int64_t hi = 0;
    // Every offset (empty views included) must stay inside the child slice.
    for (int64_t i = 0; i < a.length; ++i) {
      lo = std::min<int64_t>(lo, offsets[i]);
      hi = std::max<int64_t>(hi, static_cast<int64_t>(offsets[i]) + std::max<O>(sizes[i], 0));
    }
    if (lo == 0) {
      Add(SafeSlice(a.buffers[1], a.offset * w, a.length * w));
    } else {
      ALKAID_RETURN_NOT_OK(RefuseCopy(dotted, "a list view whose values do not start at 0"));
      ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(a.length * w, options_.pool));
      O* dst = out->template mutable_data_as<O>();
      for (int64_t i = 0; i < a.length; ++i) {
        dst[i] = static_cast<O>(offsets[i] - lo);
      }
      Add(std::move(out));
    }
    Add(SafeSlice(a.buffers[2], a.offset * w, a.length * w));
    return Visit(values->Slice(lo, hi - lo), child, depth + 1);
  }

  Result<BufferPtr> CompressWithPrefix(const Buffer& b) {
    ALKAID_ASSIGN_OR_RAISE(auto compressed,
                           internal::Compress(options_.compression, options_.compression_level,
                                              b.data(), b.size(), options_.pool));
    // Compressed unless asked to keep buffers that do not shrink enough
    // (IpcWriteOptions::min_space_savings).
    const bool keep = !options_.min_space_savings.has_value() ||
                      static_cast<double>(compressed->size()) <=
                          static_cast<double>(b.size()) * (1.0 - *options_.min_space_savings);
    const Buffer& payload = keep ? *compressed : b;
    ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(8 + payload.size(), options_.pool));
    const int64_t prefix = keep ? b.size() : -1;
    std::memcpy(out->mutable_data(), &prefix, 8);
    std::memcpy(out->mutable_data() + 8, payload.data(), static_cast<size_t>(payload.size()));
    return BufferPtr(std::move(out));
  }

  const IpcWriteOptions& options_;
  bool no_copy_;
  RecordBatchMeta meta_;
  std::vector<BufferPtr> buffers_;
};

Result<IpcPayload> MakeBodyPayload(const std::vector<std::pair<ArrayDataPtr, std::string>>& cols,
                                   int64_t length, const IpcWriteOptions& options,
                                   BodyAssembler* assembler) {
  for (const auto& [col, name] : cols) ALKAID_RETURN_NOT_OK(assembler->Visit(col, name, 1));
  assembler->meta().length = length;
  IpcPayload payload;
  ALKAID_ASSIGN_OR_RAISE(payload.body_length, assembler->Finish());
  payload.body_buffers = std::move(assembler->buffers());
  payload.body_offsets.reserve(assembler->meta().buffers.size());
  for (const auto& b : assembler->meta().buffers) payload.body_offsets.push_back(b.offset);
  payload.alignment = options.alignment;
  return payload;
}

}  // namespace

// ---------------------------------------------------------------------------
// Payloads

Result<IpcPayload> GetSchemaPayload(const Schema& schema, const DictionaryMemo& ids,
                                    const IpcWriteOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOptions(options));
  IpcPayload payload;
  payload.type = MessageType::kSchema;
  payload.alignment = options.alignment;
  ALKAID_ASSIGN_OR_RAISE(payload.metadata, internal::WriteSchemaMessage(schema, ids, options));
  return payload;
}

Result<IpcPayload> GetRecordBatchPayload(const RecordBatch& batch, const IpcWriteOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOptions(options));
  std::vector<std::pair<ArrayDataPtr, std::string>> cols;
  cols.reserve(static_cast<size_t>(batch.num_columns()));
  for (int i = 0; i < batch.num_columns(); ++i) {
    cols.emplace_back(batch.column_data(i), batch.schema()->field(i)->name());
  }
  BodyAssembler assembler(options, /*no_copy=*/false);
  ALKAID_ASSIGN_OR_RAISE(auto payload,
                         MakeBodyPayload(cols, batch.num_rows(), options, &assembler));
  payload.type = MessageType::kRecordBatch;
  ALKAID_ASSIGN_OR_RAISE(payload.metadata,
                         internal::WriteRecordBatchMessage(assembler.meta(), payload.body_length,
                                                           options, batch.metadata()));
  return payload;
}

Result<IpcPayload> GetDictionaryPayload(int64_t id, bool is_delta, const ArrayDataPtr& values,
                                        const IpcWriteOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOptions(options));
  if (values == nullptr) return Status::Invalid("dictionary ", id, " has no values");
  BodyAssembler assembler(options, /*no_copy=*/false);
  ALKAID_ASSIGN_OR_RAISE(
      auto payload, MakeBodyPayload({{values, "dictionary " + std::to_string(id)}}, values->length,
                                    options, &assembler));
  payload.type = MessageType::kDictionaryBatch;
  ALKAID_ASSIGN_OR_RAISE(payload.metadata,
                         internal::WriteDictionaryMessage(id, is_delta, assembler.meta(),
                                                          payload.body_length, options));
  return payload;
}

Result<int64_t> WriteIpcPayload(const IpcPayload& payload, const IpcWriteOptions& options,
                                OutputStream* sink) {
  ALKAID_RETURN_NOT_OK(CheckOptions(options));
  if (payload.metadata == nullptr) return Status::Invalid("payload has no metadata");
  const int64_t prefix = options.write_legacy_format ? 4 : 8;
  const int64_t flat = payload.metadata->size();
  const int64_t padded = PadTo(prefix + flat, payload.alignment) - prefix;
  if (padded > kMaxMetadataSize) {
    return Status::CapacityError("message metadata of ", padded,
                                 " bytes exceeds the 2^31-1 byte limit");
  }
  if (!options.write_legacy_format) {
    const uint32_t token = kIpcContinuationToken;
    ALKAID_RETURN_NOT_OK(sink->Write(&token, 4));
  }
  const int32_t len32 = static_cast<int32_t>(padded);
  ALKAID_RETURN_NOT_OK(sink->Write(&len32, 4));
  ALKAID_RETURN_NOT_OK(sink->Write(*payload.metadata));
  ALKAID_RETURN_NOT_OK(sink->Write(kPadding, padded - flat));
  const bool placed = !payload.body_offsets.empty();
  if (placed && payload.body_offsets.size() != payload.body_buffers.size()) {
    return Status::Invalid("payload has ", payload.body_buffers.size(), " body buffers but ",
                           payload.body_offsets.size(), " offsets");
  }
  // Zero padding of any length, in pieces of the padding block.
  auto pad_with_zeros = [sink](int64_t n) -> Status {
    for (; n > 0; n -= static_cast<int64_t>(sizeof(kPadding))) {
      ALKAID_RETURN_NOT_OK(sink->Write(kPadding, std::min<int64_t>(n, sizeof(kPadding))));
    }
    return Status::OK();
  };
  int64_t body = 0;
  for (size_t i = 0; i < payload.body_buffers.size(); ++i) {
    const auto& b = payload.body_buffers[i];
    const int64_t size = b == nullptr ? 0 : b->size();
    if (placed) {
      if (payload.body_offsets[i] < body) {
        return Status::Invalid("payload body buffer ", i, " at offset ", payload.body_offsets[i],
                               " overlaps the one before (which ends at ", body, ")");
      }
      ALKAID_RETURN_NOT_OK(pad_with_zeros(payload.body_offsets[i] - body));
      body = payload.body_offsets[i];
    }
    if (size > 0) ALKAID_RETURN_NOT_OK(sink->Write(*b));
    body += size;
    if (!placed) {
      const int64_t pad = PadTo(size, payload.alignment) - size;
      ALKAID_RETURN_NOT_OK(sink->Write(kPadding, pad));
      body += pad;
    }
  }
  if (placed && body <= payload.body_length) {
    ALKAID_RETURN_NOT_OK(pad_with_zeros(payload.body_length - body));
    body = payload.body_length;
  }
  if (body != payload.body_length) {
    return Status::Invalid("payload body is ", body, " bytes but declares ", payload.body_length);
  }
  return prefix + padded + body;
}

Status WriteEndOfStream(const IpcWriteOptions& options, OutputStream* sink) {
  const uint32_t eos[2] = {kIpcContinuationToken, 0};
  if (options.write_legacy_format) return sink->Write(&eos[1], 4);
  return sink->Write(eos, 8);
}

Result<std::shared_ptr<Buffer>> GetRecordBatchMetadataForRegion(const RecordBatch& batch,
                                                                const uint8_t* region,
                                                                int64_t region_size,
                                                                const IpcWriteOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOptions(options));
  if (options.compression != CompressionType::kNone) {
    return Status::Invalid("a region message cannot be compressed");
  }
  if (region == nullptr || region_size < 0) return Status::Invalid("invalid region");
  BodyAssembler assembler(options, /*no_copy=*/true);
  for (int i = 0; i < batch.num_columns(); ++i) {
    ALKAID_RETURN_NOT_OK(
        assembler.Visit(batch.column_data(i), batch.schema()->field(i)->name(), 1));
  }
  RecordBatchMeta& meta = assembler.meta();
  meta.length = batch.num_rows();
  meta.buffers.clear();
  const auto& buffers = assembler.buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& b = buffers[i];
    if (b == nullptr || b->size() == 0) {
      meta.buffers.push_back({0, 0});
      continue;
    }
    const uint8_t* p = b->data();
    if (p < region || b->size() > region_size || p - region > region_size - b->size()) {
      return Status::Invalid("buffer ", i, " (", b->size(), " bytes) lies outside the ",
                             region_size, "-byte region");
    }
    const int64_t offset = p - region;
    if (offset % 8 != 0) {
      return Status::Invalid("buffer ", i, " starts at region offset ", offset,
                             ", not a multiple of 8");
    }
    meta.buffers.push_back({offset, b->size()});
  }
  return internal::WriteRecordBatchMessage(meta, region_size, options, batch.metadata());
}

// ---------------------------------------------------------------------------
// Writers

namespace {

constexpr std::string_view kAlkaidMagic = "ALKAID1";
constexpr std::string_view kArrowMagic = "ARROW1";

class IpcWriter : public RecordBatchWriter {
 public:
  IpcWriter(OutputStream* sink, SchemaPtr schema, const IpcWriteOptions& options, bool is_file,
            MetadataPtr footer_metadata)
      : sink_(sink),
        schema_(std::move(schema)),
        options_(options),
        is_file_(is_file),
        footer_metadata_(std::move(footer_metadata)) {}

  Status Start(const DictionaryMemo* ids) {
    ALKAID_RETURN_NOT_OK(CheckOptions(options_));
    if (ids != nullptr) {
      for (const auto& [path, id] : ids->field_ids()) {
        ALKAID_ASSIGN_OR_RAISE(auto value_type, ids->GetValueType(id));
        ALKAID_RETURN_NOT_OK(memo_.AddField(id, path, value_type));
      }
    }
    ALKAID_RETURN_NOT_OK(memo_.AssignIds(*schema_));
    DictionaryTrackerOptions tracking;
    tracking.emit_deltas = options_.emit_dictionary_deltas;
    tracking.allow_replacement = !is_file_;
    tracker_ = std::make_unique<DictionaryTracker>(memo_, tracking);
    if (is_file_) {
      const std::string_view magic =
          options_.magic == FileMagic::kArrow ? kArrowMagic : kAlkaidMagic;
      ALKAID_RETURN_NOT_OK(Write(magic.data(), static_cast<int64_t>(magic.size())));
      ALKAID_RETURN_NOT_OK(Write(kPadding, 8 - static_cast<int64_t>(magic.size())));
    }
    ALKAID_ASSIGN_OR_RAISE(auto payload, GetSchemaPayload(*schema_, memo_, options_));
    return WritePayload(payload, nullptr);
  }

  Status WriteRecordBatch(const RecordBatch& batch) override {
    if (closed_) return Status::Invalid("WriteRecordBatch on a closed writer");
    if (!batch.schema()->Equals(*schema_)) {
      return Status::Invalid("batch schema ", batch.schema()->ToString(false),
                             " differs from the writer's ", schema_->ToString(false));
    }
    ALKAID_RETURN_NOT_OK(WriteDictionaries(batch));
    ALKAID_ASSIGN_OR_RAISE(auto payload, GetRecordBatchPayload(batch, options_));
    ALKAID_RETURN_NOT_OK(WritePayload(payload, &record_blocks_));
    ++stats_.num_record_batches;
    return Status::OK();
  }

  Status Close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    ALKAID_RETURN_NOT_OK(WriteEndOfStream(options_, sink_));
    stats_.total_bytes += options_.write_legacy_format ? 4 : 8;
    if (!is_file_) return sink_->Flush();
    ALKAID_ASSIGN_OR_RAISE(
        auto footer, internal::WriteFooter(*schema_, memo_, dictionary_blocks_, record_blocks_,
                                           footer_metadata_, options_));
    ALKAID_RETURN_NOT_OK(Write(footer->data(), footer->size()));
    const int32_t footer_len = static_cast<int32_t>(footer->size());
    ALKAID_RETURN_NOT_OK(Write(&footer_len, 4));
    const std::string_view magic = options_.magic == FileMagic::kArrow ? kArrowMagic : kAlkaidMagic;
    ALKAID_RETURN_NOT_OK(Write(magic.data(), static_cast<int64_t>(magic.size())));
    return sink_->Flush();
  }

  WriteStats stats() const override { return stats_; }

 private:
  Status Write(const void* data, int64_t n) {
    ALKAID_RETURN_NOT_OK(sink_->Write(data, n));
    stats_.total_bytes += n;
    return Status::OK();
  }

  Status WritePayload(const IpcPayload& payload, std::vector<BlockMeta>* blocks) {
    const int64_t offset = stats_.total_bytes;
    ALKAID_ASSIGN_OR_RAISE(int64_t written, WriteIpcPayload(payload, options_, sink_));
    stats_.total_bytes += written;
    ++stats_.num_messages;
    if (blocks != nullptr) {
      const int64_t metadata_length = written - payload.body_length;
      blocks->push_back({offset, static_cast<int32_t>(metadata_length), payload.body_length});
    }
    return Status::OK();
  }

  Status WriteDictionaries(const RecordBatch& batch) {
    if (memo_.num_fields() == 0) return Status::OK();
    ALKAID_ASSIGN_OR_RAISE(auto changes, tracker_->Diff(batch));
    for (const DictionaryChange& change : changes) {
      if (change.values != nullptr) {
        const bool replacement = !change.is_delta && HasSent(change.id);
        ALKAID_RETURN_NOT_OK(EmitDictionary(change.id, change.is_delta, change.values));
        if (change.is_delta) ++stats_.num_dictionary_deltas;
        if (replacement) ++stats_.num_replaced_dictionaries;
      }
      ALKAID_RETURN_NOT_OK(tracker_->Commit(change));
    }
    return Status::OK();
  }

  bool HasSent(int64_t id) const {
    for (const auto& [known, dict] : tracker_->current()) {
      if (known == id) return true;
    }
    return false;
  }

  Status EmitDictionary(int64_t id, bool is_delta, const ArrayDataPtr& values) {
    ALKAID_ASSIGN_OR_RAISE(auto payload, GetDictionaryPayload(id, is_delta, values, options_));
    ALKAID_RETURN_NOT_OK(WritePayload(payload, &dictionary_blocks_));
    ++stats_.num_dictionary_batches;
    return Status::OK();
  }

  OutputStream* sink_;
  SchemaPtr schema_;
  IpcWriteOptions options_;
  bool is_file_;
  MetadataPtr footer_metadata_;
  DictionaryMemo memo_;
  std::unique_ptr<DictionaryTracker> tracker_;  // set by Start
  std::vector<BlockMeta> dictionary_blocks_;
  std::vector<BlockMeta> record_blocks_;
  WriteStats stats_;
  bool closed_ = false;
};

Result<std::unique_ptr<RecordBatchWriter>> MakeWriter(OutputStream* sink, SchemaPtr schema,
                                                      const IpcWriteOptions& options,
                                                      const DictionaryMemo* ids, bool is_file,
                                                      MetadataPtr footer_metadata) {
  if (sink == nullptr) return Status::Invalid("writer sink is null");
  if (schema == nullptr) return Status::Invalid("writer schema is null");
  auto writer = std::make_unique<IpcWriter>(sink, std::move(schema), options, is_file,
                                            std::move(footer_metadata));
  ALKAID_RETURN_NOT_OK(writer->Start(ids));
  return std::unique_ptr<RecordBatchWriter>(std::move(writer));
}

}  // namespace

Result<std::unique_ptr<RecordBatchWriter>> MakeStreamWriter(OutputStream* sink, SchemaPtr schema,
                                                            const IpcWriteOptions& options,
                                                            const DictionaryMemo* ids) {
  return MakeWriter(sink, std::move(schema), options, ids, false, nullptr);
}

Result<std::unique_ptr<RecordBatchWriter>> MakeFileWriter(OutputStream* sink, SchemaPtr schema,
                                                          const IpcWriteOptions& options,
                                                          const DictionaryMemo* ids,
                                                          MetadataPtr footer_metadata) {
  return MakeWriter(sink, std::move(schema), options, ids, true, std::move(footer_metadata));
}

Result<std::shared_ptr<Buffer>> SerializeRecordBatchStream(const RecordBatch& batch,
                                                           const IpcWriteOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto sink, BufferOutputStream::Create(4096, options.pool));
  ALKAID_ASSIGN_OR_RAISE(auto writer, MakeStreamWriter(sink.get(), batch.schema(), options));
  ALKAID_RETURN_NOT_OK(writer->WriteRecordBatch(batch));
  ALKAID_RETURN_NOT_OK(writer->Close());
  return sink->Finish();
}

}  // namespace alkaid::format::ipc
