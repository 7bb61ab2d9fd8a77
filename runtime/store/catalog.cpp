#include "store/catalog.hpp"

#include <fmt/format.h>

#include "store/maintenance_pq.hpp"
#include "store/pq.hpp"

namespace sqlstreams::store {
namespace {

std::optional<std::string> interval_of(const std::optional<Millis>& d) {
  if (!d) return std::nullopt;
  return fmt::format("{} milliseconds", d->count());
}

StreamRef stream_from_row(const pqxx::row& row) {
  StreamRef s;
  s.id = row["id"].as<int64_t>();
  s.name = row["name"].as<std::string>();
  s.partition_size = row["partition_size"].as<int64_t>();
  s.max_payload_bytes = row["max_payload_bytes"].as<int32_t>();
  s.notify = row["notify"].as<bool>();
  return s;
}

constexpr const char* kStreamColumns = "id, name, partition_size, max_payload_bytes, notify";

}  // namespace

DeclaredStream declare_stream(Session& session, const StreamSpec& spec) {
  DeclaredStream declared = guarded(session, "declare stream", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    auto inserted = tx.exec_params(
        fmt::format("INSERT INTO {}.streams (name, partition_size, retention, "
                    "allow_drop_past_committed, max_payload_bytes, notify) VALUES ($1, $2, "
                    "$3::interval, $4, $5, $6) ON CONFLICT (name) DO NOTHING RETURNING {}",
                    s, kStreamColumns),
        spec.name, spec.partition_size, nullable(interval_of(spec.retention)),
        spec.allow_drop_past_committed, spec.max_payload_bytes, spec.notify);
    DeclaredStream out;
    if (!inserted.empty()) {
      out.stream = stream_from_row(inserted[0]);
      out.created = true;
      tx.exec_params(fmt::format("SELECT {}.create_stream_family($1)", s), out.stream.id);
      // The first partitions (ids 1 .. size × kDeclarePartitionsAhead) with the family.
      tx.exec_params(fmt::format("SELECT {}.ensure_partitions($1, $2)", s), out.stream.id,
                     spec.partition_size * kDeclarePartitionsAhead);
    } else {
      auto row = tx.exec_params1(
          fmt::format("SELECT {} FROM {}.streams WHERE name = $1 FOR UPDATE", kStreamColumns, s),
          spec.name);
      out.stream = stream_from_row(row);
      if (out.stream.partition_size != spec.partition_size) {
        throw StoreError(
            StoreError::Kind::kRejected,
            fmt::format("stream '{}' exists with partition_size {}, the config says {}; "
                        "partition_size cannot change after creation: restore {} in the config "
                        "(or create a new stream)",
                        spec.name, out.stream.partition_size, spec.partition_size,
                        out.stream.partition_size));
      }
      tx.exec_params(
          fmt::format("UPDATE {}.streams SET retention = $2::interval, allow_drop_past_committed "
                      "= $3, max_payload_bytes = $4, notify = $5, updated_at = now() WHERE id = "
                      "$1 AND (retention IS DISTINCT FROM $2::interval OR "
                      "allow_drop_past_committed <> $3 OR max_payload_bytes <> $4 OR notify <> $5)",
                      s),
          out.stream.id, nullable(interval_of(spec.retention)), spec.allow_drop_past_committed,
          spec.max_payload_bytes, spec.notify);
      out.stream.max_payload_bytes = spec.max_payload_bytes;
      out.stream.notify = spec.notify;
    }
    tx.commit();
    return out;
  });
  // An existing stream whose hosts were all down: partitions ahead of its head again, in a
  // transaction of its own (DDL waits for the stream's open transactions).
  if (!declared.created) create_ahead_of_head(session, declared.stream.id, kDeclarePartitionsAhead);
  return declared;
}

DeclaredGroup declare_group(Session& session, const StreamRef& stream, const std::string& name,
                            StartAt start) {
  return guarded(session, "declare group", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    auto inserted = tx.exec_params(
        fmt::format("INSERT INTO {}.groups (stream_id, name) VALUES ($1, $2) ON CONFLICT "
                    "(stream_id, name) DO NOTHING RETURNING id",
                    s),
        stream.id, name);
    DeclaredGroup out;
    out.group.stream_id = stream.id;
    out.group.stream = stream.name;
    out.group.name = name;
    if (!inserted.empty()) {
      out.group.id = inserted[0][0].as<int64_t>();
      out.created = true;
      if (start == StartAt::kHead) {
        out.start_position =
            tx.exec(fmt::format("SELECT coalesce(max(id), 0) FROM {}.messages_{}", s, stream.id))[0][0]
                .as<int64_t>();
      }
      tx.exec_params(fmt::format("INSERT INTO {}.cursors_{} (group_id, claimed, committed, "
                                 "settled_head) VALUES ($1, $2, $2, $2)",
                                 s, stream.id),
                     out.group.id, out.start_position);
    } else {
      out.group.id = tx.exec_params1(fmt::format("SELECT id FROM {}.groups WHERE stream_id = $1 "
                                                 "AND name = $2",
                                                 s),
                                     stream.id, name)[0]
                         .as<int64_t>();
    }
    tx.commit();
    return out;
  });
}

