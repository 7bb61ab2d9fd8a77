// The roles V004 ships (docs/operating/security.md#producers-and-roles), each used through a LOGIN
// role granted it, as a deployment would: sqlstreams_producer produces and can read or change
// nothing else; sqlstreams_operator runs what status/dead/group need; sqlstreams_host's janitor
// creates partitions that belong to sqlstreams_host (so any host can drop them) and that the
// producer role can produce into.
#include <unistd.h>

#include "store/fleet/janitor.hpp"
#include "store/fleet/worker_leases.hpp"
#include "store/reporting/group_lifecycle.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store/reporting/status.hpp"
#include "store/reporting/stream_settings.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class RolesTest : public StoreTest {
 protected:
  std::string login_as(const std::string& granted) { return logins_.login_as(granted); }
  store::SessionOptions options_as(const std::string& url) const {
    store::SessionOptions o = options();
    o.url = url;
    return o;
  }
  // The SQLSTATE `sql` fails with as `url` ("" when it succeeds).
  static std::string sqlstate_of(const std::string& url, const std::string& sql) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    try {
      tx.exec(sql);
      return "";
    } catch (const pqxx::insufficient_privilege&) {
      return "42501";  // libpqxx 6.4 leaves sqlstate() empty for this class
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate().empty() ? std::string("other: ") + e.what() : e.sqlstate();
    }
  }
  TestLogins logins_{db_};
};

TEST_F(RolesTest, TheProducerRoleProducesAndCanReadOrChangeNothingElse) {
  const std::string url = login_as("sqlstreams_producer");
  {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"order_id\":\"order-1\"}')");
    tx.exec(
        "SELECT sqlstreams.produce_batch('payments.requested', "
        "ARRAY['{\"a\":1}', '{\"a\":2}']::jsonb[], ARRAY[1, 2], ARRAY['k1', NULL])");
    // Idempotency keys (V011): the functions write the key rows with the host's rights.
    tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"b\":1}', 1, NULL, 'idem-1')");
    tx.exec(
        "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"b\":2}', "
        "'{\"b\":3}']::jsonb[], NULL, NULL, ARRAY['idem-1', 'idem-2'])");
    tx.commit();
  }
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages), 5);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.idempotency_keys"), 2);
  for (const std::string& sql : std::vector<std::string>{
           "SELECT * FROM " + family_.cursors,
           "SELECT * FROM " + family_.leases,
           "SELECT * FROM " + family_.exceptions,
           "SELECT * FROM " + family_.deliveries,
           "SELECT * FROM " + family_.messages,
           "SELECT * FROM " + family_.partition(0),
           "SELECT * FROM sqlstreams.streams",
           "SELECT * FROM sqlstreams.groups",
           "SELECT * FROM sqlstreams.workers",
           "UPDATE " + family_.cursors + " SET claimed = 0",
           "DELETE FROM " + family_.leases,
           "UPDATE " + family_.exceptions + " SET status = 'ready'",
           "INSERT INTO " + family_.messages + " (payload) VALUES ('{}')",
           "UPDATE sqlstreams.streams SET max_payload_bytes = 100000000",
           "SELECT nextval('" + family_.id_seq + "')",
           "SELECT " + family_.next_id + "()",
           "SELECT sqlstreams.ensure_partitions(1, 100000)",
           "SELECT sqlstreams.create_stream_family(99)",
           "SELECT sqlstreams.give_to_host(1)",
           "SELECT sqlstreams.check_partition(s, 5000) FROM sqlstreams.streams s",
           "CREATE TABLE sqlstreams.mine (x int)",
           "SELECT * FROM sqlstreams.idempotency_keys",
           "DELETE FROM sqlstreams.idempotency_keys",
           "INSERT INTO sqlstreams.idempotency_keys (stream_id, key, message_id) VALUES (1, 'x', "
           "1)",
           "SELECT sqlstreams.idempotency_race(1)",
           "SELECT sqlstreams.produce_idempotent(s, ARRAY['{}']::jsonb[], NULL, NULL, "
           "ARRAY['k'], NULL) FROM sqlstreams.streams s",
       }) {
    EXPECT_EQ(sqlstate_of(url, sql), "42501") << sql;
  }
}

