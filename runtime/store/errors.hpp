// store/errors — how the data plane sees database failures (docs/design.md#errors-and-trust, STYLE
// R17). Every store call translates libpqxx exceptions into StoreError with a Kind the caller acts
// on: kConnection / kTransient → back off and retry the operation; kInDoubt → never blindly
// retry (tokens make the outcome safe either way); kRejected → the input was refused (bad
// payload, unknown stream): report it; kOther → log, count, back off.
// Orthogonal to the Kind: the Condition, what the database reported by SQLSTATE, classified in
// ONE place (store/core/sqlstate.cpp); nobody outside store/core compares SQLSTATE text.
// deterministic() — the database refused this very input and will refuse it again (SQLSTATE
// class 22 data exception, 23 integrity constraint violation). No loop may retry such an error
// with the same input (docs/design.md#poison-proof-commits).
// Threading: value type.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace sqlstreams::store {

// The SQLSTATE conditions that store/ and its callers act on.
enum class Condition {
  kNone,                   // no SQLSTATE: refused before sending, a lost connection, libpqxx
  kConnection,             // class 08, 57P01..57P03 (the server shuts down or starts up)
  kSerializationFailure,   // 40001
  kDeadlock,               // 40P01
  kLockNotAvailable,       // 55P03: lock_timeout, NOWAIT
  kPrerequisiteState,      // 55000: (before V007) sqlstreams.produce() found no partition
  kCheckViolation,         // 23514: a CHECK, or no partition of the log holds the row's id
  kIntegrityViolation,     // the rest of class 23
  kDataException,          // class 22: bad UTF-8, not JSON, out of range...
  kProgramLimit,           // class 54: too long, too deep, too many
  kUndefinedTable,         // 42P01
  kInvalidSchemaName,      // 3F000
  kUndefinedObject,        // 42704 (sqlstreams functions: unknown stream)
  kInsufficientPrivilege,  // 42501
  kOther,                  // any other SQLSTATE
};

// The classification (store/core/sqlstate.cpp).
Condition condition_of(std::string_view sqlstate);
const char* condition_name(Condition condition);

class StoreError : public std::runtime_error {
 public:
  enum class Kind { kConnection, kTransient, kInDoubt, kRejected, kOther };
  StoreError(Kind kind, std::string message, std::string sqlstate = {})
      : std::runtime_error(std::move(message)),
        kind_(kind),
        sqlstate_(std::move(sqlstate)),
        condition_(condition_of(sqlstate_)) {}
  Kind kind() const { return kind_; }
  // The raw code, for logs; decide on condition().
  const std::string& sqlstate() const { return sqlstate_; }
  Condition condition() const { return condition_; }
  bool retryable() const { return kind_ == Kind::kConnection || kind_ == Kind::kTransient; }
  // SQLSTATE classes 22 and 23.
  bool deterministic() const { return is_deterministic(condition_); }
  // The SQLStreams schema (or one of its tables) does not exist: nothing was migrated yet.
  bool schema_missing() const {
    return condition_ == Condition::kUndefinedTable || condition_ == Condition::kInvalidSchemaName;
  }
  static bool is_deterministic(Condition c) {
    return c == Condition::kDataException || c == Condition::kCheckViolation ||
           c == Condition::kIntegrityViolation;
  }

 private:
  Kind kind_;
  std::string sqlstate_;
  Condition condition_;
};

const char* kind_name(StoreError::Kind kind);

}  // namespace sqlstreams::store
