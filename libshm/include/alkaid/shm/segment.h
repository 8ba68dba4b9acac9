#pragma once

/// \file
/// Named POSIX shared-memory segments.
///
/// A Segment is a named object under /dev/shm, mapped read-write into the
/// calling process. Every segment starts with a 128-byte header (magic number,
/// layout version, kind, total size) followed by the data area that the
/// channel (or the caller, for kRaw) lays out. Nothing in shared memory is a
/// pointer: the data may be mapped at a different address in every
/// process.
///
/// The space of a segment is reserved when it is created, so a full /dev/shm
/// is reported by Create() as OutOfMemory instead of a SIGBUS on first touch.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::shm {

/// What a segment's data holds; recorded in the header at creation and
/// checked by Open() so that a channel's segment is never mistaken for a
/// consumer's. Values 2 and 3 belonged to two removed segment kinds and are
/// not reused.
enum class SegmentKind : uint32_t {
  kRaw = 1,               ///< data laid out by the caller
  kChannel = 4,           ///< a channel's slots and arena, written by its producer (channel.h)
  kChannelRegistry = 5,   ///< a channel's consumer registrations (channel.h)
  kChannelConsumer = 6,   ///< one channel consumer's cursor and returns (channel.h)
  kChannelExtension = 7,  ///< an extension of a channel's arena, written by its producer
};

/// Human-readable name of a kind ("raw", "channel", ...).
ALKAID_EXPORT std::string_view SegmentKindName(SegmentKind kind);

/// Who may open a segment, applied with fchmod after creation so the umask
/// does not weaken or strengthen it.
enum class SegmentAccess : uint32_t {
  kOwnerOnly = 0600,          ///< read-write for the creating user only (default)
  kOwnerAndGroup = 0660,      ///< read-write for the creating user and its group
  kOwnerAndGroupRead = 0640,  ///< read-write for the creating user, read-only for its group
};

/// Whether a segment is backed by transparent huge pages (2 MiB on x86-64).
///
/// A consumer touching a body that another process wrote pays a page-table
/// walk per 4 KiB page it reaches first; with nested paging (a VM) a walk on
/// cold page tables costs a few hundred nanoseconds, several times a cache
/// miss. One 2 MiB page covers 512 of those. See docs/PERFORMANCE.md.
enum class HugePages : uint32_t {
  kOff = 0,      ///< 4 KiB pages (default)
  kTry = 1,      ///< huge pages if the kernel gives them, else 4 KiB pages
  kRequire = 2,  ///< huge pages or Create() fails with a message naming the cause
};

/// Options for Segment::Create().
struct SegmentOptions {
  /// File mode of the shared-memory object. Default: owner only (0600).
  SegmentAccess access = SegmentAccess::kOwnerOnly;
  /// Enter every page of the segment into this process's page tables at
  /// creation (MADV_POPULATE_WRITE), so that writing or reading the data
  /// later never takes a page fault: a fault on a fresh page costs about a
  /// microsecond, more than publishing a message. Costs one pass over the
  /// segment at creation. Default: true.
  bool prefault = true;
  /// Back the segment with transparent huge pages: the object's size is
  /// rounded up to a multiple of 2 MiB, the mapping is 2 MiB-aligned, and
  /// after prefaulting the pages are collapsed into huge pages with
  /// madvise(MADV_COLLAPSE) (Linux 6.1; works whatever the tmpfs mount's
  /// `huge=` option and /sys/kernel/mm/transparent_hugepage/shmem_enabled
  /// say, unless the latter is `deny`). Processes that Open() the segment
  /// map it 2 MiB-aligned, so they map the same huge pages. Implies
  /// prefault. Default: kOff.
  HugePages huge_pages = HugePages::kOff;
  /// If set (>= 0): the object's group (fchown after creation), e.g. the
  /// group of the channel a consumer's segment must be readable by. The
  /// creating user must belong to it (PermissionDenied otherwise). Default:
  /// -1, the creating process's group.
  int64_t group = -1;
};

/// Options for Segment::Open().
struct SegmentOpenOptions {
  /// As SegmentOptions::prefault, for this process's mapping: after the
  /// header checks pass, every page is entered into the page tables, so a
  /// consumer never faults on the first touch of a body. Default: true.
  bool prefault = true;
  /// Map the segment read-only (the object is opened O_RDONLY and mapped
  /// PROT_READ): a store into it faults in this process instead of
  /// corrupting what other processes read. Default: false.
  bool read_only = false;
};

