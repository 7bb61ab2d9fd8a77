#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/group/fence_holders_tx.hpp"

namespace sqlstreams::store {
namespace {

constexpr StatementName kFenceHolders{"fence_holders"};

std::string text(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }

}  // namespace

std::string describe(const FenceHolder& h) {
  std::string out = h.pid ? fmt::format("backend pid {}", *h.pid)
                          : fmt::format("prepared transaction '{}'", h.prepared_gid);
  std::vector<std::string> parts;
  if (!h.role.empty()) parts.push_back("role " + h.role);
  if (!h.application_name.empty()) parts.push_back("application '" + h.application_name + "'");
  if (!h.client_addr.empty()) parts.push_back("client " + h.client_addr);
  if (!h.xact_start.empty()) {
    parts.push_back((h.pid ? "transaction started " : "prepared ") + h.xact_start);
  }
  if (h.pid) parts.push_back(h.state.empty() ? "state not visible to this role" : h.state);
  if (!parts.empty()) out += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
  return out;
}

std::vector<FenceHolder> fence_holders(pqxx::transaction_base& tx, const std::string& schema_sql,
                                       const std::string& id_seq, const std::string& xid) {
  auto rows = exec(tx, kFenceHolders,
                   fmt::format("SELECT pid, role, application_name, client_addr, "
                               "to_char(xact_start AT TIME ZONE 'UTC', "
                               "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), state, prepared_gid FROM "
                               "{}.fence_holders($1::xid8, '{}'::regclass)",
                               schema_sql, id_seq),
                   xid);
  std::vector<FenceHolder> out;
  for (const auto& r : rows) {
    FenceHolder h;
    if (!r[0].is_null()) h.pid = r[0].as<int>();
    h.role = text(r[1]);
    h.application_name = text(r[2]);
    h.client_addr = text(r[3]);
    h.xact_start = text(r[4]);
    h.state = text(r[5]);
    h.prepared_gid = text(r[6]);
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<FenceHolder> fence_holders(Session& session, const std::string& id_seq,
                                       const std::string& xid) {
  return guarded(session, "fence holders", [&] {
    pqxx::nontransaction tx(connection_of(session));
    return fence_holders(tx, session.schema_sql(), id_seq, xid);
  });
}

}  // namespace sqlstreams::store
