#include "alkaid/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using testing::ShmemPmdMappedKb;
using testing::ShmTest;

class SegmentTest : public ShmTest {};

mode_t ModeOf(const std::string& name) {
  struct stat st {};
  if (::stat(("/dev/shm/" + name).c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

TEST_F(SegmentTest, CreateThenOpenSeesTheSameBytesAtAnotherAddress) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto created, Segment::Create(name, 4096, SegmentKind::kRaw));
  EXPECT_EQ(created->name(), name);
  EXPECT_EQ(created->kind(), SegmentKind::kRaw);
  EXPECT_EQ(created->data_size(), 4096u);
  EXPECT_EQ(created->mapped_size(), Segment::TotalSizeFor(4096));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(created->data()) % 64, 0u);
  for (uint64_t i = 0; i < 4096; ++i) ASSERT_EQ(created->data()[i], std::byte{0});
  std::memcpy(created->data(), "hello", 5);

  ASSERT_OK_AND_ASSIGN(auto opened, Segment::Open(name, SegmentKind::kRaw));
  EXPECT_NE(opened->data(), created->data());  // a second mapping
  EXPECT_EQ(opened->data_size(), 4096u);
  EXPECT_EQ(std::memcmp(opened->data(), "hello", 5), 0);
  opened->data()[100] = std::byte{42};
  EXPECT_EQ(created->data()[100], std::byte{42});
}

// A mapping of at least one huge page is 2 MiB-aligned (so huge pages of the
// object can be mapped by one page-table entry), in every process.
TEST_F(SegmentTest, LargeMappingsAre2MiBAligned) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto created, Segment::Create(name, 3 << 20, SegmentKind::kRaw));
  ASSERT_OK_AND_ASSIGN(auto opened, Segment::Open(name, SegmentKind::kRaw));
  for (const auto* s : {created.get(), opened.get()}) {
    const auto base = reinterpret_cast<uintptr_t>(s->data()) - 128;
    EXPECT_EQ(base % (2u << 20), 0u);
  }
  EXPECT_FALSE(created->huge_pages());  // not asked for
  created->data()[(3 << 20) - 1] = std::byte{7};
  EXPECT_EQ(opened->data()[(3 << 20) - 1], std::byte{7});
}

// kTry gives huge pages where the kernel can (Linux 6.1+, THP not denied)
// and falls back to 4 KiB pages with the reason otherwise; either way the
// segment works, its size is whole huge pages, and another process's
// mapping shares the bytes. Where huge pages were obtained, both mappings
// map them with PMD entries.
TEST_F(SegmentTest, HugePagesAreUsedWhenAvailableOrTheReasonIsGiven) {
  const std::string name = NewName();
  SegmentOptions options;
  options.huge_pages = HugePages::kTry;
  ASSERT_OK_AND_ASSIGN(auto created, Segment::Create(name, 5 << 20, SegmentKind::kRaw, options));
  EXPECT_EQ(created->mapped_size() % (2u << 20), 0u);
  EXPECT_GE(created->data_size(), uint64_t{5} << 20);
  for (uint64_t i = 0; i < created->data_size(); i += 4096) {
    ASSERT_EQ(created->data()[i], std::byte{0});
  }
  ASSERT_OK_AND_ASSIGN(auto opened, Segment::Open(name, SegmentKind::kRaw));
  created->data()[4 << 20] = std::byte{9};
  EXPECT_EQ(opened->data()[4 << 20], std::byte{9});
  if (created->huge_pages()) {
    EXPECT_TRUE(created->huge_pages_error().empty());
    EXPECT_GE(ShmemPmdMappedKb(created->data()), 4096);
    EXPECT_GE(ShmemPmdMappedKb(opened->data()), 4096);
  } else {
    EXPECT_NE(created->huge_pages_error().find("MADV_COLLAPSE"), std::string::npos)
        << created->huge_pages_error();
  }

  // kRequire: the same outcome, or a failure naming the cause with nothing
  // left behind.
  const std::string name2 = NewName();
  options.huge_pages = HugePages::kRequire;
  auto required = Segment::Create(name2, 1 << 20, SegmentKind::kRaw, options);
  if (created->huge_pages()) {
    ASSERT_OK(required);
    EXPECT_TRUE((*required)->huge_pages());
  } else {
    ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "huge pages", required);
    ASSERT_RAISES(kKeyError, Segment::Open(name2, SegmentKind::kRaw));
  }
}

TEST_F(SegmentTest, PermissionsDefaultToOwnerOnlyAndGroupOnRequest) {
  const std::string a = NewName();
  const std::string b = NewName();
  const mode_t old_umask = ::umask(0077);  // must not affect the requested modes
  ASSERT_OK_AND_ASSIGN(auto sa, Segment::Create(a, 64, SegmentKind::kRaw));
  SegmentOptions group;
  group.access = SegmentAccess::kOwnerAndGroup;
  ASSERT_OK_AND_ASSIGN(auto sb, Segment::Create(b, 64, SegmentKind::kRaw, group));
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(a), 0600u);
  EXPECT_EQ(ModeOf(b), 0660u);
}

