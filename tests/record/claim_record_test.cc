#include "claimstore/claim_record.h"

#include "claimstore/codec.h"
#include "testutil/test_util.h"

namespace claimstore {
namespace {

using ::claimstore::testing::IsOk;
using ::claimstore::testing::StatusIs;

constexpr char kClaim[] = R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",
  "metadata":{"name":"c","namespace":"ns","uid":"u-1"},
  "status":{"reservedFor":[{"resource":"pods","name":"p","uid":"pod-1"}]}})";

TEST(ClaimRecordTest, AcceptsTheBytesOfADecodedRecord) {
  absl::StatusOr<ClaimRecord> record = DecodeClaim(kClaim);
  ASSERT_THAT(record, IsOk());
  absl::StatusOr<ClaimRecord> copy = ClaimRecord::FromBytes(std::string(record->bytes()));
  ASSERT_THAT(copy, IsOk());
  EXPECT_EQ(copy->claim_namespace(), "ns");
  EXPECT_EQ(copy->name(), "c");
  EXPECT_EQ(copy->uid(), "u-1");
}

TEST(ClaimRecordTest, RejectsBytesThatAreNotARecord) {
  EXPECT_THAT(ClaimRecord::FromBytes(""), StatusIs(absl::StatusCode::kDataLoss, "CLM1"));
  EXPECT_THAT(ClaimRecord::FromBytes("not a flatbuffer at all"),
              StatusIs(absl::StatusCode::kDataLoss, "CLM1"));
}

TEST(ClaimRecordTest, NoTruncationReadsAsADifferentRecord) {
  absl::StatusOr<ClaimRecord> record = DecodeClaim(kClaim);
  ASSERT_THAT(record, IsOk());
  const std::string bytes(record->bytes());
  const std::string json = EncodeClaim(*record);
  size_t accepted = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<ClaimRecord> r = ClaimRecord::FromBytes(bytes.substr(0, n));
    if (!r.ok()) continue;
    // Only trailing alignment padding may be cut without detection.
    ++accepted;
    EXPECT_EQ(EncodeClaim(*r), json) << "length " << n;
  }
  EXPECT_LT(accepted, 8u);
}

TEST(ClaimRecordTest, NeverAcceptsABadOffsetSilently) {
  // Flip each byte in turn: the verifier either rejects the buffer or the
  // record still reads without going out of bounds (checked under ASan).
  absl::StatusOr<ClaimRecord> record = DecodeClaim(kClaim);
  ASSERT_THAT(record, IsOk());
  const std::string bytes(record->bytes());
  int rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0xFF);
    absl::StatusOr<ClaimRecord> r = ClaimRecord::FromBytes(corrupt);
    if (!r.ok()) {
      ++rejected;
      continue;
    }
    (void)EncodeClaim(*r);  // must stay within the buffer
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace claimstore