std::optional<StreamRef> find_stream(Session& session, const std::string& name) {
  return guarded(session, "find stream", [&]() -> std::optional<StreamRef> {
    pqxx::nontransaction tx(connection_of(session));
    auto r = tx.exec_params(fmt::format("SELECT {} FROM {}.streams WHERE name = $1",
                                        kStreamColumns, session.schema_sql()),
                            name);
    if (r.empty()) return std::nullopt;
    return stream_from_row(r[0]);
  });
}

std::optional<GroupRef> find_group(Session& session, const std::string& stream,
                                   const std::string& group) {
  return guarded(session, "find group", [&]() -> std::optional<GroupRef> {
    pqxx::nontransaction tx(connection_of(session));
    auto r = tx.exec_params(
        fmt::format("SELECT g.id, g.stream_id FROM {0}.groups g JOIN {0}.streams s ON s.id = "
                    "g.stream_id WHERE s.name = $1 AND g.name = $2",
                    session.schema_sql()),
        stream, group);
    if (r.empty()) return std::nullopt;
    return GroupRef{r[0][0].as<int64_t>(), r[0][1].as<int64_t>(), stream, group};
  });
}

std::vector<StreamRef> list_streams(Session& session) {
  return guarded(session, "list streams", [&] {
    pqxx::nontransaction tx(connection_of(session));
    std::vector<StreamRef> out;
    for (const auto& row : tx.exec(fmt::format("SELECT {} FROM {}.streams ORDER BY id",
                                               kStreamColumns, session.schema_sql()))) {
      out.push_back(stream_from_row(row));
    }
    return out;
  });
}

std::vector<std::string> streams_violating_cache_rule(Session& session) {
  return guarded(session, "check sequence caches", [&] {
    pqxx::nontransaction tx(connection_of(session));
    std::vector<std::string> bad;
    auto rows = tx.exec_params(
        fmt::format("SELECT s.name, coalesce(q.cache_size, 0) FROM {}.streams s LEFT JOIN "
                    "pg_sequences q ON q.schemaname = $1 AND q.sequencename = 'messages_' || "
                    "s.id || '_id_seq' WHERE q.cache_size IS DISTINCT FROM 1 ORDER BY s.name",
                    session.schema_sql()),
        session.options().schema);
    for (const auto& row : rows) {
      bad.push_back(fmt::format("{} (cache_size {})", row[0].as<std::string>(),
                                row[1].as<int64_t>()));
    }
    return bad;
  });
}

int64_t ensure_partitions(Session& session, int64_t stream_id, int64_t upto_id) {
  return guarded(session, "ensure partitions", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    tx.exec(fmt::format("SET LOCAL lock_timeout = {}", kPartitionLockTimeout.count()));
    // The janitor's order: the stream's advisory lock, then the parent. Unlike the janitor
    // (which never queues, store/maintenance_pq.hpp retry_busy_lock) a heal queues for the
    // parent: the producer needs the partition now. It is rare (the janitor keeps ahead).
    tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('sqlstreams.partitions'), $1::integer)",
                   stream_id);
    auto r = tx.exec_params(fmt::format("SELECT partitions_upto FROM {}.streams WHERE id = $1", s),
                            stream_id);
    if (r.empty()) {
      throw StoreError(StoreError::Kind::kRejected, fmt::format("no stream with id {}", stream_id));
    }
    if (upto_id < r[0][0].as<int64_t>()) return r[0][0].as<int64_t>();
    tx.exec(fmt::format("LOCK TABLE ONLY {}.messages_{} IN ACCESS EXCLUSIVE MODE", s, stream_id));
    const int64_t upto = tx.exec_params1(fmt::format("SELECT {}.ensure_partitions($1, $2)", s),
                                         stream_id, upto_id)[0]
                             .as<int64_t>();
    tx.commit();
    return upto;
  });
}

int64_t create_ahead_of_head(Session& session, int64_t stream_id, int32_t partitions_ahead) {
  const auto [size, drawn] = guarded(session, "ensure partitions", [&] {
    pqxx::read_transaction tx(connection_of(session));
    auto r = tx.exec_params(
        fmt::format("SELECT partition_size FROM {}.streams WHERE id = $1", session.schema_sql()),
        stream_id);
    if (r.empty()) {
      throw StoreError(StoreError::Kind::kRejected, fmt::format("no stream with id {}", stream_id));
    }
    return std::make_pair(r[0][0].as<int64_t>(), last_drawn_id(tx, session, stream_id));
  });
  return ensure_partitions(session, stream_id,
                           drawn + std::max<int64_t>(1, partitions_ahead) * size);
}

}  // namespace sqlstreams::store
