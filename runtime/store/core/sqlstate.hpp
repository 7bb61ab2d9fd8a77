// store/core/sqlstate — INTERNAL to store/: the one classification of SQLSTATE codes
// (docs/design.md#errors-and-trust).
// Owns: the Condition of a code (store/errors.hpp, public: callers decide on it), the
// StoreError::Kind a failed statement gets, and the few codes store/ itself raises. Nothing in
// or outside store/ compares SQLSTATE text anywhere else.
// Threading: pure functions.
#pragma once

#include <string_view>

#include "store/errors.hpp"

namespace sqlstreams::store {

// What a failed statement with this SQLSTATE means for its caller: kTransient (serialization
// failure, deadlock, lock not available), kConnection (class 08, server shutting down or
// starting: the connection is gone), kRejected (data exceptions, 23514, 42704, 54000),
// kOther for the rest.
StoreError::Kind kind_of(std::string_view sqlstate);

// The code of a lock not granted in time (lock_timeout, NOWAIT), for errors store/ raises.
inline constexpr const char* kSqlstateLockNotAvailable = "55P03";

}  // namespace sqlstreams::store
