// Validation of a claim's status with Kubernetes parity (docs/validation-rules.md):
// the rules the API server applies to a status write, with its error wording.
//
// Every store write goes through it (Store::Put, PutAll, Reserve, Allocate,
// SetDeviceStatus, ...), and so does restore. Callers can also run it alone.
//
// Not checked, because the store cannot know: adminAccess needs a namespace
// label (`resource.kubernetes.io/admin-access: "true"`) that lives on the
// Namespace object; writers' authorisation (resourceclaims/binding and
// /driver); feature gates. Results and config requests are checked against
// the spec's request names only when the record carries them.
//
// Thread-safety: pure functions.
#ifndef CLAIMSTORE_VALIDATION_H_
#define CLAIMSTORE_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "claimstore/claim_record.h"

namespace claimstore {

// One Kubernetes field error: `<field>: <Type>[: <value>][: <detail>]`.
struct FieldError {
  enum class Type {
    kRequired,      // "Required value"
    kInvalid,       // "Invalid value"
    kDuplicate,     // "Duplicate value"
    kTooMany,       // "Too many"
    kTooLong,       // "Too long"
    kNotSupported,  // "Unsupported value"
    kForbidden,     // "Forbidden"
  };
  Type type = Type::kInvalid;
  std::string field;  // e.g. status.reservedFor[3].uid
  std::string value;  // as Kubernetes prints it ("\"x\"", 257), or empty
  std::string detail;
  std::string rule;          // claimstore's name for the rule, e.g. "reservedFor.unique"
  bool update_rule = false;  // a rule about the change (immutability, deletion)
  // A rule every stored claim keeps, loaded with validation off or not:
  // list-map keys unique (reservedFor by uid, devices by driver/pool/device/
  // shareID, conditions by type), consumer references whole, reservations
  // only with an allocation. The others are format and limit rules.
  bool identity_rule = false;

  // The type as Kubernetes prints it ("Duplicate value").
  static const char* TypeName(Type type);
  std::string ToString() const;
};

// Every rule the validator knows, by name (FieldError::rule).
const std::vector<std::string>& ValidationRules();

// Checks `updated` as a status write on top of `current`, or, with
// `current` null (a claim not held before: a new claim, a restore, a
// mirror), as state: then only the static rules apply (formats, limits,
// list-map keys), none about a change (immutability, no new consumers
// while being deleted). Returns the errors in Kubernetes' order; empty when
// valid. A list over its limit yields one TooMany error and its items are
// not walked. Ratcheting, as the API server's declarative validation does:
// what an update leaves as it was is not re-validated. An allocation that
// both records have is only compared (semantically: quantities by value);
// a status.devices entry equal to the current one of its key is not
// checked again, nor the length of a reservedFor list that does not grow
// (more lenient than the API server, which ratchets only an unchanged list:
// a claim stored with 300 reservations can still lose them one at a time). So a claim stored with
// validation off (BulkLoadOptions::validate) takes updates that leave its legacy fields alone.
std::vector<FieldError> ValidateClaimStatus(const ClaimRecord* current, const ClaimRecord& updated);

// OK for no errors; otherwise InvalidArgument (FailedPrecondition when any
// error is an update rule) whose message lists every error ("3 errors:
// a; b; c") and whose payload carries them for FieldErrorsOf().
absl::Status ValidationStatus(const std::vector<FieldError>& errors);

// The errors carried by a status from ValidationStatus (empty if none).
std::vector<FieldError> FieldErrorsOf(const absl::Status& status);

}  // namespace claimstore

#endif  // CLAIMSTORE_VALIDATION_H_
