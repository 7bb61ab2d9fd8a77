#include "ordered_check.hpp"

#include <algorithm>
#include <cstdio>

#include "chaos_plugin.hpp"

namespace sqlstreams::chaos {
namespace {

constexpr int64_t kAlways = std::numeric_limits<int64_t>::min();
// The audit trail's `at` is the deciding host's clock in whole milliseconds, converted from
// CLOCK_REALTIME to CLOCK_MONOTONIC with the offset of the two when the checker runs (measured
// on a 45 s run, 44,140 ok rows: `at` is 0-1 ms before the end of the call it records, never
// earlier): a call is judged against it with this much slack.
constexpr int64_t kAuditSlackNs = 2'000'000;

std::string ordered_where(const std::string& stream, const std::string& group, int64_t id) {
  return stream + "/" + group + " id " + std::to_string(id);
}

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
  OrderedCheck(const OrderedSettings& in, const History& h, const std::vector<CallRecord>& records,
               Verdict& v)
      : in_(in), h_(h), records_(records), v_(v), disturbed_(h, in.stop_grace_ns) {
    for (const auto& r : records) base_ns_ = std::min(base_ns_, r.start_ns);
  }

  // The key and payload seq of every message known to be committed on `stream`: the table (what
  // retention left), the producers' history (ids they know), the handler calls (every id run).
  std::map<int64_t, KeySeq> keys_of(const std::string& stream, const OrderedStream& s) const {
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
        v_.violation("log-order", stream + " key " + k.key + ": id " + std::to_string(id) +
                                      " has seq " + std::to_string(k.seq) + ", earlier id " +
                                      std::to_string(it->second.first) + " seq " +
                                      std::to_string(it->second.second));
      }
      last[k.key] = {id, k.seq};
    }
  }

  void group(const std::string& stream, const OrderedStream& s, const std::string& g,
             const std::map<int64_t, KeySeq>& keys) {
    const bool hold = in_.ordered.at(stream + "/" + g) == "hold";
    stream_ = &stream;
    group_ = &g;
    // Runs per key, and per message.
    std::map<std::string, std::vector<const CallRecord*>> runs;
    std::map<int64_t, std::vector<const CallRecord*>> runs_of;
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
    const auto rewound_run = [&](const CallRecord& r) {
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
    const auto dead_at_end = [&](int64_t id) { return s.dead_at_end.count({g, id}) != 0; };
    // Retention removed it unresolved (allow_drop_past_committed): no committed outcome and gone
    // from the log at the end. It blocks nothing; a host that held it when the sweep ran may
    // still run it, beside or after its successors, and that run commits nothing.
    const auto swept = [&](int64_t id) {
      const Resolutions d = decided(id);
      return s.allow_drop && !s.stored.count(id) && d.first_ok == kNever &&
             d.first_dead == kNever && d.first_discard == kNever;
    };
    // Under "release" a dead letter that an operator retries re-enters after its successors
    // ran: its calls after it died may run beside them (not judged by overlap).
    const auto revived = [&](const CallRecord& r) {
      if (hold) return false;
      const Resolutions d = decided(r.id);
      return d.operator_retried && d.first_dead != kNever && r.start_ns > d.first_dead;
    };

    for (const auto& [key, key_ids] : ids) {
      // --- order: first successful completions in id order. Messages ever dead, discarded or
      // retried by an operator are left out (under "release" a dead message is passed by
      // design; under "hold" `early` judges the wait for the operator), and so are messages
      // retention dropped unresolved under allow_drop_past_committed (no committed outcome,
      // gone at the end: as for `early`, they block nothing; a host that held one when the
      // sweep removed it may still run it, after its successors, and its outcome commits
      // nothing).
      int64_t max_end = kAlways, max_id = 0;
      for (int64_t id : key_ids) {
        const Resolutions d = decided(id);
        if (d.first_dead != kNever || d.first_discard != kNever || d.operator_retried ||
            dead_at_end(id)) {
          continue;
        }
        if (swept(id)) continue;
        const CallRecord* first = nullptr;
        for (const CallRecord* r : runs_of[id]) {
          if (r->outcome == "ok" && (!first || r->end_ns < first->end_ns)) first = r;
        }
        if (!first) continue;
        if (first->end_ns < max_end) {
          v_.violation("order", at(id) + " key " + key + ": first succeeded at " +
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
        if (!seen || (a == kNever && s.allow_drop && !s.stored.count(id))) {
          a = kAlways;  // never delivered, or dropped by retention unresolved: blocks nothing
        } else if (a != kNever) {
          a -= kAuditSlackNs;
        }
        audit_at[x] = a;
        prefix_max[x] = x ? std::max(prefix_max[x - 1], a) : a;
        for (const CallRecord* r : runs_of[id]) {
          const bool final_failure = !hold && d.first_dead != kNever &&
                                     r->attempt == d.dead_attempt && r->outcome != "ok" &&
                                     r->outcome != "hang";
          if (r->outcome == "ok" || final_failure) local[x].push_back({r->pid, r->end_ns});
        }
      }
      const auto index_of = [&](int64_t id) {
        return std::lower_bound(key_ids.begin(), key_ids.end(), id) - key_ids.begin();
      };
      for (const CallRecord* r : runs[key]) {
        if (rewound_run(*r)) continue;
        const auto x = index_of(r->id);
        if (x == 0 || prefix_max[x - 1] <= r->start_ns) continue;
        if (disturbed_.during(r->pid, r->start_ns, r->end_ns)) {
          v_.add_info("ordered: early runs excused (host stopped/killed)");
          continue;
        }
        for (auto i = x - 1; i >= 0 && prefix_max[i] > r->start_ns; --i) {
          if (audit_at[i] <= r->start_ns) continue;
          bool own = false;
          for (const auto& [pid, end] : local[i])
            own = own || (pid == r->pid && end <= r->start_ns);
          if (own) continue;
          v_.violation("early", at(r->id) + " key " + key + " attempt " +
                                    std::to_string(r->attempt) + " started at " + ms(r->start_ns) +
                                    " on " + host(r->pid) + " while id " +
                                    std::to_string(key_ids[i]) + " was unresolved (" +
                                    resolution(decided(key_ids[i]), hold) + ")");
          break;
        }
      }

      // --- overlap: no two runs of the key at once, except a timed-out (hung) attempt, a run
      // on a host stopped or killed while it ran, or a run of a message retention swept.
      std::vector<const CallRecord*> sorted;
      for (const CallRecord* r : runs[key]) {
        if (!rewound_run(*r)) sorted.push_back(r);
      }
      std::sort(sorted.begin(), sorted.end(),
                [](const CallRecord* a, const CallRecord* b) { return a->start_ns < b->start_ns; });
      std::vector<const CallRecord*> active;
      for (const CallRecord* r : sorted) {
        std::erase_if(active, [&](const CallRecord* a) { return a->end_ns <= r->start_ns; });
        for (const CallRecord* a : active) {
          if (excused(*a) || excused(*r)) {
            v_.add_info("ordered: overlaps excused (timed out, host stopped/killed)");
            continue;
          }
          if (revived(*a) || revived(*r)) {
            v_.add_info("ordered: overlaps excused (dead letter retried by an operator)");
            continue;
          }
          if (swept(a->id) || swept(r->id)) {
            v_.add_info("ordered: overlaps excused (a run of a message retention dropped)");
            continue;
          }
          v_.violation("overlap", at(r->id) + " key " + key + " attempt " +
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
  bool excused(const CallRecord& r) const {
    const bool timed_out =
        r.outcome == "hang" ||
        (behaviour_of(in_.seed, r.group, r.id) == Behaviour::kTimeout && r.attempt == 1);
    return timed_out || disturbed_.during(r.pid, r.start_ns, r.end_ns);
  }
  std::string at(int64_t id) const { return ordered_where(*stream_, *group_, id); }
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

  const OrderedSettings& in_;
  const History& h_;
  const std::vector<CallRecord>& records_;
  Verdict& v_;
  Disturbed disturbed_;
  int64_t base_ns_ = kNever;
  const std::string* stream_ = nullptr;
  const std::string* group_ = nullptr;
};

}  // namespace

void check_ordered(const OrderedSettings& settings, const History& history,
                   const std::map<std::string, OrderedStream>& streams,
                   const std::vector<CallRecord>& records, Verdict& v) {
  OrderedCheck check(settings, history, records, v);
  for (const auto& [name, s] : streams) {
    const auto keys = check.keys_of(name, s);
    check.log_order(name, keys);
    for (const auto& [stream_group, dead_policy] : settings.ordered) {
      const auto slash = stream_group.find('/');
      if (stream_group.substr(0, slash) == name) {
        check.group(name, s, stream_group.substr(slash + 1), keys);
      }
    }
  }
}

}  // namespace sqlstreams::chaos
