#include "alkaid/format/buffer.h"

#include <cstdint>
#include <cstring>

#include "alkaid/format/memory_pool.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// A pool whose allocations hold a byte pattern, as recycled memory does.
class DirtyPool : public SystemMemoryPool {
 public:
  static constexpr uint8_t kHeld = 0xAB;
  using SystemMemoryPool::Allocate;
  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p, SystemMemoryPool::Allocate(size, alignment));
    std::memset(p, kHeld, static_cast<size_t>(size));
    return p;
  }
};

TEST(MemoryPoolTest, AllocationsAreAlignedAndCounted) {
  SystemMemoryPool pool;
  ASSERT_OK_AND_ASSIGN(uint8_t * a, pool.Allocate(100));
  ASSERT_OK_AND_ASSIGN(uint8_t * b, pool.Allocate(1, 4096));
  EXPECT_TRUE(Aligned64(a));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  EXPECT_EQ(pool.bytes_allocated(), 101);
  pool.Free(a, 100);
  pool.Free(b, 1, 4096);
  EXPECT_EQ(pool.bytes_allocated(), 0);
  EXPECT_EQ(pool.max_memory(), 101);
}

TEST(MemoryPoolTest, LimitAndBadRequestsAreErrors) {
  SystemMemoryPool pool(1000);
  ASSERT_RAISES(kOutOfMemory, pool.Allocate(1001));
  ASSERT_RAISES(kInvalid, pool.Allocate(-1));
  ASSERT_RAISES(kInvalid, pool.Allocate(8, 48));
  ASSERT_OK_AND_ASSIGN(uint8_t * z, pool.Allocate(0));
  EXPECT_NE(z, nullptr);
  pool.Free(z, 0);
  EXPECT_EQ(pool.bytes_allocated(), 0);
}

TEST(BufferTest, ResizableBufferPadsTo64AndZeroesPadding) {
  SystemMemoryPool pool;
  ASSERT_OK_AND_ASSIGN(auto buf, AllocateBuffer(5, &pool));
  EXPECT_EQ(buf->size(), 5);
  EXPECT_EQ(buf->capacity(), 64);
  EXPECT_TRUE(Aligned64(buf->data()));
  for (int64_t i = 0; i < buf->capacity(); ++i) EXPECT_EQ(buf->data()[i], 0);
  std::memset(buf->mutable_data(), 0xAB, 5);
  ASSERT_OK(buf->Resize(200));
  EXPECT_EQ(buf->capacity() % 64, 0);
  EXPECT_GE(buf->capacity(), 200);
  EXPECT_EQ(buf->data()[4], 0xAB);
  for (int64_t i = 5; i < buf->capacity(); ++i) ASSERT_EQ(buf->data()[i], 0) << i;
  ASSERT_OK(buf->Resize(3, /*shrink_to_fit=*/true));
  EXPECT_EQ(buf->capacity(), 64);
  EXPECT_EQ(buf->data()[3], 0);  // bytes cut off by the shrink are zeroed
  buf.reset();
  EXPECT_EQ(pool.bytes_allocated(), 0);
}

TEST(BufferTest, AnUninitializedBufferKeepsWhatThePoolHeldAndZeroesOnlyItsPadding) {
  // Memory that held something: an arena block of an earlier batch.
  DirtyPool pool;
  ASSERT_OK_AND_ASSIGN(auto buf, AllocateUninitializedBuffer(100, &pool));
  EXPECT_EQ(buf->size(), 100);
  EXPECT_EQ(buf->capacity(), 128);
  EXPECT_TRUE(Aligned64(buf->data()));
  EXPECT_TRUE(buf->is_mutable());
  // Not a pass over the bytes, only over the padding.
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(buf->data()[i], DirtyPool::kHeld) << i;
  for (int64_t i = 100; i < 128; ++i) ASSERT_EQ(buf->data()[i], 0) << i;
  EXPECT_EQ(pool.bytes_allocated(), 128);
  // Written by the caller, then grown and shrunk as any ResizableBuffer.
  std::memset(buf->mutable_data(), 0x11, 100);
  ASSERT_OK(buf->Resize(300));
  EXPECT_EQ(buf->data()[99], 0x11);
  for (int64_t i = 100; i < buf->capacity(); ++i) ASSERT_EQ(buf->data()[i], 0) << i;
  ASSERT_OK(buf->Resize(10, /*shrink_to_fit=*/true));
  EXPECT_EQ(buf->capacity(), 64);
  buf.reset();
  EXPECT_EQ(pool.bytes_allocated(), 0);
}

TEST(BufferTest, AnUninitializedBufferOfABadSizeIsAnError) {
  SystemMemoryPool pool(1000);
  ASSERT_RAISES(kInvalid, AllocateUninitializedBuffer(-1, &pool));
  ASSERT_RAISES(kCapacityError, AllocateUninitializedBuffer(INT64_MAX, &pool));
  ASSERT_RAISES(kOutOfMemory, AllocateUninitializedBuffer(1001, &pool));
  ASSERT_OK_AND_ASSIGN(auto empty, AllocateUninitializedBuffer(0, &pool));
  EXPECT_EQ(empty->size(), 0);
  EXPECT_EQ(pool.bytes_allocated(), 0);
}

TEST(BufferTest, BytesWrittenPastSizeSurviveGrowth) {
  auto buf = ResizableBuffer::Make();
  ASSERT_OK(buf->Reserve(64));
  buf->mutable_data()[10] = 7;  // written before Resize, as builders do
  ASSERT_OK(buf->Reserve(4096));
  ASSERT_OK(buf->Resize(11));
  EXPECT_EQ(buf->data()[10], 7);
  for (int64_t i = 11; i < buf->capacity(); ++i) ASSERT_EQ(buf->data()[i], 0) << i;
}

TEST(BufferTest, SlicesShareMemoryAndKeepParentAlive) {
  ASSERT_OK_AND_ASSIGN(auto parent, Buffer::CopyOf("hello world"));
  const uint8_t* base = parent->data();
  auto slice = SliceBuffer(parent, 6, 5);
  parent.reset();
  EXPECT_EQ(slice->data(), base + 6);
  EXPECT_EQ(slice->ToString(), "world");
  ASSERT_RAISES(kIndexError, SliceBufferChecked(slice, 2, 4));
  ASSERT_RAISES(kIndexError, SliceBufferChecked(slice, -1, 1));
  ASSERT_OK_AND_ASSIGN(auto ok, SliceBufferChecked(slice, 1, 4));
  EXPECT_EQ(ok->ToString(), "orld");
}

TEST(BufferTest, WrapsForeignMemoryWithOwner) {
  auto owner = std::make_shared<std::string>("abcdef");
  auto buf = std::make_shared<Buffer>(reinterpret_cast<const uint8_t*>(owner->data()), 3, owner);
  EXPECT_FALSE(buf->is_mutable());
  EXPECT_EQ(buf->mutable_data(), nullptr);
  EXPECT_EQ(buf->view(), "abc");
  EXPECT_TRUE(buf->Equals(*Buffer::FromString("abc")));
  EXPECT_FALSE(buf->Equals(*Buffer::FromString("abd")));
}

}  // namespace
}  // namespace alkaid::format
