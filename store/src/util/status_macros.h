// Internal helpers for absl::Status plumbing (Abseil 20220623 has no
// ABSL_RETURN_IF_ERROR).
#ifndef CLAIMSTORE_SRC_UTIL_STATUS_MACROS_H_
#define CLAIMSTORE_SRC_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CS_STATUS_CONCAT_INNER_(a, b) a##b
#define CS_STATUS_CONCAT_(a, b) CS_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define CS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status cs_status_ = (expr);      \
    if (!cs_status_.ok()) return cs_status_; \
  } while (0)

// `CS_ASSIGN_OR_RETURN(auto x, F());` assigns the value of an
// absl::StatusOr<T> or returns its status from the enclosing function.
#define CS_ASSIGN_OR_RETURN(lhs, expr) \
  CS_ASSIGN_OR_RETURN_IMPL_(CS_STATUS_CONCAT_(cs_statusor_, __LINE__), lhs, expr)
#define CS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#endif  // CLAIMSTORE_SRC_UTIL_STATUS_MACROS_H_
