#include "alkaid/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <system_error>
#include <utility>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include "segment_internal.h"

namespace bip = boost::interprocess;

namespace alkaid::shm {

using internal::kSegmentDataOffset;
using internal::kSegmentLayoutVersion;
using internal::kSegmentMagic;
using internal::SegmentHeaderData;

std::string_view SegmentKindName(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::kRaw:
      return "raw";
    case SegmentKind::kChannel:
      return "channel";
    case SegmentKind::kChannelRegistry:
      return "channel registry";
    case SegmentKind::kChannelConsumer:
      return "channel consumer";
    case SegmentKind::kChannelExtension:
      return "channel extension";
  }
  return "unknown";
}

// Owns the mapping; Boost stays out of the public header.
struct Segment::Mapping {
  bip::mapped_region region;
};

namespace {

// Translates a Boost.Interprocess exception into a Status naming the
// operation and the segment.
Status FromBoostError(const bip::interprocess_exception& e, std::string_view what,
                      std::string_view name) {
  std::string msg =
      std::string(what) + " shared-memory segment '" + std::string(name) + "': " + e.what();
  switch (e.get_error_code()) {
    case bip::already_exists_error:
      return Status(StatusCode::kAlreadyExists, std::move(msg));
    case bip::not_found_error:
    case bip::not_such_file_or_directory:
      return Status(StatusCode::kKeyError, std::move(msg));
    case bip::security_error:
      return Status(StatusCode::kPermissionDenied, std::move(msg));
    case bip::out_of_space_error:
    case bip::out_of_memory_error:
    case bip::out_of_resource_error:
      return Status(StatusCode::kOutOfMemory, std::move(msg));
    default:
      return Status(StatusCode::kIOError, std::move(msg));
  }
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Enters every page of a mapping into the page tables now, so the data path
// never faults on a first touch. Best effort: a failure only means later
// accesses fault as usual. MADV_POPULATE_WRITE (Linux 5.14) maps the pages
// writable without changing their contents; on older kernels, one read per
// page (a read fault on a shared writable tmpfs mapping installs a writable
// entry as well).
// A read-only mapping is populated with MADV_POPULATE_READ instead (the
// write variant fails on it).
void Prefault(void* address, std::size_t size, bool read_only = false) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
  if (::madvise(address, size, read_only ? MADV_POPULATE_READ : MADV_POPULATE_WRITE) == 0) {
    return;
  }
  if (errno != EINVAL) return;  // e.g. EFAULT past a truncated object
#else
  (void)read_only;
#endif
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t step = page > 0 ? static_cast<std::size_t>(page) : 4096;
  const auto* p = static_cast<const volatile std::byte*>(address);
  for (std::size_t off = 0; off < size; off += step) (void)p[off];
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older headers lack the name
#endif

// Size and alignment of a transparent huge page (PMD) on x86-64 and arm64
// with 4 KiB base pages.
constexpr uint64_t kHugePageSize = uint64_t{2} << 20;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// strerror's text for `err`, thread-safely.

// Maps `size` bytes of `object` with `mode` (read_write or read_only).
// Mappings of at least one huge
// page are placed at a 2 MiB-aligned address (inside a PROT_NONE
// reservation, replaced with MAP_FIXED, whose ends are then unmapped): a
// huge page of the object can only be mapped by one page-table entry where
// the virtual and file offsets agree modulo 2 MiB, and the kernel aligns
// tmpfs mappings only when the mount asks for huge pages. Costs nothing but
// address space. Throws what bip::mapped_region throws.
bip::mapped_region MapAligned(const bip::shared_memory_object& object, uint64_t size,
                              bip::mode_t mode = bip::read_write) {
  if (size < kHugePageSize) return bip::mapped_region(object, mode, 0, size);
  const std::size_t reserve_size = static_cast<std::size_t>(size + kHugePageSize);
  void* reserve =
      ::mmap(nullptr, reserve_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve == MAP_FAILED) return bip::mapped_region(object, mode, 0, size);
  // Pointer arithmetic on char*, not integer-to-pointer casts: the aligned
  // address stays derived from `reserve`.
  char* const base = static_cast<char*>(reserve);
  const auto base_address = reinterpret_cast<uintptr_t>(reserve);
  const std::size_t lead =
      static_cast<std::size_t>(RoundUp(base_address, kHugePageSize) - base_address);
  char* const aligned = base + lead;
  try {
    bip::mapped_region region(object, mode, 0, static_cast<std::size_t>(size), aligned, MAP_FIXED);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    char* const end =
        aligned + static_cast<std::size_t>(RoundUp(size, page_size > 0 ? page_size : 4096));
    char* const reserve_end = base + reserve_size;
    if (lead > 0) ::munmap(reserve, lead);
    if (reserve_end > end) ::munmap(end, static_cast<std::size_t>(reserve_end - end));
    return region;
  } catch (...) {
    ::munmap(reserve, reserve_size);
    throw;
  }
}

// The selected value of a sysfs multiple-choice file ("always [never]" ->
// "never"), or "unknown".
std::string SysfsChoice(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  const auto open = line.find('[');
  const auto close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return line;
  return line.substr(open + 1, close - open - 1);
}

// Collapses the pages of a prefaulted mapping into transparent huge pages.
// Empty on success, else why not, naming the kernel setting in the way.
std::string CollapseIntoHugePages(void* address, uint64_t size) {
  if (::madvise(address, static_cast<std::size_t>(size), MADV_COLLAPSE) == 0) return {};
  const int err = errno;
  std::string why = std::string("madvise(MADV_COLLAPSE) failed: ") + ErrnoMessage(err);
  if (err == EINVAL || err == EPERM) {
    why +=
        "; it needs Linux 6.1 or later with transparent huge pages, and "
        "/sys/kernel/mm/transparent_hugepage/shmem_enabled not 'deny' (it is '" +
        SysfsChoice("/sys/kernel/mm/transparent_hugepage/shmem_enabled") + "')";
  } else if (err == ENOMEM || err == EAGAIN) {
    why +=
        "; no free 2 MiB pages (memory fragmented or short): writing 1 to "
        "/proc/sys/vm/compact_memory may help";
  }
  return why;
}

// Unlinks a half-created segment; used on every failure path of Create.
void UnlinkQuietly(const std::string& name) { bip::shared_memory_object::remove(name.c_str()); }

}  // namespace

Segment::Segment(std::string name, SegmentKind kind, std::unique_ptr<Mapping> mapping)
    : name_(std::move(name)), kind_(kind), mapping_(std::move(mapping)) {
  auto* base = static_cast<std::byte*>(mapping_->region.get_address());
  mapped_size_ = mapping_->region.get_size();
  data_ = base + kSegmentDataOffset;
  data_size_ = mapped_size_ - kSegmentDataOffset;
}

Segment::~Segment() = default;

Status Segment::DropPages() {
  void* base = mapping_->region.get_address();
  void* at = ::mmap(base, mapped_size_, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) {
    return Status::IOError("segment '", name_, "': replacing its pages: ", ErrnoMessage(errno));
  }
  read_only_ = true;
  return Status::OK();
}

uint64_t Segment::TotalSizeFor(uint64_t data_size) { return kSegmentDataOffset + data_size; }

Status Segment::ValidateName(std::string_view name) {
  if (name.empty()) return Status::Invalid("shared-memory segment name is empty");
  if (name.size() > kMaxSegmentNameLength) {
    return Status::Invalid("shared-memory segment name '", name.substr(0, 32), "...' is ",
                           name.size(), " characters long; the limit is ", kMaxSegmentNameLength);
  }
  if (name.front() == '.') {
    return Status::Invalid("shared-memory segment name '", name, "' starts with '.'");
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i])) {
      return Status::Invalid("shared-memory segment name '", name, "': character ", i, " (code ",
                             static_cast<int>(static_cast<unsigned char>(name[i])),
                             ") is not one of [A-Za-z0-9._-]");
    }
  }
  return Status::OK();
}

