// The control protocol's new fields: payload kinds and producer
// re-registration (encode/decode round trips and refusals of bad values).

#include <gtest/gtest.h>

#include "protocol/control.h"
#include "test_util.h"

namespace alkaid::broker::protocol {
namespace {

TEST(ControlProtocolTest, PayloadKindsRoundTrip) {
  Request create;
  create.type = RequestType::kCreateTopic;
  create.config.name = "rows";
  create.config.schema = {1, 2, 3};
  create.config.payload_kind = PayloadKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(create)));
  EXPECT_EQ(decoded.config.payload_kind, PayloadKind::kUnsafeRow);

  Request attach;
  attach.type = RequestType::kAttachConsumer;
  attach.topic = "rows";
  attach.payload_kind = PayloadKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.payload_kind, PayloadKind::kUnsafeRow);
  attach.payload_kind = PayloadKind::kRecordBatch;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.payload_kind, PayloadKind::kRecordBatch);

  EXPECT_STREQ(PayloadKindName(PayloadKind::kRecordBatch), "record-batch");
  EXPECT_STREQ(PayloadKindName(PayloadKind::kUnsafeRow), "unsafe-row");
}

TEST(ControlProtocolTest, UnknownPayloadKindsAreRefused) {
  Request attach;
  attach.type = RequestType::kAttachProducer;
  attach.topic = "t";
  attach.payload_kind = static_cast<PayloadKind>(7);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "AttachProducer: unknown payload kind 7",
                             DecodeRequest(EncodeRequest(attach)));
  Request create;
  create.type = RequestType::kCreateTopic;
  create.config.name = "t";
  create.config.schema = {1};
  create.config.payload_kind = static_cast<PayloadKind>(200);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "topic 't': unknown payload kind 200",
                             DecodeRequest(EncodeRequest(create)));
}

TEST(ControlProtocolTest, ProducerReRegistration) {
  Request attach;
  attach.type = RequestType::kAttachProducer;
  attach.topic = "t";
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_TRUE(decoded.ring.empty());
  EXPECT_TRUE(decoded.bodies.empty());

  attach.ring = "alkaid.18e.42.p3.ring";
  attach.bodies = "alkaid.18e.42.p3.bodies";
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.ring, attach.ring);
  EXPECT_EQ(decoded.bodies, attach.bodies);

  Request half = attach;
  half.bodies.clear();
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "needs both the ring and the bodies name",
                             DecodeRequest(EncodeRequest(half)));
  Request bad = attach;
  bad.ring = "../etc/passwd";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "ring name", DecodeRequest(EncodeRequest(bad)));
  bad.ring = ".hidden";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "starts with '.'", DecodeRequest(EncodeRequest(bad)));
}

}  // namespace
}  // namespace alkaid::broker::protocol
