#include "store/core/sqlstate.hpp"

namespace sqlstreams::store {
namespace {

bool in_class(std::string_view sqlstate, std::string_view cls) {
  return sqlstate.size() == 5 && sqlstate.substr(0, 2) == cls;
}

}  // namespace

Condition condition_of(std::string_view s) {
  if (s.empty()) return Condition::kNone;
  if (in_class(s, "08") || s == "57P01" || s == "57P02" || s == "57P03") {
    return Condition::kConnection;
  }
  if (s == "40001") return Condition::kSerializationFailure;
  if (s == "40P01") return Condition::kDeadlock;
  if (s == "55P03") return Condition::kLockNotAvailable;
  if (s == "55000") return Condition::kPrerequisiteState;
  if (s == "23514") return Condition::kCheckViolation;
  if (in_class(s, "23")) return Condition::kIntegrityViolation;
  if (in_class(s, "22")) return Condition::kDataException;
  if (in_class(s, "54")) return Condition::kProgramLimit;
  if (s == "42P01") return Condition::kUndefinedTable;
  if (s == "3F000") return Condition::kInvalidSchemaName;
  if (s == "42704") return Condition::kUndefinedObject;
  if (s == "42501") return Condition::kInsufficientPrivilege;
  return Condition::kOther;
}

const char* condition_name(Condition c) {
  switch (c) {
    case Condition::kNone:
      return "none";
    case Condition::kConnection:
      return "connection";
    case Condition::kSerializationFailure:
      return "serialization failure";
    case Condition::kDeadlock:
      return "deadlock";
    case Condition::kLockNotAvailable:
      return "lock not available";
    case Condition::kPrerequisiteState:
      return "object not in prerequisite state";
    case Condition::kCheckViolation:
      return "check violation";
    case Condition::kIntegrityViolation:
      return "integrity constraint violation";
    case Condition::kDataException:
      return "data exception";
    case Condition::kProgramLimit:
      return "program limit exceeded";
    case Condition::kUndefinedTable:
      return "undefined table";
    case Condition::kInvalidSchemaName:
      return "invalid schema name";
    case Condition::kUndefinedObject:
      return "undefined object";
    case Condition::kInsufficientPrivilege:
      return "insufficient privilege";
    case Condition::kOther:
      return "other";
  }
  return "other";
}

StoreError::Kind kind_of(std::string_view s) {
  switch (condition_of(s)) {
    case Condition::kSerializationFailure:
    case Condition::kDeadlock:
    case Condition::kLockNotAvailable:
      return StoreError::Kind::kTransient;
    case Condition::kConnection:
      return StoreError::Kind::kConnection;
    case Condition::kDataException:
    case Condition::kCheckViolation:
    case Condition::kUndefinedObject:
      return StoreError::Kind::kRejected;
    case Condition::kProgramLimit:
      // Only 54000 itself (a payload over max_payload_bytes, V001); 54001 (too deep) and the
      // rest of the class stay kOther, as they always were.
      return s == "54000" ? StoreError::Kind::kRejected : StoreError::Kind::kOther;
    default:
      return StoreError::Kind::kOther;
  }
}

const char* kind_name(StoreError::Kind kind) {
  switch (kind) {
    case StoreError::Kind::kConnection:
      return "connection";
    case StoreError::Kind::kTransient:
      return "transient";
    case StoreError::Kind::kInDoubt:
      return "in-doubt";
    case StoreError::Kind::kRejected:
      return "rejected";
    case StoreError::Kind::kOther:
      return "other";
  }
  return "other";
}

}  // namespace sqlstreams::store