TEST_F(SegmentTest, CreateOfAnExistingNameFailsAndKeepsTheOriginal) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto first, Segment::Create(name, 128, SegmentKind::kRaw));
  first->data()[0] = std::byte{7};
  ASSERT_RAISES(kAlreadyExists, Segment::Create(name, 256, SegmentKind::kRaw));
  ASSERT_OK_AND_ASSIGN(auto again, Segment::Open(name, SegmentKind::kRaw));
  EXPECT_EQ(again->data()[0], std::byte{7});
  EXPECT_EQ(again->data_size(), 128u);
}

TEST_F(SegmentTest, OpenAndRemoveOfAMissingNameGiveKeyError) {
  const std::string name = NewName();
  ASSERT_RAISES(kKeyError, Segment::Open(name, SegmentKind::kRaw));
  ASSERT_RAISES(kKeyError, Segment::Remove(name));
}

TEST_F(SegmentTest, RemoveUnlinksButMappingsStayValid) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Create(name, 64, SegmentKind::kRaw));
  ASSERT_OK(Segment::Remove(name));
  ASSERT_RAISES(kKeyError, Segment::Open(name, SegmentKind::kRaw));
  seg->data()[63] = std::byte{1};  // still mapped
  EXPECT_EQ(seg->data()[63], std::byte{1});
}

TEST_F(SegmentTest, NamesAreValidated) {
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "empty", Segment::Create("", 64, SegmentKind::kRaw));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "character 1",
                             Segment::Create("a/b", 64, SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Create(".hidden", 64, SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Create("with space", 64, SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Create(std::string(kMaxSegmentNameLength + 1, 'a'), 64,
                                          SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Open("../etc", SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Remove("x y"));
  ASSERT_OK(Segment::ValidateName("Alkaid-chan_0.v1"));
}

TEST_F(SegmentTest, SizesAreValidated) {
  ASSERT_RAISES(kInvalid, Segment::Create(NewName(), 0, SegmentKind::kRaw));
  ASSERT_RAISES(kInvalid, Segment::Create(NewName(), kMaxSegmentSize + 1, SegmentKind::kRaw));
}

TEST_F(SegmentTest, OpenChecksTheKind) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Create(name, 64, SegmentKind::kRaw));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "expected 4 (channel)",
                             Segment::Open(name, SegmentKind::kChannel));
}

// Writes `bytes` into a fresh POSIX shm object, bypassing Segment.
void MakeForeignObject(const std::string& name, const std::vector<uint8_t>& bytes) {
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

TEST_F(SegmentTest, OpenRefusesGarbage) {
  const std::string tiny = NewName();
  MakeForeignObject(tiny, std::vector<uint8_t>(10, 0xAB));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "too small", Segment::Open(tiny, SegmentKind::kRaw));

  const std::string junk = NewName();
  MakeForeignObject(junk, std::vector<uint8_t>(4096, 0xAB));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "not an Alkaid segment",
                             Segment::Open(junk, SegmentKind::kRaw));

  const std::string zeros = NewName();
  MakeForeignObject(zeros, std::vector<uint8_t>(4096, 0));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "still being created",
                             Segment::Open(zeros, SegmentKind::kRaw));
}

TEST_F(SegmentTest, OpenChecksRecordedSizeAndVersionAgainstTheMapping) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Create(name, 4096, SegmentKind::kRaw));
  // Grow the object behind the header's back.
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(seg->mapped_size() + 4096)), 0);
  ::close(fd);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "header records", Segment::Open(name, SegmentKind::kRaw));

  const std::string other = NewName();
  ASSERT_OK_AND_ASSIGN(auto seg2, Segment::Create(other, 4096, SegmentKind::kRaw));
  // The layout version follows the 8-byte magic at offset 0 of the header.
  uint32_t bad_version = 99;
  std::memcpy(seg2->data() - 128 + 8, &bad_version, 4);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "layout version 99",
                             Segment::Open(other, SegmentKind::kRaw));
}

TEST_F(SegmentTest, FullDevShmIsAnOutOfMemoryErrorAtCreationWithNothingLeft) {
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs("/dev/shm", &vfs), 0);
  const uint64_t total = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  // More than the whole file system: the kernel refuses the reservation up
  // front, without first filling memory.
  const uint64_t size = std::max(total, avail) + (uint64_t{1} << 30);
  if (size > kMaxSegmentSize) GTEST_SKIP() << "/dev/shm is larger than kMaxSegmentSize";
  const std::string name = NewName();
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "/dev/shm is full",
                             Segment::Create(name, size, SegmentKind::kRaw));
  struct stat st {};
  EXPECT_NE(::stat(("/dev/shm/" + name).c_str(), &st), 0) << "half-created segment left behind";
  ASSERT_RAISES(kKeyError, Segment::Open(name, SegmentKind::kRaw));
}

}  // namespace
}  // namespace alkaid::shm
