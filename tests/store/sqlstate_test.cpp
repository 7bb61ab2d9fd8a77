// The one SQLSTATE classification (store/core/sqlstate.cpp, docs/design.md#errors-and-trust) as a
// table: the condition of a code, the Kind a failed statement gets, and what counts as
// deterministic.
#include "store/core/sqlstate.hpp"

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>

#include "store/core/pqxx_sqlstate.hpp"

namespace sqlstreams::store {
namespace {

struct SqlstateRow {
  const char* sqlstate;
  Condition condition;
  StoreError::Kind kind;
  bool deterministic;
};

constexpr StoreError::Kind kConn = StoreError::Kind::kConnection;
constexpr StoreError::Kind kTrans = StoreError::Kind::kTransient;
constexpr StoreError::Kind kRej = StoreError::Kind::kRejected;
constexpr StoreError::Kind kOth = StoreError::Kind::kOther;

const SqlstateRow kTable[] = {
    {"", Condition::kNone, kOth, false},
    {"08006", Condition::kConnection, kConn, false},
    {"08P01", Condition::kConnection, kConn, false},
    {"57P01", Condition::kConnection, kConn, false},
    {"57P03", Condition::kConnection, kConn, false},
    {"57014", Condition::kOther, kOth, false},  // query canceled: not a lost connection
    {"40001", Condition::kSerializationFailure, kTrans, false},
    {"40P01", Condition::kDeadlock, kTrans, false},
    {"55P03", Condition::kLockNotAvailable, kTrans, false},
    {"55000", Condition::kPrerequisiteState, kOth, false},
    {"23514", Condition::kCheckViolation, kRej, true},
    {"23505", Condition::kIntegrityViolation, kOth, true},
    {"22P02", Condition::kDataException, kRej, true},
    {"22021", Condition::kDataException, kRej, true},
    {"54000", Condition::kProgramLimit, kRej, false},
    {"54001", Condition::kProgramLimit, kOth, false},
    {"42P01", Condition::kUndefinedTable, kOth, false},
    {"3F000", Condition::kInvalidSchemaName, kOth, false},
    {"42704", Condition::kUndefinedObject, kRej, false},
    {"42501", Condition::kInsufficientPrivilege, kOth, false},
    {"XX000", Condition::kOther, kOth, false},
};

TEST(Sqlstate, EveryCodeHasOneConditionKindAndDeterminism) {
  for (const auto& row : kTable) {
    SCOPED_TRACE(std::string("sqlstate '") + row.sqlstate + "'");
    EXPECT_EQ(condition_of(row.sqlstate), row.condition) << condition_name(row.condition);
    EXPECT_EQ(kind_of(row.sqlstate), row.kind) << kind_name(row.kind);
    const StoreError e(kind_of(row.sqlstate), "x", row.sqlstate);
    EXPECT_EQ(e.condition(), row.condition);
    EXPECT_EQ(e.deterministic(), row.deterministic);
  }
}

// libpqxx 6.4 throws these as its typed errors without the server's code (the rollback family
// is not even an sql_error): the code comes back from the type, and a kept code wins.
TEST(Sqlstate, ACodeLibpqxxDroppedComesBackFromTheErrorsType) {
  EXPECT_EQ(sqlstate_of(pqxx::serialization_failure("x")), "40001");
  EXPECT_EQ(kind_of(sqlstate_of(pqxx::serialization_failure("x"))), kTrans);
  EXPECT_EQ(sqlstate_of(pqxx::deadlock_detected("x")), "40P01");
  EXPECT_EQ(kind_of(sqlstate_of(pqxx::deadlock_detected("x"))), kTrans);
  EXPECT_EQ(sqlstate_of(pqxx::statement_completion_unknown("x")), "40003");
  EXPECT_EQ(sqlstate_of(pqxx::transaction_rollback("x")), "40000");
  EXPECT_EQ(sqlstate_of(pqxx::insufficient_privilege("x")), "42501");
  EXPECT_EQ(sqlstate_of(pqxx::undefined_table("x")), "42P01");
  EXPECT_EQ(sqlstate_of(pqxx::unique_violation("x")), "23505");
  EXPECT_EQ(sqlstate_of(pqxx::check_violation("x")), "23514");
  EXPECT_EQ(sqlstate_of(pqxx::data_exception("x")), "22000");
  EXPECT_EQ(sqlstate_of(pqxx::data_exception("x", "", "22P02")), "22P02");  // kept: it wins
  EXPECT_EQ(sqlstate_of(pqxx::sql_error("x", "", "XX000")), "XX000");
  EXPECT_EQ(sqlstate_of(pqxx::sql_error("x")), "");
  EXPECT_EQ(sqlstate_of(pqxx::broken_connection("x")), "");
  EXPECT_EQ(sqlstate_of(std::runtime_error("x")), "");
}

TEST(Sqlstate, OnlyAMissingTableOrSchemaMeansNoSchema) {
  EXPECT_TRUE(StoreError(StoreError::Kind::kOther, "x", "42P01").schema_missing());
  EXPECT_TRUE(StoreError(StoreError::Kind::kOther, "x", "3F000").schema_missing());
  EXPECT_FALSE(StoreError(StoreError::Kind::kOther, "x", "42704").schema_missing());
  EXPECT_FALSE(StoreError(StoreError::Kind::kConnection, "x").schema_missing());
}

TEST(Sqlstate, AMalformedCodeIsNeverAClassMatch) {
  EXPECT_EQ(condition_of("22"), Condition::kOther);
  EXPECT_EQ(condition_of("2300"), Condition::kOther);
  EXPECT_FALSE(StoreError(StoreError::Kind::kOther, "x", "22").deterministic());
}

}  // namespace
}  // namespace sqlstreams::store
