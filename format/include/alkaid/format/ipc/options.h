#pragma once

/// \file
/// Options of the IPC writers and readers.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/format/memory_pool.h"

namespace alkaid::format::ipc {

/// Codec of a compressed record batch body (each buffer compressed alone).
enum class CompressionType : uint8_t {
  kNone,      ///< body buffers are stored as they are
  kLz4Frame,  ///< LZ4 frame format (lz4frame.h)
  kZstd,      ///< Zstandard
};

/// Which magic string a file starts and ends with.
enum class FileMagic : uint8_t {
  kAlkaid,  ///< "ALKAID1" (the default)
  kArrow,   ///< "ARROW1": the file is an Apache Arrow IPC file
};

struct ALKAID_EXPORT IpcWriteOptions {
  /// Body compression; kNone by default.
  CompressionType compression = CompressionType::kNone;
  /// Codec level; the codec's default when left at kDefaultCompressionLevel.
  int compression_level = kDefaultCompressionLevel;
  /// With a codec: store a buffer uncompressed (length -1) when compressing
  /// it saves less than this fraction of its size (0.1: keep only buffers
  /// that shrink by 10 %). Unset (the default, as in Arrow C++): every
  /// buffer is compressed, so that readers decompress into memory of their
  /// own. Some readers use an uncompressed buffer in place where the body
  /// lies in their input, whose alignment the writer cannot know (polars
  /// 1.44 panics on a decimal128 buffer so stored).
  std::optional<double> min_space_savings;
  static constexpr int kDefaultCompressionLevel = std::numeric_limits<int>::min();
  /// Pool for the metadata, compressed buffers and re-based copies of sliced
  /// arrays. Never null.
  MemoryPool* pool = default_memory_pool();
  /// Alignment of each buffer in a body and of the body length: 64 (the
  /// default) or 8 (the format's minimum: smaller output). With 64, readers
  /// that want more than 8 bytes of alignment (decimals, SIMD) can use every
  /// buffer in place; in a compressed body each buffer's bytes after its
  /// 8-byte length prefix start at a multiple of 64, so a buffer stored
  /// uncompressed (length -1) is aligned too.
  int32_t alignment = 64;
  /// Writes the pre-0.15 framing (a bare int32 length, no 0xFFFFFFFF
  /// continuation marker). Only for consumers that need it.
  bool write_legacy_format = false;
  /// Magic of files written by MakeFileWriter.
  FileMagic magic = FileMagic::kAlkaid;
  /// When a field's dictionary grows by appending values, write only the new
  /// values as a delta. When false, or when the dictionary changed otherwise,
  /// a stream writes a replacement and a file writer fails (files cannot
  /// replace dictionaries).
  bool emit_dictionary_deltas = true;
  /// Prefix of the extension-type metadata keys written ("ALKAID" gives
  /// "ALKAID:extension:name"); use "ARROW" so that Arrow tools recognise the
  /// extension. Readers accept both prefixes.
  std::string extension_metadata_namespace = "ALKAID";
  /// Deepest type nesting the writer accepts.
  int max_recursion_depth = 64;
};

struct ALKAID_EXPORT IpcReadOptions {
  /// Pool for message metadata and bodies read from streams, decompressed
  /// buffers and concatenated dictionaries. Never null.
  MemoryPool* pool = default_memory_pool();
  /// Deepest type nesting (and flatbuffer depth) accepted in metadata.
  int max_recursion_depth = 64;
  /// Readers always run the structural Validate on every record batch they
  /// decode (and ValidateFull on every dictionary); with this set they run
  /// ValidateFull on record batches too.
  bool validate_full = false;
  /// With validate_full: decimal values must fit their type's precision
  /// (FullValidationOptions::decimal_precision). Turn off to read files of
  /// older Arrow versions whose decimals exceed it. Default: true.
  bool validate_decimal_precision = true;
  /// Largest uncompressed length a compressed buffer may declare; a hostile
  /// length above it is refused before anything is allocated.
  int64_t max_decompressed_size = int64_t{1} << 32;
};

}  // namespace alkaid::format::ipc
