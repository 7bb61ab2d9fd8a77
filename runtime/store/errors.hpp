// store/errors — how the data plane sees database failures (DESIGN §13, STYLE R17).
// Every store call translates libpqxx exceptions into StoreError with a Kind the caller acts
// on: kConnection / kTransient → back off and retry the operation; kInDoubt → never blindly
// retry (tokens make the outcome safe either way); kRejected → the input was refused (bad
// payload, unknown stream): report it; kOther → log, count, back off.
// Orthogonal to the Kind: deterministic() — the database refused this very input and will
// refuse it again (SQLSTATE class 22 data exception, 23 integrity constraint violation). No loop
// may retry such an error with the same input (DESIGN §7 "Poison-proof commits").
// Threading: value type.
#pragma once

#include <stdexcept>
#include <string>

namespace sqlstreams::store {

class StoreError : public std::runtime_error {
 public:
  enum class Kind { kConnection, kTransient, kInDoubt, kRejected, kOther };
  StoreError(Kind kind, std::string message, std::string sqlstate = {})
      : std::runtime_error(std::move(message)), kind_(kind), sqlstate_(std::move(sqlstate)) {}
  Kind kind() const { return kind_; }
  const std::string& sqlstate() const { return sqlstate_; }
  bool retryable() const { return kind_ == Kind::kConnection || kind_ == Kind::kTransient; }
  bool deterministic() const { return is_deterministic_rejection(sqlstate_); }
  // SQLSTATE classes 22 and 23.
  static bool is_deterministic_rejection(const std::string& sqlstate) {
    return sqlstate.size() == 5 &&
           (sqlstate.compare(0, 2, "22") == 0 || sqlstate.compare(0, 2, "23") == 0);
  }

 private:
  Kind kind_;
  std::string sqlstate_;
};

const char* kind_name(StoreError::Kind kind);

}  // namespace sqlstreams::store
