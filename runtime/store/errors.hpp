// store/errors — how the data plane sees database failures (DESIGN §13, STYLE R17).
// Every store call translates libpqxx exceptions into StoreError with a Kind the caller acts
// on: kConnection / kTransient → back off and retry the operation; kInDoubt → never blindly
// retry (tokens make the outcome safe either way); kRejected → the input was refused (bad
// payload, unknown stream): report it; kOther → log, count, back off.
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

 private:
  Kind kind_;
  std::string sqlstate_;
};

const char* kind_name(StoreError::Kind kind);

}  // namespace sqlstreams::store
