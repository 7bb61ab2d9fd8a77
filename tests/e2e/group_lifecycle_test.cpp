// Group lifecycle with real processes (docs/operating/service.md#group-lifecycle): `sqlstreams
// group pause|resume|drop` against running `sqlstreams run` hosts, and `run` writing nothing when a
// plugin fails to start.
//   pause   in-flight work finishes and commits, no lease stays held, messages produced while
//           paused are not handled; resume handles every one of them, nothing lost;
//   drop    of a group nobody runs releases the retention it held (the running host's janitor
//           drops the partitions); of a group a host is consuming, that pipeline stops with one
//           `group-dropped` error (no crash, no spin, no re-created group) while the other group
//           goes on, and a SIGHUP with the group still in the config declares it again;
//           refused without a terminal and without --yes; audited (group_actions);
//   run     declares streams and groups only after every plugin loaded and every handler was
//           created: a failed start leaves no stream and no group behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

class GroupLifecycle : public ::testing::Test {
 protected:
  std::string cursors() const { return testing::stream_family(url(), kStream).cursors; }
  std::string leases() const { return testing::stream_family(url(), kStream).leases; }
  const std::string& url() const { return db_.url(); }
  int64_t groups_named(const std::string& name) const {
    return scalar<int64_t>(url(),
                           "SELECT count(*) FROM sqlstreams.groups WHERE name = '" + name + "'");
  }
  // Range leases some host holds now (handed-back ones, expires_at -infinity, are free).
  int64_t held_leases() const {
    return scalar<int64_t>(
        url(), "SELECT count(*) FROM " + leases() + " WHERE expires_at > statement_timestamp()");
  }
  std::pair<int, std::string> group_cmd(const std::string& verb, const std::string& group,
                                        std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"group", verb, group, "--stream", kStream};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args, url());
  }

  testing::TestDatabase db_;
  ScratchDir dir_;
};

TEST_F(GroupLifecycle, PauseFinishesInFlightWorkClaimsNothingAndResumeLosesNothing) {
  // Every call waits for the gate file, created only once the host has seen the pause: the pause
  // lands with ranges claimed and calls in flight however slow the machine is.
  const std::string gate = dir_.file("gate");
  HostOptions o;
  o.audit_group = false;
  o.record_file = dir_.file("records.txt");
  o.sleep_ms = 10;
  o.concurrency = 2;
  o.batch_size = 20;
  o.charge_config = "wait_for_file = \"" + gate + "\"\n";
  Host host(dir_, o, url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  produce_payments(url(), 600);
  ASSERT_TRUE(wait_until([&] { return held_leases() > 0; }, 60s)) << tail(host.log());
  auto [code, out] = group_cmd("pause", kCharge);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("paused payments.requested/charge-cards"), std::string::npos) << out;
  ASSERT_TRUE(host.wait_for_log("group-paused-by-operator", 60s)) << tail(host.log());
  EXPECT_EQ(count_calls(o.record_file, kCharge), 0u) << "a call passed the closed gate";
  std::ofstream(gate).put('\n');
  // In-flight work finishes and commits; no lease stays held.
  ASSERT_TRUE(wait_until([&] { return held_leases() == 0; }, 60s)) << tail(host.log());
  const size_t at_pause = count_calls(o.record_file, kCharge);
  EXPECT_GT(at_pause, 0u) << "the calls in flight at the pause did not finish";
  EXPECT_LT(at_pause, 600u) << "the paused group went on claiming";
  // Produced while paused: nothing is handled (100 poll intervals of 20 ms).
  produce_payments(url(), 100, 601);
  EXPECT_FALSE(wait_until([&] { return count_calls(o.record_file, kCharge) > at_pause; }, 2s))
      << "handled while paused:\n"
      << tail(host.log());
  EXPECT_EQ(held_leases(), 0);
  auto [again, again_out] = group_cmd("pause", kCharge);
  EXPECT_EQ(again, 0) << again_out;
  EXPECT_NE(again_out.find("already paused"), std::string::npos) << again_out;
  auto [st, status] = cli({"status"}, url());
  ASSERT_EQ(st, 0) << status;
  EXPECT_NE(status.find("paused: charge-cards"), std::string::npos) << status;

  auto [rcode, rout] = group_cmd("resume", kCharge);
  ASSERT_EQ(rcode, 0) << rout;
  ASSERT_TRUE(host.wait_for_log("group-resumed-by-operator", 60s)) << tail(host.log());
  wait_drained(url(), 120s);
  auto records = read_records({o.record_file});
  EXPECT_EQ(missing_ids(records, kCharge, 700), "") << "lost across the pause";
  EXPECT_EQ(scalar<std::string>(url(),
                                "SELECT string_agg(action, ',' ORDER BY id) FROM "
                                "sqlstreams.group_actions"),
            "pause,resume");
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
  EXPECT_EQ(host.count_in_log("database-unavailable"), 0) << tail(host.log());
}

