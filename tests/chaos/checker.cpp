#include "checker.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <tuple>

#include "chaos_plugin.hpp"
#include "ordered_check.hpp"
#include "workload.hpp"

namespace sqlstreams::chaos {
namespace {

const std::vector<std::string> kInvariants = {
    "lost",        "skipped",      "stuck",     "wrong-attempts", "double-commits", "phantoms",
    "backward",    "passed-lease", "order",     "overlap",        "early",          "log-order",
    "idempotency", "child-start",  "host-exit", "emits"};

struct DeadRow {
  std::string status;
  int32_t attempts = 0, delays = 0;
  std::string error;
};

// Everything read from one stream's tables.
struct StreamData {
  int64_t id = 0;
  bool allow_drop = false;
  std::map<int64_t, std::string> messages;                        // id -> tag (what retention left)
  std::map<std::string, int64_t> group_ids;                       // group name -> id
  std::map<std::string, std::pair<int64_t, int64_t>> cursor;      // group -> (committed, claimed)
  std::map<std::string, int64_t> leases;                          // group -> leases left
  std::map<std::pair<std::string, int64_t>, DeadRow> exceptions;  // (group, id) -> row
  std::map<std::tuple<std::string, int64_t, int32_t>, int> committed_attempts;  // audit, attempt>0
  std::set<std::pair<std::string, int64_t>> ok, discarded, operator_retried;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> rewound;  // group -> (P, C]
  std::map<std::pair<std::string, int64_t>, std::string> audit;  // (group, id) -> its trail
  std::map<std::pair<std::string, int64_t>, int> ok_commits;     // committed OK outcomes
  // The chain's outputs in this stream: (emitting "stream/group", origin id, index) -> how many
  // were written.
  std::map<std::tuple<std::string, int64_t, int>, int> outputs;
  OrderedStream ordered;  // what the per-key invariants read
  // Attempts charged because an isolated group's handler process could not start: "g/id attempt
  // N: error" (the children map the host's sealed image, so a plugin file replaced in place
  // must never stop one from starting).
  std::vector<std::string> child_start_failures;
};

std::vector<CallRecord> read_records(const std::vector<std::string>& files) {
  std::vector<CallRecord> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      CallRecord r;
      if (ls >> r.stream >> r.group >> r.id >> r.attempt >> r.outcome >> r.tag >> r.pid >> r.key >>
          r.seq >> r.start_ns >> r.end_ns) {
        if (r.key == "-") r.key.clear();
        out.push_back(r);
      }
    }
  }
  return out;
}

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::map<std::string, StreamData> read_database(const std::string& url) {
  std::map<std::string, StreamData> streams;
  // PostgreSQL's and the hosts' timestamps are CLOCK_REALTIME; the records CLOCK_MONOTONIC.
  const int64_t realtime_minus_monotonic = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
  const auto monotonic = [&](int64_t unix_us) { return unix_us * 1000 - realtime_minus_monotonic; };
  pqxx::connection c(url);
  pqxx::work tx(c);
  for (const auto& r :
       tx.exec("SELECT id, name, allow_drop_past_committed FROM sqlstreams.streams")) {
    auto& s = streams[r[1].as<std::string>()];
    s.id = r[0].as<int64_t>();
    s.allow_drop = s.ordered.allow_drop = r[2].as<bool>();
  }
  for (auto& [name, s] : streams) {
    const std::string n = std::to_string(s.id);
    std::map<int64_t, std::string> group_name;
    for (const auto& r :
         tx.exec_params("SELECT id, name FROM sqlstreams.groups WHERE stream_id = $1", s.id)) {
      s.group_ids[r[1].as<std::string>()] = r[0].as<int64_t>();
      group_name[r[0].as<int64_t>()] = r[1].as<std::string>();
    }
    for (const auto& r : tx.exec("SELECT id, coalesce(payload->>'tag', '-'), message_key, "
                                 "(payload->>'seq')::bigint FROM sqlstreams.messages_" +
                                 n)) {
      s.messages[r[0].as<int64_t>()] = r[1].as<std::string>();
      s.ordered.stored.insert(r[0].as<int64_t>());
      if (!r[2].is_null()) {
        s.ordered.keys[r[0].as<int64_t>()] =
            KeySeq{r[2].as<std::string>(), r[3].is_null() ? -1 : r[3].as<int64_t>()};
      }
    }
    for (const auto& r :
         tx.exec("SELECT coalesce(payload->>'src', '-'), (payload->>'origin')::bigint, "
                 "(payload->>'i')::int, count(*) FROM sqlstreams.messages_" +
                 n + " WHERE payload ? 'origin' GROUP BY 1, 2, 3")) {
      s.outputs[{r[0].as<std::string>(), r[1].as<int64_t>(), r[2].as<int>()}] = r[3].as<int>();
    }
    for (const auto& r :
         tx.exec("SELECT group_id, committed, claimed FROM sqlstreams.cursors_" + n)) {
      s.cursor[group_name[r[0].as<int64_t>()]] = {r[1].as<int64_t>(), r[2].as<int64_t>()};
    }
    for (const auto& r :
         tx.exec("SELECT group_id, count(*) FROM sqlstreams.leases_" + n + " GROUP BY group_id")) {
      s.leases[group_name[r[0].as<int64_t>()]] = r[1].as<int64_t>();
    }
    for (const auto& r : tx.exec("SELECT group_id, message_id, status, attempts, delays, "
                                 "coalesce(last_error, '') FROM sqlstreams.exceptions_" +
                                 n)) {
      s.exceptions[{group_name[r[0].as<int64_t>()], r[1].as<int64_t>()}] = DeadRow{
          r[2].as<std::string>(), r[3].as<int32_t>(), r[4].as<int32_t>(), r[5].as<std::string>()};
    }
    for (const auto& r : tx.exec("SELECT group_id, message_id, attempt, outcome, coalesce(error, "
                                 "''), coalesce(host, ''), to_char(at, 'HH24:MI:SS.MS'), "
                                 "(extract(epoch FROM at) * 1000000)::bigint FROM "
                                 "sqlstreams.deliveries_" +
                                 n + " ORDER BY id")) {
      const std::string g = group_name[r[0].as<int64_t>()], outcome = r[3].as<std::string>();
      const int64_t id = r[1].as<int64_t>();
      const int32_t attempt = r[2].as<int32_t>();
      const int64_t at_ns = monotonic(r[7].as<int64_t>());
      if (const std::string error = r[4].as<std::string>();
          error.rfind("handler process restarting: ", 0) == 0 &&
          error.find("(signal 9)") == std::string::npos) {  // not the workload's own SIGKILL
        s.child_start_failures.push_back(g + "/" + std::to_string(id) + " attempt " +
                                         std::to_string(attempt) + ": " + error.substr(0, 300));
      }
      auto& d = s.ordered.decided[{g, id}];
      if (attempt > 0 && outcome == "ok") d.first_ok = std::min(d.first_ok, at_ns);
      if (outcome == "dead" && at_ns < d.first_dead) {
        d.first_dead = at_ns;
        d.dead_attempt = attempt;
      }
      if (outcome == "operator-discard") d.first_discard = std::min(d.first_discard, at_ns);
      if (outcome == "operator-retry") d.operator_retried = true;
      // The trail shown with a violation's example: "attempt outcome host time; ...".
      auto& trail = s.audit[{g, id}];
      if (trail.size() < 600) {
        trail += (trail.empty() ? "" : "; ") + std::to_string(attempt) + " " + outcome + " " +
                 r[5].as<std::string>() + " " + r[6].as<std::string>();
      }
      if (attempt > 0) s.committed_attempts[{g, id, attempt}]++;
      if (attempt > 0 && outcome == "ok") s.ok.insert({g, id});
      if (attempt > 0 && outcome == "ok") s.ok_commits[{g, id}]++;
      if (outcome == "operator-discard") s.discarded.insert({g, id});
      if (outcome == "operator-retry") s.operator_retried.insert({g, id});
      if (outcome == "operator-rewind") {
        // error: "rewound from claimed C / committed K to P": ids (P, C] are delivered again.
        const std::string e = r[4].as<std::string>();
        const auto at = e.find("claimed ");
        const int64_t from = at == std::string::npos ? 0 : std::stoll(e.substr(at + 8));
        s.rewound[g].push_back({id, from});
        s.ordered.rewinds[g].push_back(Rewind{id, from, at_ns});
      }
    }
  }
  tx.commit();
  return streams;
}