Result<std::shared_ptr<Segment>> Segment::Create(std::string_view name, uint64_t data_size,
                                                 SegmentKind kind, const SegmentOptions& options) {
  ALKAID_RETURN_NOT_OK(ValidateName(name));
  if (data_size == 0) {
    return Status::Invalid("shared-memory segment '", name, "': data size must be positive");
  }
  if (data_size > kMaxSegmentSize) {
    return Status::Invalid("shared-memory segment '", name, "': data size ", data_size,
                           " exceeds the limit of ", kMaxSegmentSize, " bytes");
  }
  const std::string sname(name);
  const bool huge = options.huge_pages != HugePages::kOff;
  // A huge page must lie wholly inside the object: round its size up.
  const uint64_t total =
      huge ? RoundUp(TotalSizeFor(data_size), kHugePageSize) : TotalSizeFor(data_size);
  const auto mode = static_cast<mode_t>(options.access);

  // Step 1: create the object exclusively. From here on every failure must
  // unlink it: nobody else knows it exists yet.
  bip::shared_memory_object object;
  try {
    bip::permissions perms(static_cast<unsigned>(mode));
    object = bip::shared_memory_object(bip::create_only, sname.c_str(), bip::read_write, perms);
  } catch (const bip::interprocess_exception& e) {
    return FromBoostError(e, "cannot create", name);
  }

  auto fail = [&](Status st) -> Status {
    UnlinkQuietly(sname);
    return st;
  };

  const int fd = object.get_mapping_handle().handle;
  // Boost applies the mode with fchmod already, but ignores its result; the
  // requested mode is a security property, so we check it.
  if (::fchmod(fd, mode) != 0) {
    return fail(Status::FromErrno(errno, "fchmod of shared-memory segment '" + sname + "'"));
  }
  if (options.group >= 0 &&
      ::fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(options.group)) != 0) {
    return fail(Status::FromErrno(errno, "giving shared-memory segment '" + sname + "' to group " +
                                             std::to_string(options.group)));
  }
  struct stat created {};
  if (::fstat(fd, &created) != 0) {
    return fail(Status::FromErrno(errno, "fstat of shared-memory segment '" + sname + "'"));
  }
  try {
    object.truncate(static_cast<bip::offset_t>(total));
  } catch (const bip::interprocess_exception& e) {
    return fail(FromBoostError(e, "cannot size", name));
  }
  // Reserve every page now. tmpfs allocates lazily; without this, a full
  // /dev/shm shows up as SIGBUS the first time a page is touched.
  int rc;
  do {
    rc = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  } while (rc == EINTR);
  if (rc != 0) {
    if (rc == ENOSPC || rc == ENOMEM || rc == EFBIG) {
      return fail(Status::OutOfMemory("cannot reserve ", total,
                                      " bytes for shared-memory segment '", sname,
                                      "': /dev/shm is full (", ErrnoMessage(rc), ")"));
    }
    return fail(Status::FromErrno(rc, "posix_fallocate of shared-memory segment '" + sname + "' (" +
                                          std::to_string(total) + " bytes)"));
  }

  auto mapping = std::make_unique<Mapping>();
  try {
    mapping->region = MapAligned(object, total);
  } catch (const bip::interprocess_exception& e) {
    return fail(FromBoostError(e, "cannot map", name));
  } catch (const std::bad_alloc&) {
    return fail(Status::OutOfMemory("cannot map shared-memory segment '", sname, "'"));
  }

  if (options.prefault || huge) {
    Prefault(mapping->region.get_address(), mapping->region.get_size());
  }
  std::string huge_error;
  if (huge) {
    huge_error = CollapseIntoHugePages(mapping->region.get_address(), total);
    if (!huge_error.empty() && options.huge_pages == HugePages::kRequire) {
      return fail(Status::NotImplemented("cannot back shared-memory segment '", sname,
                                         "' with huge pages: ", huge_error));
    }
  }

  // Fresh tmpfs pages are zero; build the header in place and publish it.
  auto* header = new (mapping->region.get_address()) SegmentHeaderData();
  header->layout_version = kSegmentLayoutVersion;
  header->kind = static_cast<uint32_t>(kind);
  header->total_size = total;
  header->data_offset = kSegmentDataOffset;
  header->creator_pid = static_cast<uint32_t>(::getpid());
  // Release: publishes the fields above; partner of the acquire load of
  // `magic` in Segment::Open.
  header->magic.store(kSegmentMagic, std::memory_order_release);

  try {
    std::shared_ptr<Segment> segment(new Segment(sname, kind, std::move(mapping)));
    segment->huge_pages_ = huge && huge_error.empty();
    segment->group_ = static_cast<uint32_t>(created.st_gid);
    segment->huge_pages_error_ = std::move(huge_error);
    return segment;
  } catch (const std::bad_alloc&) {
    return fail(Status::OutOfMemory("cannot allocate a Segment object for '", sname, "'"));
  }
}