TEST_F(GroupLifecycle, DroppingAGroupNobodyRunsReleasesTheRetentionItHeld) {
  HostOptions o;
  o.audit_group = false;  // the host runs charge-cards only; audit-payments is the "typo" group
  o.partition_size = 10;
  o.retention = "1d";
  o.janitor_period = "300ms";
  o.record_file = dir_.file("records.txt");
  HostOptions both = o;
  both.audit_group = true;
  const std::string declared = dir_.file("declare.toml");
  std::ofstream(declared) << host_config(both);
  declare(url(), declared);
  const testing::StreamFamily t = testing::stream_family(url(), kStream);
  query(url(), "SELECT sqlstreams.ensure_partitions(" + std::to_string(t.id) +
                   ", 100)");  // no host runs yet
  produce_payments(url(), 35);
  query(url(),
        "UPDATE " + t.messages + " SET created_at = now() - interval '2 days' WHERE id <= 30");
  Host host(dir_, o, url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<int64_t>(url(), "SELECT min(c.committed) FROM " + cursors() +
                                          " c JOIN sqlstreams.groups g ON g.id = c.group_id "
                                          "WHERE g.name = 'charge-cards'") == 35;
      },
      60s))
      << tail(host.log());
  ASSERT_TRUE(
      host.wait_for_log("retention-held stream=payments.requested group=audit-payments "
                        "committed=0 needs=10 last_seen=never",
                        30s))
      << tail(host.log());
  EXPECT_EQ(host.count_in_log("partition-dropped"), 0);
  auto [st, status] = cli({"status"}, url());
  ASSERT_EQ(st, 0) << status;
  EXPECT_NE(status.find("retention waits for group audit-payments: committed 0"), std::string::npos)
      << status;
  EXPECT_NE(status.find("not seen by a running host: audit-payments (last seen never"),
            std::string::npos)
      << status;
  EXPECT_EQ(status.find("not seen by a running host: charge-cards"), std::string::npos)
      << "the running host's heartbeat marks the group it runs\n"
      << status;
  auto [jc, json] = cli({"status", "--json"}, url());
  ASSERT_EQ(jc, 0) << json;
  EXPECT_NE(json.find("\"retention_held_by\": {"), std::string::npos) << json;

  auto [code, out] = group_cmd("drop", kAudit, {"--yes"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dropped payments.requested/audit-payments"), std::string::npos) << out;
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<int64_t>(url(),
                               "SELECT count(*) FROM pg_class WHERE relname ~ "
                               "'^messages_" +
                                   std::to_string(t.id) + "_p[0-2]$'") == 0;
      },
      30s))
      << tail(host.log());
  // Logged after the janitor's pass, which dropped them.
  EXPECT_TRUE(wait_until([&] { return host.count_in_log("partition-dropped") >= 3; }, 10s))
      << tail(host.log());
  EXPECT_EQ(scalar<int64_t>(url(), "SELECT min(id) FROM " + t.messages), 31);
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST_F(GroupLifecycle, DroppingAGroupARunningHostConsumesStopsOnlyThatPipeline) {
  HostOptions o;
  o.record_file = dir_.file("records.txt");
  // audit-payments is slow (400 messages take 40 s at concurrency 2) and the drop comes after
  // its 20th call: a `group drop` that starts slowly on a loaded machine still finds it running
  // (at 10 ms a message, as charge-cards, it had finished all 400 before a slow drop, 2026-12-06).
  o.charge_config = "sleep_ms = 10\n";
  o.audit_config = "sleep_ms = 200\n";
  o.concurrency = 2;
  o.batch_size = 20;
  Host host(dir_, o, url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  const int64_t audit_id =
      scalar<int64_t>(url(), "SELECT id FROM sqlstreams.groups WHERE name = 'audit-payments'");
  produce_payments(url(), 400);
  ASSERT_TRUE(wait_until([&] { return count_calls(o.record_file, kAudit) >= 20; }, 60s));
  auto [code, out] = group_cmd("drop", kAudit, {"--yes"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("group-dropped-by-operator"), std::string::npos) << out;
  ASSERT_TRUE(host.wait_for_log("group-forgotten", 20s)) << tail(host.log());
  // charge-cards goes on and handles everything; audit-payments is not re-created.
  produce_payments(url(), 100, 401);
  ASSERT_TRUE(wait_until([&] { return count_calls(o.record_file, kCharge) >= 500; }, 120s))
      << tail(host.log());
  const size_t audit_calls = count_calls(o.record_file, kAudit);
  EXPECT_LT(audit_calls, 400u) << "the drop came too late to test anything";
  EXPECT_EQ(groups_named(kAudit), 0) << "the running host re-created the dropped group";
  EXPECT_EQ(scalar<int64_t>(url(), "SELECT count(*) FROM " + cursors() +
                                       " WHERE group_id = " + std::to_string(audit_id)),
            0);
  EXPECT_EQ(count_of(host.log(), "\"event\":\"group-dropped\""), 1) << tail(host.log());
  EXPECT_EQ(host.count_in_log("database-unavailable"), 0) << tail(host.log());
  EXPECT_EQ(host.count_in_log("lease-lost"), 0) << tail(host.log());
  EXPECT_TRUE(host.process().running());

  // SIGHUP with the group still in the config: declared again, as a new group, and run.
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("reload-applied", 30s)) << tail(host.log());
  EXPECT_NE(host.log().find("group-started stream=payments.requested group=audit-payments "
                            "reason=added"),
            std::string::npos)
      << tail(host.log());
  EXPECT_EQ(groups_named(kAudit), 1);
  EXPECT_NE(scalar<int64_t>(url(),
                            "SELECT id FROM sqlstreams.groups WHERE name = "
                            "'audit-payments'"),
            audit_id);
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST_F(GroupLifecycle, DropIsRefusedWithoutATerminalAndUnknownGroupsAreNamed) {
  declare_host(dir_, url(), HostOptions{});
  auto [code, out] = group_cmd("drop", kAudit);  // stdin is not a terminal, no --yes
  EXPECT_EQ(code, 64) << out;
  EXPECT_NE(out.find("stdin is not a terminal; nothing dropped"), std::string::npos) << out;
  EXPECT_NE(out.find("--yes"), std::string::npos) << out;
  EXPECT_EQ(groups_named(kAudit), 1);
  EXPECT_EQ(scalar<int64_t>(url(), "SELECT count(*) FROM sqlstreams.group_actions"), 0);

  auto [c1, o1] = group_cmd("drop", "no-such-group", {"--yes"});
  EXPECT_EQ(c1, 65) << o1;
  EXPECT_NE(o1.find("no group \"no-such-group\" on stream \"payments.requested\""),
            std::string::npos)
      << o1;
  auto [c2, o2] = cli({"group", "pause", kCharge, "--stream", "no.such.stream"}, url());
  EXPECT_EQ(c2, 65) << o2;
  EXPECT_NE(o2.find("no stream \"no.such.stream\""), std::string::npos) << o2;
  auto [c3, o3] = cli({"group", "pause", kCharge}, url());
  EXPECT_EQ(c3, 64) << "--stream is required\n" << o3;

  // With --yes: dropped and audited (who, from where, with which program, what was removed).
  auto [c4, o4] = group_cmd("drop", kAudit, {"--yes"});
  ASSERT_EQ(c4, 0) << o4;
  EXPECT_EQ(groups_named(kAudit), 0);
  auto row = query(url(),
                   "SELECT action, stream, group_name, db_user, application_name, client_addr, "
                   "actor LIKE 'cli:%@%', detail ? 'dead_letters_removed' FROM "
                   "sqlstreams.group_actions");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][0].as<std::string>(), "drop");
  EXPECT_EQ(row[0][1].as<std::string>(), kStream);
  EXPECT_EQ(row[0][2].as<std::string>(), kAudit);
  EXPECT_EQ(row[0][3].as<std::string>(), "postgres");
  EXPECT_EQ(row[0][4].as<std::string>(), "sqlstreams group drop");
  EXPECT_EQ(row[0][5].as<std::string>(), "127.0.0.1");
  EXPECT_TRUE(row[0][6].as<bool>());
  EXPECT_TRUE(row[0][7].as<bool>());
  EXPECT_NE(o4.find("group-dropped-by-operator stream=payments.requested group=audit-payments"),
            std::string::npos)
      << o4;
}