class Tally {
 public:
  explicit Tally(Verdict& v) : v_(v) {
    for (const auto& i : kInvariants) v_.violations[i] = 0;
  }
  void violation(const std::string& what, const std::string& example) {
    v_.violation(what, example);
  }
  void info(const std::string& what, int64_t n = 1) { v_.add_info(what, n); }

 private:
  Verdict& v_;
};

std::string where(const std::string& stream, const std::string& group, int64_t id) {
  return stream + "/" + group + " id " + std::to_string(id);
}

}  // namespace

bool Verdict::ok() const {
  for (const auto& [k, n] : violations) {
    if (n != 0) return false;
  }
  return true;
}

void Verdict::violation(const std::string& invariant, const std::string& example) {
  violations[invariant]++;
  auto& ex = examples[invariant];
  if (ex.size() < 8) ex.push_back(example);
}

int64_t Verdict::count(const std::string& invariant) const {
  auto it = violations.find(invariant);
  return it == violations.end() ? 0 : it->second;
}

std::string Verdict::line() const {
  std::ostringstream o;
  for (const auto& i : kInvariants) o << i << "=" << count(i) << " ";
  auto d = info.find("duplicates");
  o << "duplicates=" << (d == info.end() ? 0 : d->second);
  return o.str();
}

std::string Verdict::report() const {
  std::ostringstream o;
  o << line() << "\n";
  for (const auto& [k, n] : info) o << "  " << k << ": " << n << "\n";
  for (const auto& [k, ex] : examples) {
    o << "  " << k << " (" << count(k) << "), e.g.:\n";
    for (const auto& e : ex) o << "    " << e << "\n";
  }
  return o.str();
}

