// store/core/pqxx_sqlstate — INTERNAL to store/: the SQLSTATE of a libpqxx exception. libpqxx 6.4
// throws several of its typed errors without the server's code: `transaction_rollback` and its
// subclasses (serialization_failure 40001, deadlock_detected 40P01, statement_completion_unknown
// 40003) are not even `sql_error`s and carry no code, and others (insufficient_privilege...) are
// thrown with an empty one. So a deadlock or a serialization failure would reach callers as
// StoreError::Kind::kOther instead of kTransient. The code is recovered from the type where the
// library dropped it; a code the library kept always wins.
// Threading: pure functions.
#pragma once

#include <exception>
#include <pqxx/pqxx>
#include <string>

namespace sqlstreams::store {

inline std::string sqlstate_of(const std::exception& e) {
  if (const auto* s = dynamic_cast<const pqxx::sql_error*>(&e); s && !s->sqlstate().empty()) {
    return s->sqlstate();
  }
  // Most derived first: each row's type is tested before its bases.
  if (dynamic_cast<const pqxx::serialization_failure*>(&e)) return "40001";
  if (dynamic_cast<const pqxx::deadlock_detected*>(&e)) return "40P01";
  if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e)) return "40003";
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e)) return "40000";
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e)) return "42501";
  if (dynamic_cast<const pqxx::undefined_table*>(&e)) return "42P01";
  if (dynamic_cast<const pqxx::undefined_column*>(&e)) return "42703";
  if (dynamic_cast<const pqxx::undefined_function*>(&e)) return "42883";
  if (dynamic_cast<const pqxx::syntax_error*>(&e)) return "42601";
  if (dynamic_cast<const pqxx::unique_violation*>(&e)) return "23505";
  if (dynamic_cast<const pqxx::check_violation*>(&e)) return "23514";
  if (dynamic_cast<const pqxx::not_null_violation*>(&e)) return "23502";
  if (dynamic_cast<const pqxx::foreign_key_violation*>(&e)) return "23503";
  if (dynamic_cast<const pqxx::restrict_violation*>(&e)) return "23001";
  if (dynamic_cast<const pqxx::integrity_constraint_violation*>(&e)) return "23000";
  if (dynamic_cast<const pqxx::data_exception*>(&e)) return "22000";
  if (dynamic_cast<const pqxx::disk_full*>(&e)) return "53100";
  if (dynamic_cast<const pqxx::out_of_memory*>(&e)) return "53200";
  if (dynamic_cast<const pqxx::insufficient_resources*>(&e)) return "53000";
  if (dynamic_cast<const pqxx::feature_not_supported*>(&e)) return "0A000";
  return "";
}

}  // namespace sqlstreams::store