// On a terminal (a pseudo-terminal from util-linux `script`), drop asks for the group's name:
// anything else drops nothing; the name drops it.
TEST_F(GroupLifecycle, OnATerminalDropNeedsTheGroupsNameTyped) {
  declare_host(dir_, url(), HostOptions{});
  const std::string command =
      std::string(SQLSTREAMS_BINARY) + " group drop " + kAudit + " --stream " + kStream;
  const std::map<std::string, std::string> env{{"SQLSTREAMS_DATABASE_URL", url()}};
  auto [code, out] = testing::run_command({"/usr/bin/script", "-qec", command, "/dev/null"}, env,
                                          "charge-cards\n");
  EXPECT_EQ(code, 64) << out;
  EXPECT_NE(out.find("Type the group's name to drop it"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing dropped: the name typed does not match"), std::string::npos) << out;
  EXPECT_EQ(groups_named(kAudit), 1);
  EXPECT_EQ(groups_named(kCharge), 1);
  auto [code2, out2] = testing::run_command({"/usr/bin/script", "-qec", command, "/dev/null"}, env,
                                            "audit-payments\n");
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_EQ(groups_named(kAudit), 0);
  EXPECT_EQ(groups_named(kCharge), 1);
}

// Regression (docs/operating/running.md#running-the-host): `run` used to declare streams and groups
// before loading plugins, so a start that failed on a plugin had already written them.
TEST_F(GroupLifecycle, AStartThatFailsOnAPluginWritesNoStreamAndNoGroup) {
  auto [mc, mout] = cli({"migrate"}, url());
  ASSERT_EQ(mc, 0) << mout;
  auto nothing_declared = [&] {
    return scalar<int64_t>(url(),
                           "SELECT (SELECT count(*) FROM sqlstreams.streams) + (SELECT "
                           "count(*) FROM sqlstreams.groups)") == 0;
  };
  // A handler the plugin does not export (fails while loading plugins, exit 3), a config the
  // handler's validate() rejects (a config error at the key, exit 2:
  // plugin-sdk/README.md#config-errors-that-point-at-the-key) and a handler whose create() throws
  // (fails while creating handler instances, after every check passed: the case the handler-first
  // start order is for, exit 3).
  struct Case {
    std::string name, broken;
    int exit_code;
  };
  for (const auto& c : std::vector<Case>{{"unknown-handler", "handler = \"no-such-handler\"", 3},
                                         {"bad-config", "sleep_ms = -1", 2},
                                         {"create-throws", "handler = \"create-throws\"", 3}}) {
    const std::string& name = c.name;
    HostOptions o;
    o.name = name;
    o.audit_group = false;
    std::string text = host_config(o);
    std::string plugin_dir = SQLSTREAMS_PLUGIN_DIR;
    if (name == "bad-config") {
      text += c.broken + "\n";
    } else {
      text.replace(text.find("handler = \"charge-cards\""), 24, c.broken);
    }
    if (name == "create-throws") {
      const std::string plugin = "plugin = \"" + o.plugin + "\"";
      text.replace(text.find(plugin), plugin.size(), "plugin = \"sdk_fixture.so\"");
      plugin_dir = SQLSTREAMS_FIXTURE_DIR;
    }
    const std::string config = dir_.file(name + ".toml");
    std::ofstream(config) << text;
    auto [code, out] = cli({"run", "--config", config, "--plugin-dir", plugin_dir}, url());
    EXPECT_EQ(code, c.exit_code) << name << "\n" << out;
    if (name == "create-throws") {
      EXPECT_NE(out.find("cannot open ledger file"), std::string::npos) << out;
    }
    EXPECT_TRUE(nothing_declared()) << name << ": a failed start declared:\n" << out;
  }
}

}  // namespace
}  // namespace sqlstreams::e2e
