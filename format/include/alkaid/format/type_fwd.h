#pragma once

/// \file
/// Forward declarations of the format library's main classes.

#include <memory>
#include <vector>

namespace alkaid::format {

class MemoryPool;
class Buffer;
class ResizableBuffer;
class DataType;
class Field;
class Schema;
class KeyValueMetadata;
struct ArrayData;
class Array;
class ArrayBuilder;
// The generated flatbuffers code has an unrelated alkaid::fbs::RecordBatch table.
class RecordBatch;  // NOLINT(bugprone-forward-declaration-namespace): not that fbs table

using FieldPtr = std::shared_ptr<Field>;
using FieldVector = std::vector<FieldPtr>;
using TypePtr = std::shared_ptr<DataType>;
using ArrayDataPtr = std::shared_ptr<ArrayData>;
using ArrayPtr = std::shared_ptr<Array>;

}  // namespace alkaid::format
