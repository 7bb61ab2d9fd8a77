#include "store/schema/catalog.hpp"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"
#include "store/fleet/maintenance_pq.hpp"
#include "store/group/fence_holders_tx.hpp"
#include "store/group/fence_sql.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kObserveHead{"declare_observe_head"};
constexpr StatementName kProveHead{"declare_prove_head"};
constexpr StatementName kInsertStream{"insert_stream"};
constexpr StatementName kCreateFamily{"create_stream_family"};
constexpr StatementName kFirstPartitions{"first_partitions"};
constexpr StatementName kLockStream{"lock_stream_row"};
constexpr StatementName kStreamSettings{"stream_settings"};
constexpr StatementName kFindGroupId{"find_group_id"};
constexpr StatementName kInsertGroup{"insert_group"};
constexpr StatementName kInsertCursor{"insert_cursor"};
constexpr StatementName kFindStream{"find_stream"};
constexpr StatementName kFindGroup{"find_group"};
constexpr StatementName kListStreams{"list_streams"};
constexpr StatementName kCacheRule{"sequence_cache_rule"};
constexpr StatementName kSetPartitionLockTimeout{"partition_lock_timeout"};
constexpr StatementName kPartitionsLock{"partitions_advisory_lock"};
constexpr StatementName kPartitionsUpto{"partitions_upto"};
constexpr StatementName kLockLog{"lock_log"};
constexpr StatementName kEnsurePartitions{"ensure_partitions"};
constexpr StatementName kPartitionSize{"partition_size"};

constexpr Millis kProofPollInterval{5};

// A group's ordering is fixed when it is created (V009): a config that differs is refused, not
// followed, and the group never runs under settings the fleet did not create it with.
void check_ordering(const std::string& stream, const std::string& group, const pqxx::row& row,
                    OrderingMode wanted) {
  const std::string ordering = row[1].as<std::string>();
  const std::string dead = row[2].as<std::string>();
  if (ordering == ordering_text(wanted) &&
      (ordering == "none" || dead == ordering_dead_text(wanted))) {
    return;
  }
  auto spell = [](std::string_view o, std::string_view d) {
    return o == "none" ? fmt::format("ordering = \"{}\"", o)
                       : fmt::format("ordering = \"{}\", ordering_dead = \"{}\"", o, d);
  };
  throw StoreError(
      StoreError::Kind::kRejected,
      fmt::format("group '{}' of stream '{}' was created with {}, the config says {}; a group's "
                  "ordering is fixed when it is created (this version cannot change it): restore "
                  "{} in the config, or drop the group (sqlstreams group drop) and let the host "
                  "create it again, which starts its cursor afresh",
                  group, stream, spell(ordering, dead),
                  spell(ordering_text(wanted), ordering_dead_text(wanted)), spell(ordering, dead)));
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

// The transactions that hold back the declaration's proof, for the timeout message.
std::string fence_holder(pqxx::transaction_base& tx, const std::string& schema_sql,
                         const std::string& id_seq, const std::string& xid) {
  auto holders = fence_holders(tx, schema_sql, id_seq, xid);
  if (holders.empty()) return "none is visible any more (it has just ended)";
  std::string out = describe(holders.front());
  if (holders.size() > 1) out += fmt::format(" and {} more", holders.size() - 1);
  return out;
}

// docs/design.md#declaring-a-group-at-the-head: observe (head, xid) alone, then wait until the pair
// is proven, i.e. every transaction that could own an id <= head (Rules 1 and 2) has committed or
// aborted. Every id drawn afterwards is > head, so a group starting at head misses nothing that
// becomes visible after the declaration returns. Runs with no transaction open (takes no lasting
// xid).
int64_t proven_head(Session& session, const StreamRef& stream, const std::string& group,
                    Millis timeout) {
  pqxx::nontransaction tx(connection_of(session));
  const StreamTables tables(session.schema_sql(), stream.id);
  // One statement: head is read first, the xid taken after it (as GroupStore::observe does).
  auto obs = exec1(tx, kObserveHead,
                   fmt::format("SELECT h.head, CASE WHEN h.head > 0 THEN "
                               "pg_current_xact_id()::text END FROM (SELECT coalesce(max(id), "
                               "0) AS head FROM {}) h",
                               tables.messages));
  const int64_t head = obs[0].as<int64_t>();
  if (head == 0) return 0;  // nothing at or below 0 can be skipped
  const std::string xid = obs[1].as<std::string>();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (exec1(tx, kProveHead,
              "SELECT /* sqlstreams: declare-group proof */ " +
                  fence_proven_sql(session.schema_sql(), "$1::xid8", tables.id_seq),
              xid)[0]
            .as<bool>()) {
      return head;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw StoreError(
          StoreError::Kind::kTransient,
          fmt::format("declaring group '{}' of stream '{}' at the head: waited {} for the "
                      "producers of the stream that were running at the head observation "
                      "(head {}, xid {}) to end, and one is still open: {}. The group was not "
                      "created. End that transaction (or roll back the prepared one) and "
                      "declare again; set idle_in_transaction_session_timeout so an abandoned "
                      "producer cannot stall declarations and claims",
                      group, stream.name, format_duration(timeout), head, xid,
                      fence_holder(tx, session.schema_sql(), tables.id_seq, xid)));
    }
    std::this_thread::sleep_for(kProofPollInterval);
  }
}

}  // namespace

