// tests/chaos — the producers of the chaos workload, one thread per produce path:
//   sql-tx   sqlstreams.produce() in explicit multi-statement transactions; some roll back,
//            some sleep inside (holding their ids open while later ids commit)
//   batch    sqlstreams.produce_batch() in its own transaction
//   cpp      the C++ store::Producer (produce_batch with partition healing)
//   cli      `sqlstreams produce STREAM` with NDJSON on stdin
//   idem     batches with an idempotency key per message (the key is the message's tag),
//            alternately through store::Producer and sqlstreams.produce_batch(); a batch that
//            fails (in doubt, or refused while the database restarts) is sent again with the
//            same keys until it succeeds; one batch in four is also sent by a twin through
//            the other path at once (checker invariant `idempotency`: no key twice, and the
//            twin answered with the same ids)
// and the application beside them: a writer of its own table (public.chaos_app) that holds its
// transaction open for seconds, and sql-tx transactions that write that table before they
// produce (an xid older than the observations that must be proven past them).
// Every payload is {"tag": "<path>-<n>", "pad": "..."}; each tag's fate (committed, rolled back,
// in doubt when the connection died during COMMIT) goes into the History.
// Keyed (the ordered workload, ChaosOptions::ordered): each thread owns its keys — 4 hot keys
// ("<thread>-hot-<n>", 16 over the four non-CLI threads) and 1,500 cold ones
// ("<thread>-cold-<n>"; the CLI thread 500, one key per invocation since --key applies to every
// line) — and draws about 20% hot, 60% cold, 20% keyless. A keyed payload carries
// "k": key and "seq": n, n counting up per (stream, key) in the order the thread produced them.
// A rolled-back or in-doubt message spends its seq: the committed seqs of a key have gaps but,
// one thread producing the key in sequential transactions, increase with the id.
// Threading: Producers owns its threads; stop() joins them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "history.hpp"

namespace sqlstreams::chaos {

class Producers {
 public:
  // keyed: the ordered workload's keys; hot_keys: kHotKeys of them per thread get a fifth of the
  // messages (ChaosOptions::hot_keys).
  Producers(std::string url, uint64_t seed, History& history, bool keyed, bool hot_keys = true);
  ~Producers();
  void start();
  void stop();
  int64_t attempted() const { return attempted_.load(); }
  int64_t unrelated_commits() const { return unrelated_commits_.load(); }
  // The C++ store::Producer and the CLI (which uses it) create partitions ahead as they write;
  // while held, they wait and only the SQL paths produce, which never create a partition (the
  // all-down fault holds them until ids land past the partitions, in a default partition).
  void hold_healing_paths(bool held) { healing_held_ = held; }

 private:
  void sql_tx_loop(uint64_t seed, const char* keys);
  void batch_loop(uint64_t seed);
  void cpp_loop(uint64_t seed);
  void cli_loop(uint64_t seed);
  void idem_loop(uint64_t seed);
  void unrelated_writer_loop(uint64_t seed);
  std::string next_tag(const char* path);

  // One producer thread's keys and their sequence numbers.
  class Keys {
   public:
    Keys(std::string prefix, int hot, int cold, bool keyed)
        : prefix_(std::move(prefix)),
          hot_(hot),
          cold_(cold),
          keyed_(keyed),
          began_(std::chrono::steady_clock::now()) {}
    // A key for one message (hot, cold or none), with its next seq on `stream`.
    KeySeq pick(uint64_t r, const std::string& stream);
    // The hot key `n` of the generation `elapsed` falls in (see kHotKeyGeneration).
    std::string hot_key(uint64_t n, std::chrono::steady_clock::duration elapsed) const;
    // A cold key (or none) for every message of one CLI invocation.
    std::string pick_key(uint64_t r);
    KeySeq next(const std::string& stream, const std::string& key);

   private:
    std::string prefix_;
    int hot_, cold_;
    bool keyed_;
    std::chrono::steady_clock::time_point began_;
    std::map<std::string, int64_t> next_seq_;  // "<stream>/<key>" -> the next seq
  };

  std::string url_;
  uint64_t seed_;
  History& history_;
  bool keyed_;
  int hot_keys_;  // hot keys per producer thread
  std::atomic<bool> stop_{false};
  std::atomic<bool> healing_held_{false};
  std::atomic<int64_t> counter_{0}, attempted_{0}, unrelated_commits_{0};
  std::vector<std::thread> threads_;
};

}  // namespace sqlstreams::chaos
