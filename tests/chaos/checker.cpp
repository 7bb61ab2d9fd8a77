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

namespace sqlstreams::chaos {
namespace {

const std::vector<std::string> kInvariants = {
    "lost",     "skipped",      "stuck", "wrong-attempts", "double-commits", "phantoms",
    "backward", "passed-lease", "order", "overlap",        "early",          "log-order"};

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kAlways = std::numeric_limits<int64_t>::min();
// The audit trail's `at` is the deciding host's clock in whole milliseconds, converted here from
// CLOCK_REALTIME to CLOCK_MONOTONIC: a run is judged against it with this much slack.
constexpr int64_t kAuditSlackNs = 5'000'000;

// A (group, message)'s audit trail as the ordered invariants read it: when it was first decided
// OK, dead, discarded (CLOCK_MONOTONIC ns; kNever), and whether an operator retried it.
struct Resolutions {
  int64_t first_ok = kNever, first_dead = kNever, first_discard = kNever;
  int32_t dead_attempt = 0;  // the attempt of the first dead row
  bool operator_retried = false;
};

struct Rewind {
  int64_t low = 0, high = 0;  // ids (low, high] are delivered again
  int64_t at_ns = 0;          // the rewind's transaction (CLOCK_MONOTONIC)
};

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
  // For the ordered invariants:
  std::map<int64_t, KeySeq> keys;                                  // id -> key, payload seq
  std::map<std::pair<std::string, int64_t>, Resolutions> decided;  // (group, id) -> audit
  std::map<std::string, std::vector<Rewind>> rewinds;              // group -> timed rewinds
};

struct Record {
  std::string stream, group, outcome, tag;
  int64_t id = 0;
  int32_t attempt = 0;
  int pid = 0;
  std::string key;  // "" = keyless
  int64_t seq = -1, start_ns = 0, end_ns = 0;
};

std::vector<Record> read_records(const std::vector<std::string>& files) {
  std::vector<Record> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      Record r;
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
    s.allow_drop = r[2].as<bool>();
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
      if (!r[2].is_null()) {
        s.keys[r[0].as<int64_t>()] =
            KeySeq{r[2].as<std::string>(), r[3].is_null() ? -1 : r[3].as<int64_t>()};
      }
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
      auto& d = s.decided[{g, id}];
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
      if (outcome == "operator-discard") s.discarded.insert({g, id});
      if (outcome == "operator-retry") s.operator_retried.insert({g, id});
      if (outcome == "operator-rewind") {
        // error: "rewound from claimed C / committed K to P": ids (P, C] are delivered again.
        const std::string e = r[4].as<std::string>();
        const auto at = e.find("claimed ");
        const int64_t from = at == std::string::npos ? 0 : std::stoll(e.substr(at + 8));
        s.rewound[g].push_back({id, from});
        s.rewinds[g].push_back(Rewind{id, from, at_ns});
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
    v_.violations[what]++;
    auto& ex = v_.examples[what];
    if (ex.size() < 8) ex.push_back(example);
  }
  void info(const std::string& what, int64_t n = 1) { v_.info[what] += n; }

 private:
  Verdict& v_;
};

std::string where(const std::string& stream, const std::string& group, int64_t id) {
  return stream + "/" + group + " id " + std::to_string(id);
}

// ---- The ordered groups' invariants (order, overlap, early) and the log's key order. ----

// When a host process could not be trusted to hold its leases: SIGSTOPped (until its SIGCONT
// plus the grace it needs to notice its leases are gone) or SIGKILLed.
class Disturbed {
 public:
  Disturbed(const History& h, int64_t stop_grace_ns) {
    for (const auto& d : h.disturbances) {
      windows_[d.pid].push_back({d.from_ns, d.kind == "stop" ? d.to_ns + stop_grace_ns : d.to_ns});
    }
  }
  // Whether pid was disturbed at some time in [from, to].
  bool during(int pid, int64_t from, int64_t to) const {
    auto it = windows_.find(pid);
    if (it == windows_.end()) return false;
    for (const auto& [a, b] : it->second) {
      if (a <= to && from <= b) return true;
    }
    return false;
  }

 private:
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> windows_;
};

class OrderedCheck {
 public:
  OrderedCheck(const CheckInput& in, const History& h, const std::vector<Record>& records, Tally& t)
      : in_(in), h_(h), records_(records), t_(t), disturbed_(h, in.stop_grace_ns) {
    for (const auto& r : records) base_ns_ = std::min(base_ns_, r.start_ns);
  }

  // The key and payload seq of every message known to be committed on `stream`: the table (what
  // retention left), the producers' history (ids they know), the handler calls (every id run).
  std::map<int64_t, KeySeq> keys_of(const std::string& stream, const StreamData& s) const {
    std::map<int64_t, KeySeq> keys = s.keys;
    for (const auto& [tag, p] : h_.produced) {
      if (p.stream == stream && p.id != 0 && p.fate == Fate::kCommitted && !p.key.key.empty()) {
        keys.emplace(p.id, p.key);
      }
    }
    for (const auto& r : records_) {
      if (r.stream == stream && !r.key.empty()) keys.emplace(r.id, KeySeq{r.key, r.seq});
    }
    return keys;
  }

