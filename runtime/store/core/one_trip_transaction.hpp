// store/core/one_trip_transaction — INTERNAL to store/: a transaction block whose BEGIN travels
// with its first statement. libpqxx 6.4's pqxx::work sends BEGIN alone when it is constructed:
// one round trip of the claim's six (runtime/store/group/README.md#the-claim-in-round-trips).
// Here the first statement is a prepared one run as `BEGIN; EXECUTE name(literals)` in one
// simple-protocol message (the prepared plan is kept: EXECUTE runs the statement the connection
// prepared); the next ones run through tx() — a pqxx::nontransaction, inside the block libpqxx
// does not know of — and commit() sends COMMIT. A block that is not
// committed (a statement failed, an exception went through) is rolled back when the object goes,
// so the connection never stays in an aborted transaction. While the block is open libpqxx may
// not reconnect by itself (its reactivation is inhibited): a later statement of the block can
// never run on a fresh connection outside it, without the first statement's lock.
// Threading: one per connection, on the thread that owns the connection.
#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "store/core/pq.hpp"
#include "store/core/statement.hpp"

namespace sqlstreams::store {

class OneTripTransaction {
 public:
  explicit OneTripTransaction(pqxx::connection_base& conn) : conn_(conn), tx_(conn) {
    inhibit_reactivation(true);
  }
  ~OneTripTransaction() {
    if (begun_ && !done_) {
      try {
        if (conn_.is_open()) tx_.exec("ROLLBACK");
      } catch (...) {
        // The connection broke meanwhile: the server ended the block with it.
      }
    }
    inhibit_reactivation(false);
  }
  OneTripTransaction(const OneTripTransaction&) = delete;
  OneTripTransaction& operator=(const OneTripTransaction&) = delete;

  pqxx::transaction_base& tx() { return tx_; }

  // BEGIN and the prepared statement `st` with `params` (SQL literals after quoting; nullopt is
  // NULL; each is typed by the statement's own casts, as a bound parameter is) in one round trip.
  pqxx::result begin_with(const Statement& st,
                          const std::vector<std::optional<std::string>>& params) {
    return named(st.name, [&] {
      conn_.prepare(st.name, st.sql);
      conn_.prepare_now(st.name);
      std::string text = "BEGIN; EXECUTE " + conn_.quote_name(st.name);
      for (size_t i = 0; i < params.size(); ++i) {
        text += i == 0 ? "(" : ", ";
        text += params[i] ? tx_.quote(*params[i]) : std::string("NULL");
      }
      if (!params.empty()) text += ")";
      begun_ = true;
      return tx_.exec(text);
    });
  }

  // COMMIT. Every statement of the block that failed threw (libpqxx raises each error result),
  // so a block that reaches here is not aborted: its COMMIT commits. (A COMMIT of an aborted
  // block answers ROLLBACK without an error; libpqxx 6.4 keeps the answer's tag private.)
  // A connection lost during the COMMIT leaves its outcome unknown: pqxx::in_doubt_error, as
  // pqxx::work's commit() says it (StoreError kInDoubt), never "not done".
  void commit() {
    try {
      named("COMMIT", [&] { return tx_.exec("COMMIT"); });
    } catch (const pqxx::broken_connection& e) {
      throw pqxx::in_doubt_error(std::string("COMMIT: connection lost, outcome unknown: ") +
                                 e.what());
    }
    done_ = true;
  }

 private:
  void inhibit_reactivation(bool inhibit) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    conn_.inhibit_reactivation(inhibit);  // deprecated in 6.4, and the only way to say it
#pragma GCC diagnostic pop
  }

  pqxx::connection_base& conn_;
  pqxx::nontransaction tx_;
  bool begun_ = false;
  bool done_ = false;
};

}  // namespace sqlstreams::store
