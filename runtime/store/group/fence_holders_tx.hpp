// store/group/fence_holders_tx — INTERNAL to store/: fence_holders() inside a transaction the
// caller has open (the declaration's proof loop, GroupStore::fence_holders).
#pragma once

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "store/group/fence_holders.hpp"

namespace sqlstreams::store {

std::vector<FenceHolder> fence_holders(pqxx::transaction_base& tx, const std::string& schema_sql,
                                       const std::string& id_seq, const std::string& xid);

}  // namespace sqlstreams::store