TEST_F(RolesTest, TheOperatorRoleRunsStatusDeadLettersAndRewind) {
  store::Producer(*session_).produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})"}});
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after, last_error) VALUES (" +
          std::to_string(charge_.id) + ", 1, 'dead', 4, now(), 'provider unreachable'), (" +
          std::to_string(charge_.id) + ", 2, 'dead', 1, now(), 'cancelled')");
  const std::string url = login_as("sqlstreams_operator");
  store::Session op(options_as(url));
  auto fleet = store::read_status(op, now_);
  ASSERT_EQ(fleet.streams.size(), 1u);
  EXPECT_EQ(fleet.streams[0].groups.size(), 2u);
  auto group = store::find_group(op, "payments.requested", "charge-cards");
  ASSERT_TRUE(group);
  EXPECT_EQ(store::list_dead(op, *group, {}).size(), 2u);
  ASSERT_TRUE(store::find_dead(op, *group, 1));
  store::delivery_history(op, *group, 1);
  store::DeadFilter one;
  one.to_id = 1;
  EXPECT_EQ(store::retry_dead(op, *group, one, "op@test").size(), 1u);
  store::DeadFilter two;
  two.from_id = 2;
  EXPECT_EQ(store::discard_dead(op, *group, two, "op@test").size(), 1u);
  EXPECT_EQ(store::rewind_group(op, *group, 0, std::nullopt, "op@test").position, 0);
  // An operator does not produce and does not run DDL.
  EXPECT_EQ(sqlstate_of(url, "SELECT sqlstreams.produce('payments.requested', '{}')"), "42501");
  EXPECT_EQ(sqlstate_of(url, "SELECT sqlstreams.ensure_partitions(1, 100000)"), "42501");
  EXPECT_EQ(sqlstate_of(url, "INSERT INTO " + family_.messages + " (payload) VALUES ('{}')"),
            "42501");
}