Result<std::shared_ptr<Segment>> Segment::Open(std::string_view name, SegmentKind expected_kind,
                                               const SegmentOpenOptions& options) {
  ALKAID_RETURN_NOT_OK(ValidateName(name));
  const std::string sname(name);
  auto mapping = std::make_unique<Mapping>();
  bip::offset_t actual_size = 0;
  uint32_t group = 0;
  try {
    const bip::mode_t mode = options.read_only ? bip::read_only : bip::read_write;
    bip::shared_memory_object object(bip::open_only, sname.c_str(), mode);
    if (!object.get_size(actual_size)) {
      return Status::IOError("cannot stat shared-memory segment '", sname, "'");
    }
    struct stat st {};
    if (::fstat(object.get_mapping_handle().handle, &st) == 0) {
      group = static_cast<uint32_t>(st.st_gid);
    }
    if (actual_size < static_cast<bip::offset_t>(kSegmentDataOffset)) {
      return Status::Invalid("shared-memory segment '", sname, "' is ", actual_size,
                             " bytes long, too small for the ", kSegmentDataOffset,
                             "-byte Alkaid segment header");
    }
    if (static_cast<uint64_t>(actual_size) > TotalSizeFor(kMaxSegmentSize)) {
      return Status::Invalid("shared-memory segment '", sname, "' is ", actual_size,
                             " bytes long, larger than any Alkaid segment");
    }
    mapping->region = MapAligned(object, static_cast<uint64_t>(actual_size), mode);
  } catch (const bip::interprocess_exception& e) {
    return FromBoostError(e, "cannot open", name);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("cannot map shared-memory segment '", sname, "'");
  }

  const auto* header = static_cast<const SegmentHeaderData*>(mapping->region.get_address());
  // Acquire: partner of the release store of `magic` in Create; makes the
  // other header fields visible.
  const uint64_t magic = header->magic.load(std::memory_order_acquire);
  if (magic == 0) {
    return Status::Invalid("shared-memory segment '", sname,
                           "' has no header yet: it is still being created, or it is not an "
                           "Alkaid segment");
  }
  if (magic != kSegmentMagic) {
    return Status::Invalid("shared-memory segment '", sname, "' is not an Alkaid segment: magic 0x",
                           std::hex, magic, " at offset 0, expected 0x", kSegmentMagic);
  }
  if (header->layout_version != kSegmentLayoutVersion) {
    return Status::Invalid("shared-memory segment '", sname, "' has layout version ",
                           header->layout_version, "; this build reads version ",
                           kSegmentLayoutVersion);
  }
  if (header->total_size != static_cast<uint64_t>(actual_size)) {
    return Status::Invalid("shared-memory segment '", sname, "': header records ",
                           header->total_size, " bytes but the object is ", actual_size,
                           " bytes long");
  }
  if (header->data_offset != kSegmentDataOffset) {
    return Status::Invalid("shared-memory segment '", sname, "': data offset ", header->data_offset,
                           " in the header, expected ", kSegmentDataOffset);
  }
  if (header->kind != static_cast<uint32_t>(expected_kind)) {
    return Status::Invalid("shared-memory segment '", sname, "' holds kind ", header->kind,
                           ", expected ", static_cast<uint32_t>(expected_kind), " (",
                           SegmentKindName(expected_kind), ")");
  }
  if (options.prefault) {
    Prefault(mapping->region.get_address(), mapping->region.get_size(), options.read_only);
  }
  try {
    std::shared_ptr<Segment> segment(new Segment(sname, expected_kind, std::move(mapping)));
    segment->read_only_ = options.read_only;
    segment->group_ = group;
    return segment;
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("cannot allocate a Segment object for '", sname, "'");
  }
}

Status Segment::Remove(std::string_view name) {
  ALKAID_RETURN_NOT_OK(ValidateName(name));
  const std::string sname(name);
  errno = 0;
  if (bip::shared_memory_object::remove(sname.c_str())) return Status::OK();
  const int err = errno;
  if (err == ENOENT) {
    return Status::KeyError("no shared-memory segment named '", sname, "'");
  }
  return Status::FromErrno(err, "cannot remove shared-memory segment '" + sname + "'");
}

}  // namespace alkaid::shm