/// Longest segment name accepted (POSIX allows NAME_MAX, 255, including the
/// leading slash Boost adds; we keep a margin).
inline constexpr std::size_t kMaxSegmentNameLength = 200;

/// Largest segment Create() accepts (1 TiB): a sanity bound, not a promise.
inline constexpr uint64_t kMaxSegmentSize = uint64_t{1} << 40;

/// A named shared-memory segment mapped into this process.
///
/// Lifetime: the mapping lives as long as the Segment object; the name lives
/// until Remove() is called (by anyone), independently of any mapping.
/// Destroying a Segment never unlinks the name.
///
/// Thread safety: a Segment is immutable after Create/Open; its accessors may
/// be called from any thread. What lives in the data defines its own rules.
class ALKAID_EXPORT Segment {
 public:
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  /// Creates segment `name` with room for `data_size` bytes after the
  /// header, reserves its space (posix_fallocate) and maps it. Fails with
  /// AlreadyExists if the name is taken, OutOfMemory if /dev/shm cannot hold
  /// it (nothing is left behind), Invalid for a bad name or size.
  ///
  /// The data is zero-filled. The header's magic number is published last,
  /// so a concurrent Open() sees either no segment, an "initialising"
  /// segment (error), or a complete header.
  static Result<std::shared_ptr<Segment>> Create(std::string_view name, uint64_t data_size,
                                                 SegmentKind kind,
                                                 const SegmentOptions& options = {});

  /// Opens and maps existing segment `name` and checks its header against
  /// the mapping: magic number, layout version, recorded size equal to the
  /// real size, and `expected_kind`. Garbage or a foreign object is refused
  /// with Invalid; a missing name gives KeyError. Prefaults the mapping
  /// unless `options` says otherwise.
  static Result<std::shared_ptr<Segment>> Open(std::string_view name, SegmentKind expected_kind,
                                               const SegmentOpenOptions& options = {});

  /// Unlinks segment `name`. Existing mappings stay valid until dropped.
  /// KeyError if there is no such segment.
  static Status Remove(std::string_view name);

  /// Checks `name`: 1 to kMaxSegmentNameLength characters from
  /// [A-Za-z0-9._-], not starting with '.', no slash.
  static Status ValidateName(std::string_view name);

  /// Total size of a segment created with `data_size` bytes of data.
  static uint64_t TotalSizeFor(uint64_t data_size);

  /// The segment's name, without the leading slash.
  const std::string& name() const { return name_; }
  SegmentKind kind() const { return kind_; }
  /// First data byte; 64-byte aligned. Valid while this object lives.
  std::byte* data() const { return data_; }
  /// Bytes available from data().
  uint64_t data_size() const { return data_size_; }
  /// Bytes mapped, header included.
  uint64_t mapped_size() const { return mapped_size_; }
  /// Whether this mapping is known to be backed by huge pages: true after a
  /// Create() with huge pages that succeeded in collapsing them. False for
  /// Open() (the creator decides) and when kTry fell back to 4 KiB pages.
  bool huge_pages() const { return huge_pages_; }
  /// The object's group (as created or opened).
  uint32_t group() const { return group_; }
  /// Why huge pages were not obtained (kTry fell back), or empty.
  const std::string& huge_pages_error() const { return huge_pages_error_; }
  /// True if this process mapped the segment read-only
  /// (SegmentOpenOptions::read_only).
  bool read_only() const { return read_only_; }

  /// Lets go of the object's pages while keeping the address range: the
  /// mapping is replaced by private zero pages (read-only), so that memory
  /// the object held is freed once its name is removed and nobody else maps
  /// it, while a pointer this process still holds into it reads zeros
  /// instead of faulting. For a reader told by a writer it does not trust
  /// that nothing points there any more. The range is unmapped when the
  /// Segment is destroyed. Not thread-safe against data() readers' writes.
  Status DropPages();

 private:
  struct Mapping;
  Segment(std::string name, SegmentKind kind, std::unique_ptr<Mapping> mapping);

  std::string name_;
  SegmentKind kind_;
  std::unique_ptr<Mapping> mapping_;
  std::byte* data_ = nullptr;
  uint64_t data_size_ = 0;
  uint64_t mapped_size_ = 0;
  bool huge_pages_ = false;
  std::string huge_pages_error_;
  bool read_only_ = false;
  uint32_t group_ = 0;
};

}  // namespace alkaid::shm