  // log-order: one producer thread writes a key in sequential transactions, so its committed
  // seqs increase with the id. Not the dispatcher's invariant: a violation is in the log.
  void log_order(const std::string& stream, const std::map<int64_t, KeySeq>& keys) {
    std::map<std::string, std::pair<int64_t, int64_t>> last;  // key -> (id, seq)
    for (const auto& [id, k] : keys) {                        // ascending ids
      if (k.seq < 0) continue;
      auto it = last.find(k.key);
      if (it != last.end() && k.seq <= it->second.second) {
        t_.violation("log-order", stream + " key " + k.key + ": id " + std::to_string(id) +
                                      " has seq " + std::to_string(k.seq) + ", earlier id " +
                                      std::to_string(it->second.first) + " seq " +
                                      std::to_string(it->second.second));
      }
      last[k.key] = {id, k.seq};
    }
  }

  void group(const std::string& stream, const StreamData& s, const std::string& g,
             const std::map<int64_t, KeySeq>& keys) {
    const bool hold = in_.ordered.at(stream + "/" + g) == "hold";
    stream_ = &stream;
    group_ = &g;
    // Runs per key, and per message.
    std::map<std::string, std::vector<const Record*>> runs;
    std::map<int64_t, std::vector<const Record*>> runs_of;
    for (const auto& r : records_) {
      if (r.stream != stream || r.group != g) continue;
      runs_of[r.id].push_back(&r);
      if (!r.key.empty()) runs[r.key].push_back(&r);
    }
    std::map<std::string, std::vector<int64_t>> ids;  // key -> its ids, ascending
    for (const auto& [id, k] : keys) ids[k.key].push_back(id);
    const auto rewinds = s.rewinds.find(g);
    // A run of a rewound message that started after the rewind belongs to a history the rewind
    // restarted: not judged (as double-commits excuses rewound spans).
    const auto rewound_run = [&](const Record& r) {
      if (rewinds == s.rewinds.end()) return false;
      for (const auto& w : rewinds->second) {
        if (r.id > w.low && r.id <= w.high && r.start_ns >= w.at_ns) return true;
      }
      return false;
    };
    const auto decided = [&](int64_t id) {
      auto it = s.decided.find({g, id});
      return it == s.decided.end() ? Resolutions{} : it->second;
    };
    const auto dead_at_end = [&](int64_t id) {
      auto it = s.exceptions.find({g, id});
      return it != s.exceptions.end() && it->second.status == "dead";
    };

    for (const auto& [key, key_ids] : ids) {
      // --- order: first successful completions in id order. Messages ever dead, discarded or
      // retried by an operator are left out (under "release" a dead message is passed by
      // design; under "hold" `early` judges the wait for the operator).
      int64_t max_end = kAlways, max_id = 0;
      for (int64_t id : key_ids) {
        const Resolutions d = decided(id);
        if (d.first_dead != kNever || d.first_discard != kNever || d.operator_retried ||
            dead_at_end(id)) {
          continue;
        }
        const Record* first = nullptr;
        for (const Record* r : runs_of[id]) {
          if (r->outcome == "ok" && (!first || r->end_ns < first->end_ns)) first = r;
        }
        if (!first) continue;
        if (first->end_ns < max_end) {
          t_.violation("order", at(id) + " key " + key + ": first succeeded at " +
                                    ms(first->end_ns) + " on " + host(first->pid) +
                                    ", before earlier id " + std::to_string(max_id) + " (" +
                                    ms(max_end) + ")");
        } else {
          max_end = first->end_ns;
          max_id = id;
        }
      }

      // --- early: a run of j starts only when every earlier message i of the key is resolved
      // for its host: i's own successful run on that host ended, or i's resolution was decided
      // (the audit trail's time; another host sees it only once committed, later still). Under
      // "release" a dead i is resolved when it died; under "hold" only when an operator's retry
      // made it succeed or a discard removed it.
      std::vector<int64_t> audit_at(key_ids.size(), kAlways), prefix_max(key_ids.size());
      std::vector<std::vector<std::pair<int, int64_t>>> local(key_ids.size());  // (pid, end)
      for (size_t x = 0; x < key_ids.size(); ++x) {
        const int64_t id = key_ids[x];
        const Resolutions d = decided(id);
        const bool seen = !runs_of[id].empty() || s.decided.count({g, id});
        int64_t a = std::min(d.first_ok, d.first_discard);
        if (!hold) a = std::min(a, d.first_dead);
        if (!seen || (a == kNever && s.allow_drop && !s.messages.count(id))) {
          a = kAlways;  // never delivered, or dropped by retention unresolved: blocks nothing
        } else if (a != kNever) {
          a -= kAuditSlackNs;
        }
        audit_at[x] = a;
        prefix_max[x] = x ? std::max(prefix_max[x - 1], a) : a;
        for (const Record* r : runs_of[id]) {
          const bool final_failure = !hold && d.first_dead != kNever &&
                                     r->attempt == d.dead_attempt && r->outcome != "ok" &&
                                     r->outcome != "hang";
          if (r->outcome == "ok" || final_failure) local[x].push_back({r->pid, r->end_ns});
        }
      }
      const auto index_of = [&](int64_t id) {
        return std::lower_bound(key_ids.begin(), key_ids.end(), id) - key_ids.begin();
      };
      for (const Record* r : runs[key]) {
        if (rewound_run(*r)) continue;
        const auto x = index_of(r->id);
        if (x == 0 || prefix_max[x - 1] <= r->start_ns) continue;
        if (disturbed_.during(r->pid, r->start_ns, r->end_ns)) {
          t_.info("ordered: early runs excused (host stopped/killed)");
          continue;
        }
        for (auto i = x - 1; i >= 0 && prefix_max[i] > r->start_ns; --i) {
          if (audit_at[i] <= r->start_ns) continue;
          bool own = false;
          for (const auto& [pid, end] : local[i])
            own = own || (pid == r->pid && end <= r->start_ns);
          if (own) continue;
          t_.violation("early", at(r->id) + " key " + key + " attempt " +
                                    std::to_string(r->attempt) + " started at " + ms(r->start_ns) +
                                    " on " + host(r->pid) + " while id " +
                                    std::to_string(key_ids[i]) + " was unresolved (" +
                                    resolution(decided(key_ids[i]), hold) + ")");
          break;
        }
      }

      // --- overlap: no two runs of the key at once, except a timed-out (hung) attempt or a run
      // on a host stopped or killed while it ran.
      std::vector<const Record*> sorted;
      for (const Record* r : runs[key]) {
        if (!rewound_run(*r)) sorted.push_back(r);
      }
      std::sort(sorted.begin(), sorted.end(),
                [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
      std::vector<const Record*> active;
      for (const Record* r : sorted) {
        std::erase_if(active, [&](const Record* a) { return a->end_ns <= r->start_ns; });
        for (const Record* a : active) {
          if (excused(*a) || excused(*r)) {
            t_.info("ordered: overlaps excused (timed out, host stopped/killed)");
            continue;
          }
          t_.violation("overlap", at(r->id) + " key " + key + " attempt " +
                                      std::to_string(r->attempt) + " ran " + ms(r->start_ns) +
                                      ".." + ms(r->end_ns) + " on " + host(r->pid) + ", id " +
                                      std::to_string(a->id) + " attempt " +
                                      std::to_string(a->attempt) + " ran " + ms(a->start_ns) +
                                      ".." + ms(a->end_ns) + " on " + host(a->pid));
        }
        active.push_back(r);
      }
    }
  }

 private:
  bool excused(const Record& r) const {
    const bool timed_out =
        r.outcome == "hang" ||
        (behaviour_of(in_.seed, r.group, r.id) == Behaviour::kTimeout && r.attempt == 1);
    return timed_out || disturbed_.during(r.pid, r.start_ns, r.end_ns);
  }
  std::string at(int64_t id) const { return where(*stream_, *group_, id); }
  std::string ms(int64_t ns) const {
    if (ns == kNever) return "never";
    char buf[32];
    std::snprintf(buf, sizeof buf, "+%.3f s", static_cast<double>(ns - base_ns_) / 1e9);
    return buf;
  }
  std::string host(int pid) const {
    auto it = h_.host_of_pid.find(pid);
    return (it == h_.host_of_pid.end() ? std::string("?") : it->second) + " (pid " +
           std::to_string(pid) + ")";
  }
  std::string resolution(const Resolutions& d, bool hold) const {
    return "ok " + ms(d.first_ok) + ", dead " + ms(d.first_dead) + ", discarded " +
           ms(d.first_discard) + (hold ? ", hold" : ", release");
  }

  const CheckInput& in_;
  const History& h_;
  const std::vector<Record>& records_;
  Tally& t_;
  Disturbed disturbed_;
  int64_t base_ns_ = kNever;
  const std::string* stream_ = nullptr;
  const std::string* group_ = nullptr;
};

}  // namespace

bool Verdict::ok() const {
  for (const auto& [k, n] : violations) {
    if (n != 0) return false;
  }
  return true;
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

  // Per key: the log's order, and the ordered groups' order / overlap / early.
  if (!in.ordered.empty()) {
    OrderedCheck ordered(in, h, records, t);
    for (const auto& [name, s] : db) {
      const auto keys = ordered.keys_of(name, s);
      ordered.log_order(name, keys);
      for (const auto& [g, gid] : s.group_ids) {
        if (in.ordered.count(name + "/" + g)) ordered.group(name, s, g, keys);
      }
    }
  }
  if (!in.quiescent) t.info("not quiescent at the end");
  return v;
}

}  // namespace sqlstreams::chaos
