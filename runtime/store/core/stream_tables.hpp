// store/core/stream_tables — INTERNAL to store/: the qualified names of one stream's table
// family (docs/design.md#the-log-and-its-id-sequence: messages_N and its partitions, its id
// sequence, cursors_N, leases_N, exceptions_N, deliveries_N) and its NOTIFY channel, built in this
// one place from the quoted schema and the stream id. Names are never spliced from data: only the
// numeric id.
// Threading: a value.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace sqlstreams::store {

struct StreamTables {
  StreamTables(const std::string& schema_sql, int64_t id)
      : stream_id(id),
        schema(schema_sql),
        messages(fmt::format("{}.messages_{}", schema_sql, id)),
        cursors(fmt::format("{}.cursors_{}", schema_sql, id)),
        leases(fmt::format("{}.leases_{}", schema_sql, id)),
        exceptions(fmt::format("{}.exceptions_{}", schema_sql, id)),
        deliveries(fmt::format("{}.deliveries_{}", schema_sql, id)),
        id_seq(fmt::format("{}.messages_{}_id_seq", schema_sql, id)) {}

  // messages_N_p<k> (unqualified, as pg_class names it): ids [k*size+1, (k+1)*size].
  std::string partition_name(int64_t k) const { return fmt::format("{}{}", partition_prefix(), k); }
  std::string partition_prefix() const { return fmt::format("messages_{}_p", stream_id); }
  std::string partition(int64_t k) const { return fmt::format("{}.{}", schema, partition_name(k)); }
  // messages_N_default: ids past the partitions made ahead (V007), until the janitor re-homes
  // them. Not a messages_N_p name: partition_indexes() never lists it.
  std::string partition_default_name() const {
    return fmt::format("messages_{}_default", stream_id);
  }
  std::string partition_default() const {
    return fmt::format("{}.{}", schema, partition_default_name());
  }
  // The channel producers NOTIFY and claimers LISTEN on.
  std::string channel() const { return fmt::format("sqlstreams_{}", stream_id); }

  int64_t stream_id;
  std::string schema;  // quoted
  std::string messages, cursors, leases, exceptions, deliveries, id_seq;
};

}  // namespace sqlstreams::store
