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
class RecordBatch;

using FieldPtr = std::shared_ptr<Field>;
using FieldVector = std::vector<FieldPtr>;
using TypePtr = std::shared_ptr<DataType>;
using ArrayDataPtr = std::shared_ptr<ArrayData>;
using ArrayPtr = std::shared_ptr<Array>;

}  // namespace alkaid::format