DeclaredStream declare_stream(Session& session, const StreamSpec& spec) {
  DeclaredStream declared = guarded(session, "declare stream", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    auto inserted =
        exec(tx, kInsertStream,
             fmt::format("INSERT INTO {}.streams (name, partition_size, retention, "
                         "allow_drop_past_committed, max_payload_bytes, notify, "
                         "idempotency_window) VALUES ($1, $2, {}, $4, $5, $6, {}) ON CONFLICT "
                         "(name) DO NOTHING RETURNING {}",
                         s, ms_interval("$3"), ms_interval("$7"), kStreamColumns),
             spec.name, spec.partition_size, nullable(ms_param(spec.retention)),
             spec.allow_drop_past_committed, spec.max_payload_bytes, spec.notify,
             ms_param(spec.idempotency_window));
    DeclaredStream out;
    if (!inserted.empty()) {
      out.stream = stream_from_row(inserted[0]);
      out.created = true;
      exec(tx, kCreateFamily, fmt::format("SELECT {}.create_stream_family($1)", s), out.stream.id);
      // The first partitions (ids 1 .. size × kDeclarePartitionsAhead) with the family.
      exec(tx, kFirstPartitions, fmt::format("SELECT {}.ensure_partitions($1, $2)", s),
           out.stream.id, spec.partition_size * kDeclarePartitionsAhead);
    } else {
      auto row = exec1(
          tx, kLockStream,
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
      // The fleet-wide settings stay as the database has them (V008); the caller logs what
      // differs.
      auto settings = exec1(
          tx, kStreamSettings,
          fmt::format("SELECT {}, allow_drop_past_committed, {} FROM {}.streams WHERE id = $1",
                      to_epoch_ms("retention"), to_epoch_ms("idempotency_window"), s),
          out.stream.id);
      const std::optional<Millis> retention =
          settings[0].is_null() ? std::nullopt
                                : std::optional<Millis>(Millis(settings[0].as<int64_t>()));
      const bool allow_drop = settings[1].as<bool>();
      auto differ = [&](const char* setting, std::string database, std::string config) {
        if (database != config) out.differences.push_back({setting, database, config});
      };
      auto retention_text = [](const std::optional<Millis>& r) {
        return r ? format_duration(*r) : std::string("forever");
      };
      auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
      differ("retention", retention_text(retention), retention_text(spec.retention));
      differ("allow_drop_past_committed", flag(allow_drop), flag(spec.allow_drop_past_committed));
      differ("max_payload_bytes", std::to_string(out.stream.max_payload_bytes),
             std::to_string(spec.max_payload_bytes));
      differ("notify", flag(out.stream.notify), flag(spec.notify));
      differ("idempotency_window", format_duration(Millis(settings[2].as<int64_t>())),
             format_duration(spec.idempotency_window));
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
                            StartAt start, Millis proof_timeout, OrderingMode ordering) {
  return guarded(session, "declare group", [&] {
    const std::string& s = session.schema_sql();
    DeclaredGroup out;
    out.group.stream_id = stream.id;
    out.group.stream = stream.name;
    out.group.name = name;
    const std::string find_sql = fmt::format(
        "SELECT id, ordering, ordering_dead FROM {}.groups WHERE stream_id = $1 AND "
        "name = $2",
        s);
    {
      // An existing group is left exactly as it is, and never waits for the fence.
      pqxx::nontransaction look(connection_of(session));
      auto found = exec(look, kFindGroupId, find_sql, stream.id, name);
      if (!found.empty()) {
        out.group.id = found[0][0].as<int64_t>();
        check_ordering(stream.name, name, found[0], ordering);
        return out;
      }
    }
    if (start == StartAt::kHead) {
      // The fence (docs/design.md#declaring-a-group-at-the-head), BEFORE the declaration
      // transaction opens: an open xid-owning transaction here would hold back every claimer's
      // proof while we wait.
      out.start_position = proven_head(session, stream, name, proof_timeout);
    }
    pqxx::work tx(connection_of(session));
    auto inserted =
        exec(tx, kInsertGroup,
             fmt::format("INSERT INTO {}.groups (stream_id, name, ordering, ordering_dead) VALUES "
                         "($1, $2, $3, $4) ON CONFLICT (stream_id, name) DO NOTHING RETURNING id",
                         s),
             stream.id, name, std::string(ordering_text(ordering)),
             std::string(ordering_dead_text(ordering)));
    if (!inserted.empty()) {
      out.group.id = inserted[0][0].as<int64_t>();
      out.created = true;
      exec(tx, kInsertCursor,
           fmt::format("INSERT INTO {} (group_id, claimed, committed, "
                       "settled_head) VALUES ($1, $2, $2, $2)",
                       StreamTables(s, stream.id).cursors),
           out.group.id, out.start_position);
    } else {
      // Another declarer created it meanwhile: theirs stands.
      const auto row = exec1(tx, kFindGroupId, find_sql, stream.id, name);
      out.group.id = row[0].as<int64_t>();
      out.start_position = 0;
      check_ordering(stream.name, name, row, ordering);
    }
    tx.commit();
    return out;
  });
}

std::optional<StreamRef> find_stream(Session& session, const std::string& name) {
  return guarded(session, "find stream", [&]() -> std::optional<StreamRef> {
    pqxx::nontransaction tx(connection_of(session));
    auto r = exec(tx, kFindStream,
                  fmt::format("SELECT {} FROM {}.streams WHERE name = $1", kStreamColumns,
                              session.schema_sql()),
                  name);
    if (r.empty()) return std::nullopt;
    return stream_from_row(r[0]);
  });
}

std::optional<GroupRef> find_group(Session& session, const std::string& stream,
                                   const std::string& group) {
  return guarded(session, "find group", [&]() -> std::optional<GroupRef> {
    pqxx::nontransaction tx(connection_of(session));
    auto r =
        exec(tx, kFindGroup,
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
    for (const auto& row : exec(tx, kListStreams,
                                fmt::format("SELECT {} FROM {}.streams ORDER BY id", kStreamColumns,
                                            session.schema_sql()))) {
      out.push_back(stream_from_row(row));
    }
    return out;
  });
}

std::vector<std::string> streams_violating_cache_rule(Session& session) {
  return guarded(session, "check sequence caches", [&] {
    pqxx::nontransaction tx(connection_of(session));
    std::vector<std::string> bad;
    auto rows =
        exec(tx, kCacheRule,
             fmt::format("SELECT s.name, coalesce(q.cache_size, 0) FROM {}.streams s LEFT JOIN "
                         "pg_sequences q ON q.schemaname = $1 AND q.sequencename = 'messages_' || "
                         "s.id || '_id_seq' WHERE q.cache_size IS DISTINCT FROM 1 ORDER BY s.name",
                         session.schema_sql()),
             session.options().schema);
    for (const auto& row : rows) {
      bad.push_back(
          fmt::format("{} (cache_size {})", row[0].as<std::string>(), row[1].as<int64_t>()));
    }
    return bad;
  });
}

int64_t ensure_partitions(Session& session, int64_t stream_id, int64_t upto_id) {
  return guarded(session, "ensure partitions", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    exec(tx, kSetPartitionLockTimeout,
         fmt::format("SET LOCAL lock_timeout = {}", kPartitionLockTimeout.count()));
    // The janitor's order: the stream's advisory lock, then the parent. Unlike the janitor
    // (which never queues, store/fleet/maintenance_pq.hpp retry_busy_lock) a heal queues for the
    // parent: the producer needs the partition now. It is rare (the janitor keeps ahead).
    exec(tx, kPartitionsLock,
         "SELECT pg_advisory_xact_lock(hashtext('sqlstreams.partitions'), $1::integer)", stream_id);
    auto r =
        exec(tx, kPartitionsUpto,
             fmt::format("SELECT partitions_upto FROM {}.streams WHERE id = $1", s), stream_id);
    if (r.empty()) {
      throw StoreError(StoreError::Kind::kRejected, fmt::format("no stream with id {}", stream_id));
    }
    if (upto_id < r[0][0].as<int64_t>()) return r[0][0].as<int64_t>();
    exec(tx, kLockLog,
         fmt::format("LOCK TABLE ONLY {} IN ACCESS EXCLUSIVE MODE",
                     StreamTables(s, stream_id).messages));
    const int64_t upto =
        exec1(tx, kEnsurePartitions, fmt::format("SELECT {}.ensure_partitions($1, $2)", s),
              stream_id, upto_id)[0]
            .as<int64_t>();
    tx.commit();
    return upto;
  });
}

int64_t create_ahead_of_head(Session& session, int64_t stream_id, int32_t partitions_ahead) {
  const auto [size, drawn] = guarded(session, "ensure partitions", [&] {
    pqxx::read_transaction tx(connection_of(session));
    auto r = exec(
        tx, kPartitionSize,
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
