#include "alkaid/format/buffer.h"

#include <cstdint>

#include "alkaid/format/memory_pool.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

bool Aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

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
