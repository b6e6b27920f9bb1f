// DecodeStatus (decode_status.h): an error's location travels as data and
// is written into the message once.
#include "codec/decode_status.h"

#include "testutil/test_util.h"

namespace claimstore::internal {
namespace {

TEST(DecodeStatusTest, OkHasNoError) {
  const DecodeStatus ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(ok.ToStatus().ok());
}

TEST(DecodeStatusTest, ALocatedErrorNamesItsDocumentAndByte) {
  const DecodeStatus s =
      DecodeStatus::At(absl::InvalidArgumentError("status.devices[0]: bad"), 3, 4096);
  EXPECT_TRUE(s.located());
  EXPECT_FALSE(s.unplaced());
  EXPECT_EQ(s.document(), 3u);
  EXPECT_EQ(s.offset(), 4096u);
  EXPECT_EQ(s.error().message(), "status.devices[0]: bad");  // the location is data
  EXPECT_EQ(s.ToStatus(),
            absl::InvalidArgumentError("document 3 (byte 4096): status.devices[0]: bad"));
}

TEST(DecodeStatusTest, AnUnlocatedErrorIsItsOwnMessage) {
  const DecodeStatus s = DecodeStatus::Unlocated(absl::NotFoundError("sink said no"));
  EXPECT_FALSE(s.located());
  EXPECT_EQ(s.ToStatus(), absl::NotFoundError("sink said no"));
}

TEST(DecodeStatusTest, AnUnplacedSyntaxErrorSaysDocumentZeroUntilLocated) {
  const DecodeStatus s = DecodeStatus::Unplaced(absl::InvalidArgumentError("malformed JSON: x"));
  EXPECT_TRUE(s.unplaced());
  EXPECT_EQ(s.ToStatus().message(), "document 0 (byte 0): malformed JSON: x");
}

}  // namespace
}  // namespace claimstore::internal
