#include "alkaid/common/status.h"
#include "alkaid/common/result.h"

#include <cerrno>
#include <memory>

#include "test_util.h"

namespace alkaid {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::Invalid("odd value ", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  ALKAID_ASSIGN_OR_RAISE(int h, Half(x));
  ALKAID_ASSIGN_OR_RAISE(auto q, Half(h));
  return q;
}

Status CheckPositive(int x) {
  ALKAID_CHECK_INPUT(x > 0, "value ", x, " is not positive");
  return Status::OK();
}

Status Chain(int x) {
  ALKAID_RETURN_NOT_OK_CTX(CheckPositive(x), "checking argument " << 1);
  ALKAID_RETURN_NOT_OK(Half(x));
  return Status::OK();
}

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
  EXPECT_EQ(sizeof(Status), sizeof(void*));
}

TEST(StatusTest, ErrorsCarryCodeAndFormattedMessage) {
  Status s = Status::Invalid("buffer ", 7, " of field '", "b", "' ends at ", 4096);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsInvalid());
  EXPECT_EQ(s.message(), "buffer 7 of field 'b' ends at 4096");
  EXPECT_EQ(s.ToString(), "Invalid: buffer 7 of field 'b' ends at 4096");
  Status copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(s.WithContext("reading x").message(), "reading x: buffer 7 of field 'b' ends at 4096");
}

TEST(StatusTest, FromErrnoMapsCodes) {
  EXPECT_EQ(Status::FromErrno(ENOSPC, "posix_fallocate").code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(Status::FromErrno(EACCES, "open").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Status::FromErrno(EIO, "read").code(), StatusCode::kIOError);
  EXPECT_NE(Status::FromErrno(ENOENT, "open /x").message().find("open /x: "), std::string::npos);
}

TEST(ResultTest, PropagatesValuesAndErrors) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(12));
  EXPECT_EQ(q, 3);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "odd value 3", Quarter(6));
  EXPECT_EQ(Quarter(5).status().message(), "odd value 5");
  EXPECT_EQ(Quarter(5).ValueOr(-1), -1);
}

TEST(ResultTest, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(4);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).ValueOrDie();
  EXPECT_EQ(*p, 4);
}

TEST(ResultTest, OkStatusIsNotAValue) {
  Result<int> r(Status::OK());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnknown);
}

Status ReturnStored(const Status& stored) {
  ALKAID_RETURN_NOT_OK(stored);
  return Status::OK();
}

TEST(MacrosTest, LvalueStatusIsCopiedNotMovedFrom) {
  Status stored = Status::IOError("disk gone");
  EXPECT_EQ(ReturnStored(stored).message(), "disk gone");
  Status again = stored;
  auto f = [&]() -> Status {
    ALKAID_RETURN_NOT_OK(stored);
    return Status::OK();
  };
  EXPECT_FALSE(f().ok());
  EXPECT_EQ(stored.message(), "disk gone");  // still holds its error
  EXPECT_EQ(again, stored);
}

TEST(MacrosTest, ContextAndInputChecks) {
  EXPECT_OK(Chain(4));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "checking argument 1: value -1 is not positive", Chain(-1));
  ASSERT_RAISES(kInvalid, Chain(3));
}

}  // namespace
}  // namespace alkaid