// V005 (docs/operating/service.md#group-lifecycle): `group pause|resume|drop` as
// sqlstreams_operator, on a stream declared before V005's grants (SetUp) and on one declared after
// (grant_family covers new families too); the host role refreshes last_seen_at with its heartbeat;
// a producer can do none of it.
TEST_F(RolesTest, TheOperatorRolePausesResumesAndDropsGroupsAndTheHostRoleMarksThemSeen) {
  store::Producer(*session_).produce_batch("payments.requested", {{R"({"a":1})"}});
  auto gs = group_store(*session_, charge_.id);
  ASSERT_TRUE(poll(gs, 10).range);  // a lease and a cursor to remove
  store::StreamSpec later;
  later.name = "orders.created";
  auto orders = store::declare_stream(*session_, later).stream;
  const StreamFamily orders_family = stream_family(orders.id);
  auto shipping =
      store::declare_group(*session_, orders, "shipping", store::StartAt::kBeginning).group;

  const std::string url = login_as("sqlstreams_operator");
  store::Session op(options_as(url));
  EXPECT_TRUE(store::pause_group(op, charge_, "op@test").changed);
  EXPECT_TRUE(store::resume_group(op, charge_, "op@test").changed);
  auto dropped = store::drop_group(op, charge_, "op@test");
  EXPECT_EQ(dropped.removed.leases, 1);
  EXPECT_NE(dropped.db_user.find("_operator"), std::string::npos) << dropped.db_user;
  EXPECT_EQ(store::drop_group(op, shipping, "op@test").removed.claimed, 0);
  EXPECT_FALSE(store::find_group(op, "orders.created", "shipping"));
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.group_actions"), 4);
  // An operator changes no other column of groups, and runs no DDL.
  EXPECT_EQ(sqlstate_of(url, "UPDATE sqlstreams.groups SET name = 'x'"), "42501");
  EXPECT_EQ(sqlstate_of(url, "DELETE FROM sqlstreams.streams"), "42501");
  // V008 (docs/operating/security.md#producers-and-roles): pause, resume and drop only through the
  // audited functions; the tables behind them, and the audit trail itself, are not writable by hand
  // (families declared before and after V008's grants alike: family_ and orders_family).
  for (const std::string& sql : std::vector<std::string>{
           "UPDATE sqlstreams.groups SET paused_at = now(), paused_by = 'nobody'",
           "DELETE FROM sqlstreams.groups", "DELETE FROM sqlstreams.workers",
           "DELETE FROM " + family_.cursors, "DELETE FROM " + family_.leases,
           "DELETE FROM " + orders_family.cursors, "DELETE FROM " + orders_family.leases,
           "INSERT INTO sqlstreams.group_actions (action, stream, group_name, group_id, actor) "
           "VALUES ('pause', 'orders.created', 'shipping', 1, 'forged')",
           "INSERT INTO sqlstreams.stream_actions (action, stream, stream_id) VALUES ('set', 'x', "
           "1)",
           "UPDATE sqlstreams.streams SET retention = '1 day'",
           // Rewind and dead retry/discard too: their audit rows in deliveries_N are theirs alone.
           "UPDATE " + orders_family.cursors + " SET claimed = 0",
           "UPDATE " + orders_family.exceptions + " SET attempts = 0",
           "DELETE FROM " + orders_family.exceptions,
           "INSERT INTO " + orders_family.deliveries +
               " (group_id, message_id, attempt, outcome) VALUES (1, 1, 0, 'operator-rewind')"}) {
    EXPECT_EQ(sqlstate_of(url, sql), "42501") << sql;
  }
  // Fleet settings: the operator changes them through stream set, recorded under its login.
  store::StreamSettingsChange retention;
  retention.retention = std::optional<Millis>(std::chrono::hours(24));
  EXPECT_TRUE(store::set_stream_settings(op, "orders.created", retention, "op@test").audit_id);
  EXPECT_NE(
      db_.scalar<std::string>("SELECT db_user FROM sqlstreams.stream_actions").find("_operator"),
      std::string::npos);

  const std::string host_url = login_as("sqlstreams_host");
  store::Session host(options_as(host_url));
  store::HostInfo info{"h", 1, "test", now_};
  const int64_t id = store::register_host(host, info, Millis(15'000));
  store::heartbeat_host(host, id, info, Millis(15'000), "", {audit_.id});
  EXPECT_TRUE(
      db_.scalar<bool>("SELECT last_seen_at IS NOT NULL FROM sqlstreams.groups WHERE id = " +
                       std::to_string(audit_.id)));

  const std::string producer_url = login_as("sqlstreams_producer");
  EXPECT_EQ(sqlstate_of(producer_url, "UPDATE sqlstreams.groups SET paused_at = now()"), "42501");
  EXPECT_EQ(sqlstate_of(producer_url, "DELETE FROM " + family_.cursors), "42501");
  EXPECT_EQ(sqlstate_of(producer_url, "SELECT * FROM sqlstreams.group_actions"), "42501");
  EXPECT_EQ(sqlstate_of(producer_url, "SELECT * FROM sqlstreams.pause_group(1, 'p')"), "42501");
  EXPECT_EQ(sqlstate_of(producer_url,
                        "SELECT * FROM sqlstreams.set_stream_settings('orders.created', false, "
                        "NULL, true, NULL, NULL, 'p')"),
            "42501");
}

TEST_F(RolesTest, APartitionTheHostRolesJanitorCreatesBelongsToTheHostRoleAndTakesProducts) {
  // Ids are drawn up to 2500: the stream (1000 ids per partition) needs partitions past p2.
  db_.sql("SELECT setval('" + family_.id_seq + "', 2500)");
  const std::string host_url = login_as("sqlstreams_host");
  {
    store::Session host(options_as(host_url));
    store::StreamJanitor janitor(host, stream_.id);
    auto created = janitor.create_ahead(now_, store::JanitorSettings{});
    ASSERT_FALSE(created.empty());
  }
  EXPECT_EQ(db_.scalar<std::string>("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = '" +
                                    family_.partition(2) + "'::regclass"),
            "sqlstreams_host")
      << "a partition created by one host's LOGIN role must be droppable by every other host";
  const std::string producer_url = login_as("sqlstreams_producer");
  pqxx::connection c(producer_url);
  pqxx::work tx(c);
  const auto id =
      tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"a\":1}')")[0][0].as<int64_t>();
  tx.commit();
  EXPECT_EQ(id, 2501);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.partition(2)), 1);
  // A second host (another LOGIN role) may drop what the first one created.
  const std::string other_host = login_as("sqlstreams_host");
  EXPECT_EQ(sqlstate_of(other_host, "DROP TABLE " + family_.partition(3)), "");
}

TEST_F(RolesTest, RolesAreCreatedOnceForTheWholeClusterAndASecondSchemaMigrates) {
  store::SessionOptions o = options();
  o.schema = "other_schema";
  store::Session other(o);
  EXPECT_NO_THROW(store::migrate(other));
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM pg_roles WHERE rolname IN "
                                "('sqlstreams_producer', 'sqlstreams_operator', "
                                "'sqlstreams_host') AND NOT rolcanlogin"),
            3);
  EXPECT_TRUE(
      db_.scalar<bool>("SELECT has_function_privilege('sqlstreams_producer', "
                       "'other_schema.produce(text, jsonb, integer, text, text)', 'EXECUTE')"));
}

}  // namespace
}  // namespace sqlstreams::testing