Verdict check(const CheckInput& in, History& h) {
  Verdict v;
  Tally t(v);
  auto db = read_database(in.url);
  const auto records = read_records(in.record_files);
  std::lock_guard lk(h.mu);

  // Tags: where each one ended up (the producer's id, else the table, else a handler call).
  std::map<std::string, std::pair<std::string, int64_t>> seen;  // tag -> (stream, id)
  for (const auto& [name, s] : db) {
    for (const auto& [id, tag] : s.messages) seen[tag] = {name, id};
  }
  std::map<std::tuple<std::string, std::string, int64_t, int32_t>, int> calls;
  for (const auto& r : records) {
    seen.emplace(r.tag, std::make_pair(r.stream, r.id));
    calls[{r.stream, r.group, r.id, r.attempt}]++;
  }
  for (const auto& [key, n] : calls) {
    if (n > 1) t.info("duplicates", n - 1);
  }
  t.info("handler calls", static_cast<int64_t>(records.size()));
  for (const auto& m : h.monitor_violations) {
    t.violation(m.rfind("backward", 0) == 0 ? "backward" : "passed-lease", m);
  }
  t.info("monitor samples", h.monitor_samples);
  for (const auto& m : h.idempotency_violations) t.violation("idempotency", m);
  for (const auto& m : h.host_exits) t.violation("host-exit", m);
  for (const auto& [name, s] : db) {
    for (const auto& f : s.child_start_failures) t.violation("child-start", name + ": " + f);
  }

  // No idempotency key twice within its window (the run is far shorter than the 24 h default):
  // the idem producers' keys are their tags, so a tag stored at two ids is a key written twice.
  {
    pqxx::connection c(in.url);
    pqxx::nontransaction tx(c);
    for (const auto& [name, s] : db) {
      auto r = tx.exec(
          "SELECT payload->>'tag', string_agg(id::text, ',' ORDER BY id) FROM "
          "sqlstreams.messages_" +
          std::to_string(s.id) +
          " WHERE payload->>'tag' LIKE 'idem-%' GROUP BY 1 HAVING count(*) > 1");
      for (const auto& row : r) {
        t.violation("idempotency", name + ": key " + row[0].as<std::string>() + " stored at ids " +
                                       row[1].as<std::string>());
      }
      t.info("idempotency keys kept",
             tx.exec("SELECT count(*) FROM sqlstreams.idempotency_keys WHERE stream_id = " +
                     std::to_string(s.id))[0][0]
                 .as<int64_t>());
    }
  }

  for (const auto& [tag, p] : h.produced) {
    if (p.fate == Fate::kRolledBack) {
      t.info("rolled back");
      if (seen.count(tag)) {
        t.violation("phantoms", "rolled-back " + tag + " (" + p.path + ") seen as " +
                                    seen[tag].first + " id " + std::to_string(seen[tag].second));
      }
      continue;
    }
    auto found = seen.find(tag);
    if (p.fate == Fate::kInDoubt) {
      t.info("in doubt");
      if (found == seen.end()) continue;  // it rolled back
      t.info("in doubt, committed");
    } else {
      t.info("committed");
    }
    const auto& s = db.at(p.stream);
    int64_t id = p.id;
    if (id == 0 && found != seen.end()) id = found->second.second;
    if (id == 0) {  // committed, never stored where anyone can see it, never delivered
      if (s.allow_drop) {
        t.info("dropped");
      } else {
        t.violation("lost", "committed " + tag + " (" + p.path + ") on " + p.stream +
                                " is in no table and was never delivered");
      }
      continue;
    }
    const bool stored = s.messages.count(id) != 0;
    for (const auto& [g, gid] : s.group_ids) {
      const auto key = std::make_pair(g, id);
      auto ex = s.exceptions.find(key);
      const bool dead = ex != s.exceptions.end() && ex->second.status == "dead";
      const bool resolved = s.ok.count(key) || dead || s.discarded.count(key);
      const Behaviour b = behaviour_of(in.seed, g, id);
      const int64_t committed = s.cursor.count(g) ? s.cursor.at(g).first : 0;
      const auto trail_of = [&] {
        auto a = s.audit.find(key);
        return " [audit: " + (a == s.audit.end() ? std::string("none") : a->second) + "]";
      };
      if (!resolved) {
        if (!stored && s.allow_drop) {
          t.info("dropped");
        } else if (!stored && committed < id) {
          t.violation("lost", where(p.stream, g, id) + " (" + tag +
                                  ") dropped before the group "
                                  "reached it (committed " +
                                  std::to_string(committed) + ")");
        } else if (committed >= id && (ex == s.exceptions.end())) {
          t.violation("skipped", where(p.stream, g, id) + " (" + tag + ", " + name_of(b) +
                                     ") behind committed " + std::to_string(committed) +
                                     " without an outcome" + trail_of());
        } else {
          t.violation("stuck",
                      where(p.stream, g, id) + " (" + tag + ") unresolved" +
                          (ex != s.exceptions.end() ? ", exception " + ex->second.status : "") +
                          trail_of());
        }
        continue;
      }
      if (s.discarded.count(key) && !dead) continue;
      const int budget = dead ? ex->second.attempts - ex->second.delays : 0;
      const bool spent = budget == in.max_retries + 1;
      if (dead) {
        const auto& e = ex->second;
        bool right = false;
        if (b == Behaviour::kFail) right = spent;
        if (b == Behaviour::kDelayFail) right = spent && (e.delays >= 1 || e.attempts == budget);
        if (b == Behaviour::kTerminal)
          right = e.error.find("chaos: terminal") != std::string::npos || spent;
        if (!ends_dead(b) && spent) {
          right = true;
          t.info("fault-dead");
        }
        if (!right) {
          t.violation("wrong-attempts", where(p.stream, g, id) + " (" + name_of(b) +
                                            ") dead with attempts " + std::to_string(e.attempts) +
                                            " delays " + std::to_string(e.delays) + ": " + e.error);
        }
      } else if (ends_dead(b)) {
        t.violation("wrong-attempts", where(p.stream, g, id) + " (" + name_of(b) +
                                          ") resolved ok, but its handler never returns OK");
      }
    }
  }

  // The audit trail: one committed outcome per (group, message, attempt), except where an
  // operator made history repeat (a rewind re-delivers, `dead retry` restarts the budget).
  for (const auto& [name, s] : db) {
    for (const auto& [key, n] : s.committed_attempts) {
      if (n < 2) continue;
      const auto& [g, id, attempt] = key;
      bool excused = s.operator_retried.count({g, id}) != 0;
      if (auto it = s.rewound.find(g); it != s.rewound.end()) {
        for (const auto& [low, high] : it->second) excused = excused || (id > low && id <= high);
      }
      if (!excused) {
        t.violation("double-commits", where(name, g, id) + " attempt " + std::to_string(attempt) +
                                          " committed " + std::to_string(n) + " times");
      }
    }
    // Nothing may be left at the end.
    for (const auto& [g, n] : s.leases) {
      if (n > 0)
        t.violation("stuck", name + "/" + g + ": " + std::to_string(n) + " range leases left");
    }
  }

  // The chain: each committed OK outcome of an emitting group (in process and isolated) wrote
  // its outputs once, whole, and nothing else wrote any (docs/operating/emits.md). A rewind
  // re-delivers on purpose: its second OK commit writes a second set, counted the same way.
  if (auto chain = db.find(kChainStream); chain != db.end()) {
    int64_t written = 0;
    std::set<std::string> sources;
    for (const auto& [stream, group] : kEmittingGroups) {
      const std::string src = stream + "/" + group;
      sources.insert(src);
      std::map<int64_t, int> commits;  // origin id -> committed OK outcomes of the group
      if (auto source = db.find(stream); source != db.end()) {
        for (const auto& [key, n] : source->second.ok_commits) {
          if (key.first == group) commits[key.second] = n;
        }
      }
      std::set<int64_t> origins;
      for (const auto& [key, n] : chain->second.outputs) {
        if (std::get<0>(key) == src) origins.insert(std::get<1>(key));
      }
      for (const auto& [id, n] : commits) origins.insert(id);
      for (int64_t id : origins) {
        const int k = commits.count(id) ? commits.at(id) : 0;
        for (int i = 0; i < outputs_of(id) + 1; ++i) {  // one index past the last: must be empty
          auto it = chain->second.outputs.find({src, id, i});
          const int n = it == chain->second.outputs.end() ? 0 : it->second;
          written += n;
          const int want = i < outputs_of(id) ? k : 0;
          if (n != want) {
            t.violation("emits", where(stream, group, id) + " output " + std::to_string(i) +
                                     " written " + std::to_string(n) + " times for " +
                                     std::to_string(k) + " committed OK outcomes");
          }
        }
      }
    }
    for (const auto& [key, n] : chain->second.outputs) {
      if (sources.count(std::get<0>(key)) == 0) {
        t.violation("emits", std::to_string(n) + " outputs from '" + std::get<0>(key) +
                                 "', which does not emit");
      }
    }
    t.info("chain outputs", written);
    // The chain's consumer resolved every output (no producer history covers this stream).
    const auto& c = chain->second;
    const int64_t committed = c.cursor.count(kChainGroup) ? c.cursor.at(kChainGroup).first : 0;
    for (const auto& [id, tag] : c.messages) {
      const auto key = std::make_pair(kChainGroup, id);
      auto ex = c.exceptions.find(key);
      const bool dead = ex != c.exceptions.end() && ex->second.status == "dead";
      if (c.ok.count(key) || dead || c.discarded.count(key)) continue;
      t.violation(committed >= id && ex == c.exceptions.end() ? "skipped" : "stuck",
                  where(kChainStream, kChainGroup, id) + " (" + tag + ") unresolved");
    }
  }

  // Per key: the log's order, and the ordered groups' order / overlap / early.
  if (!in.ordered.empty()) {
    std::map<std::string, OrderedStream> streams;
    for (auto& [name, s] : db) {
      for (const auto& [key, row] : s.exceptions) {
        if (row.status == "dead") s.ordered.dead_at_end.insert(key);
      }
      streams[name] = std::move(s.ordered);
    }
    check_ordered(OrderedSettings{in.seed, in.ordered, in.stop_grace_ns}, h, streams, records, v);
  }
  if (!in.quiescent) t.info("not quiescent at the end");
  return v;
}

}  // namespace sqlstreams::chaos
