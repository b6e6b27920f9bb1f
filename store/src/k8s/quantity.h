// resource.Quantity as the API server parses and prints it.
//
// The codec stores every quantity in the exact text the API server would
// write for it, so a dump equals what `kubectl get -o json` shows. That text
// is computed here: Kubernetes' canonical form, including two faithful quirks
// of apimachinery's ParseQuantity (docs/validation-rules.md):
//  - inputs its fast path judges canonical are re-emitted verbatim
//    (`+1Gi`, `05`, `01Gi`);
//  - a DecimalSI value whose canonical exponent has no SI suffix (above E)
//    is printed without one (`1000E` prints as `1`).
#ifndef CLAIMSTORE_SRC_K8S_QUANTITY_H_
#define CLAIMSTORE_SRC_K8S_QUANTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace claimstore::internal {

class Quantity {
 public:
  enum class Format : uint8_t { kDecimalExponent, kBinarySI, kDecimalSI };

  // A zero quantity.
  Quantity() = default;

  // Parses `text` like resource.ParseQuantity. Returns InvalidArgument with
  // apimachinery's messages ("quantities must match the regular expression
  // ...", "unable to parse quantity's suffix", "unable to parse numeric part
  // of quantity") on malformed input.
  static absl::StatusOr<Quantity> Parse(absl::string_view text);

  // Parses a raw JSON token the way Quantity.UnmarshalJSON does: `null` is
  // zero, a JSON string has its quotes stripped (escapes are not decoded) and
  // surrounding Unicode white space trimmed, a bare number is parsed as text.
  static absl::StatusOr<Quantity> ParseJsonToken(absl::string_view token);

  // The text the API server writes for this quantity.
  std::string ToString() const;

  // The exact sum (inf.Dec arithmetic, no rounding), as apimachinery's
  // Quantity.Add leaves it: the format is this one's, or `other`'s when
  // this is zero; the text is computed (canonical), never kept verbatim.
  // OutOfRange when the exact sum would need more than kMaxSumDigits
  // digits (`1e2000000000` + `1`: Parse takes such exponents, and an
  // exact sum would take gigabytes).
  static constexpr size_t kMaxSumDigits = 1000;
  absl::StatusOr<Quantity> Plus(const Quantity& other) const;
  bool negative() const { return negative_; }

  // Numeric comparison: negative, zero or positive as *this <, ==, > other.
  int Compare(const Quantity& other) const;

  bool IsZero() const { return digits_.empty(); }
  Format format() const { return format_; }

 private:
  bool negative_ = false;
  std::string digits_;   // magnitude without leading zeros; empty for zero
  int64_t scale10_ = 0;  // value = digits_ * 10^scale10_
  Format format_ = Format::kDecimalSI;
  std::string verbatim_;  // input text kept by the fast path, if any
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_K8S_QUANTITY_H_
