// store/group/group_store — the per-group data plane: observe → prove → claim (the fence,
// docs/design.md#the-claim-fence), reclaim and quarantine of expired range leases
// (docs/design.md#range-leases-and-token-guarded-transitions), token-guarded range commits
// (docs/design.md#range-leases-and-token-guarded-transitions) that can isolate a row the database
// refuses (docs/design.md#poison-proof-commits), lease renewal, and the cursor advancer's two
// statements (docs/design.md#the-committed-cursor-and-the-advancer). A range is handed back by a
// partial commit (resolved_upto = what is done; the rest becomes reclaimable at once). Every lease
// write is guarded by its token: "0 rows" means another host owns it now. Every expiry and due time
// is set and compared on the database's clock (store/core/sql_time.hpp): callers pass durations,
// never instants; a host's own deadlines are steady (SteadyTime).
// Threading: one GroupStore per thread; it uses that thread's Session.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "store/connection/session.hpp"
#include "store/core/statement.hpp"
#include "store/core/stream_tables.hpp"
#include "store/group/fence_holders.hpp"
#include "store/group/ordering_mode.hpp"
#include "store/group/range_cache.hpp"
#include "store/produce/producer.hpp"
#include "store/reporting/group_lifecycle.hpp"

namespace pqxx {
class dbtransaction;
}  // namespace pqxx

namespace sqlstreams::store {

struct StoredMessage {
  int64_t id = 0;
  int64_t created_at_unix_ms = 0;
  int32_t schema_version = 1;
  std::optional<std::string> key;
  std::string payload;
};

// Step 1 of the fence: one statement on a connection with no open transaction.
struct Observation {
  int64_t head = 0;                // max(id) visible to the statement
  std::optional<std::string> xid;  // pg_current_xact_id() taken after head was read (xid8 text)
  int64_t claimed = 0;
  int64_t settled_head = 0;
  bool pending = false;         // an unproven (head, xid) pair is stored
  bool pending_proven = false;  // ... and it was already proven at observation time
  // True when a claim transaction can make progress; false = idle (no write, no xid).
  bool worth_claiming() const { return claimed < settled_head || xid || pending_proven; }
};

struct ClaimedRange {
  std::string token;
  int64_t low = 0;   // exclusive
  int64_t high = 0;  // inclusive
  int32_t reclaims = 0;
  // This host's deadline for the lease (steady clock): taken before the statement that set the
  // database's expiry (database now + lease_ttl), so never later than it.
  SteadyTime deadline{};
  std::vector<StoredMessage> messages;
  // The messages of (low, cached_high] came from a RangeCache (from_cache), the rest from a
  // range read; cached_high == low when nothing came from the cache.
  bool from_cache = false;
  int64_t cached_high = 0;
  // Ordered groups: the text[] literal of the distinct keys of `messages`, built by the claim for
  // the lease's key hashes and reused by gate_keys(); empty = not built.
  std::string key_array;
};

// A claim's byte budget (runtime/store/group/README.md#the-fence, step 4): how many payload bytes
// (octet_length(payload::text), the text the host holds) one claimed range may carry. A range that
// would exceed it ends right after the last message that fits, so the next claim starts at the
// first one that did not: no id is skipped. With `first_always`, a first message larger than
// `bytes` is still claimed, alone (a group is never stuck behind one large message); without it
// (the group already holds bytes) such a claim takes nothing and says so
// (ClaimResult::budget_full).
struct ClaimBudget {
  int64_t bytes = std::numeric_limits<int64_t>::max();
  bool first_always = true;
};

struct ClaimResult {
  std::optional<ClaimedRange> range;  // empty claim: nullopt (the pending slot is still saved)
  int64_t proven = 0;                 // highest proven head after this claim
  bool wrote = false;                 // the cursor row changed
  // The byte budget ended the range before what the fence and the batch allowed (the range is
  // shorter), or (range nullopt) let nothing in: wait until held bytes are freed.
  bool budget_cut = false;
  bool budget_full = false;
  // After a cut (budget_cut or budget_full): the text bytes of the first message the budget
  // left out, which the next claim starts with; 0 when unknown. The claimer waits for that much
  // room before it claims again (a claim with less room reads the range and takes nothing).
  int64_t next_bytes = 0;
};

struct ReclaimResult {
  std::optional<ClaimedRange> range;        // a range to run again
  std::optional<ClaimedRange> quarantined;  // a poison range turned into ready exceptions
  bool found = false;                       // an expired lease existed
};

// kDeferred (ordered groups only): a message that waited behind an unresolved earlier message
// of its key and was not run: attempts 0, due at once; its later run is its first attempt.
// kParked: a message of a schema version its group does not accept (config
// `unaccepted_versions = "keep"`), kept with its payload and never due until a host whose group
// accepts the version releases it (release_parked). Like kDead it does not hold the cursor
// back; unlike kDead it always blocks its key in an ordered group.
enum class ExceptionStatus { kReady, kDead, kDeferred, kParked };

// What gate_keys() found for one key of a range: the key may not run now. blocked_from: the
// lowest unresolved exception row of the key at or below the range's low (run after it: defer);
// gated_by_other: a lease of another holder below the range holds the key (wait, ask again).
struct KeyGate {
  std::string key;
  std::optional<int64_t> blocked_from;
  bool gated_by_other = false;
};

// What the gate found for a range: its keys that may not run now, or that the range's own lease
// is gone (a rewind or a reclaim took it: run nothing of it; its commit will find no token).
struct GateVerdict {
  std::vector<KeyGate> keys;
  bool lease_gone = false;
};

// One non-success outcome of a range, written as an exception row.
struct FailedMessage {
  int64_t message_id = 0;
  ExceptionStatus status = ExceptionStatus::kReady;
  int32_t attempts = 1;
  int32_t delays = 0;
  // Due this long after the commit that writes the row, on the database's clock
  // (can_run_after = database now + run_after; 0 = at once). Ignored for dead rows.
  Millis run_after{0};
  std::string error;
  std::optional<std::string> payload;  // copied when dead
  // Ordered groups only (the host sets it to the message's key): the row's lane_key, which
  // keeps the key blocked while the row is unresolved. nullopt: an unordered row.
  std::optional<std::string> lane_key;
};

struct AuditEntry {
  int64_t message_id = 0;
  int32_t attempt = 1;
  std::string outcome;  // ok | retry | delay | dead
  std::string error;
  SysTime at{};  // when the outcome was decided (a record on the host's clock; {} = the commit's
                 // database time)
};

// One message a handler emitted during a call whose OK outcome this commit writes
// (docs/operating/emits.md): checked when emitted, written to `stream` in the same transaction as
// the outcome, and only if its lease or row token still matched.
struct EmittedMessage {
  std::string stream;
  NewMessage message;
};

struct RangeCommit {
  std::string token;
  int64_t resolved_upto = 0;  // == high for a complete range; less = partial (shutdown)
  bool complete = true;
  std::vector<FailedMessage> failures;
  std::vector<AuditEntry> audit;
  // The outputs of the succeeded messages up to resolved_upto, in id order then emit order.
  std::vector<EmittedMessage> outputs;
};

// A due exception row claimed for another attempt (status set to `inflight` under a row lease).
struct RetryClaim {
  int64_t message_id = 0;
  int32_t attempts = 0;  // attempts recorded so far (an expired in-flight attempt is counted)
  int32_t delays = 0;
  std::string token;
  SteadyTime deadline{};          // this host's deadline for the row lease (as ClaimedRange)
  bool expired_inflight = false;  // the previous holder died while running it
  std::string last_error;
  std::optional<StoredMessage> message;  // nullopt when the log no longer has it
  std::optional<std::string> lane_key;   // the row's lane_key (ordered groups), as stored
  bool deferred = false;                 // the row was `deferred` (never run), not failed
  // Ordered groups: claimed behind the row before it of its key in the same claim (a retry
  // chain: runtime/store/group/README.md#per-key-ordering); it runs only after that row succeeded.
  bool chained = false;
};

// The result of one retry attempt, written under the row's lease token.
struct RetryResult {
  int64_t message_id = 0;
  std::string token;
  std::optional<FailedMessage> decision;  // nullopt = success: the row is deleted
  // Not started: back to `ready`, nothing counted (a row with a lane_key that never ran —
  // attempts 0 — back to `deferred`).
  bool hand_back = false;
  std::optional<AuditEntry> audit;
  // RetryClaim::chained: a success is applied only if no unresolved row of its key below it
  // is left (its chain's earlier rows succeed in this commit or before); otherwise the row goes
  // back to `deferred` and the result reports not committed.
  bool chained = false;
  std::vector<EmittedMessage> outputs;  // a success's outputs, in emit order
};

// Statement 1 of the cursor advancer, read in one snapshot.
struct AdvanceTarget {
  int64_t committed = 0;   // `committed` when read
  int64_t target = 0;      // LEAST(min lease low, min open exception - 1, claimed)
  int64_t generation = 0;  // the cursor generation read with it (every rewind bumps it)
};

// A write the database refused deterministically (SQLSTATE class 22/23) in an isolating commit:
// the message was recorded `dead` with `error` ("commit rejected: <sqlstate> <message>", or a
// fixed ASCII text without a payload copy when even that was refused).
struct RejectedWrite {
  int64_t message_id = 0;
  std::string sqlstate;
  std::string error;        // what was recorded
  bool audit_only = false;  // only the audit row was refused (the outcome itself was written)
};

// A range commit whose COMMIT outcome is unknown (in doubt: the connection broke during it).
struct InDoubtCommit {
  std::string xid;              // the transaction's xid8, for pg_xact_status
  std::vector<bool> committed;  // per range (or retry result), what the commit would report
};
enum class InDoubtResolution { kCommitted, kAborted, kUnknown };

struct AdvanceResult {
  int64_t committed_before = 0;
  int64_t committed_after = 0;
};

class GroupStore {
 public:
  GroupStore(Session& session, int64_t stream_id, int64_t group_id, std::string holder);

  // Per-key ordering (default kNone). Set before the first claim; with kNone every statement
  // is the unordered one. Otherwise: claims and reclaims keep the range's key hashes on the
  // lease, quarantine writes lane_key, claim_due_retries() takes only the lowest unresolved
  // row of a key that no lease below it holds, and gate_keys() may be asked.
  void set_ordering(OrderingMode mode) { ordering_ = mode; }
  OrderingMode ordering() const { return ordering_; }

  // For each distinct non-null key of `range`'s messages that may not run now, in one
  // statement (one snapshot: runtime/store/group/README.md#per-key-ordering): blocked_from = the
  // lowest message id of an unresolved row (ready, inflight, deferred; dead too under kKeyHold) of
  // the group with lane_key = key and message_id <= range.low; gated_by_other = a lease of the
  // group with low < range.low, token not in `own_tokens`, whose key_hashes hold hashtext(key),
  // expired or not. Keys absent from the result are free. Read-only; no transaction is left open.
  // In the same snapshot it also checks that the range's own lease (range.token) still exists
  // (gate_range: lease_gone); gate_keys() returns the keys only (tests).
  [[nodiscard]] GateVerdict gate_range(const ClaimedRange& range,
                                       const std::vector<std::string>& own_tokens);
  [[nodiscard]] std::vector<KeyGate> gate_keys(const ClaimedRange& range,
                                               const std::vector<std::string>& own_tokens);
  // TEST ONLY: the unsafe form of gate_keys() — rows in one statement, then leases in another,
  // `between` called in between — kept as the regression guard for why it is one statement
  // (an earlier range committing a failure in between makes both reads empty), and run by
  // gate_keys() under the chaos plant `ordering-split-gate`.
  [[nodiscard]] std::vector<KeyGate> gate_keys_split(const ClaimedRange& range,
                                                     const std::vector<std::string>& own_tokens,
                                                     const std::function<void()>& between);

  Observation observe();
  // The open producers that hold the group's pending observation back (oldest first; empty when
  // none is pending or it is proven by now). Rare path: for the fence-held log line.
  std::vector<FenceHolder> fence_holders();
  // A lease expires at database now + lease_ttl (every expiry is on the database's clock).
  // With a `cache` (docs/design.md#sharing-a-range-read): when it covers a prefix of the range the
  // fence allows, the claim takes just that prefix (never more than the fence allows) and its
  // messages instead of reading them; otherwise it reads the range and offers the read to the
  // cache. The cursor update and the lease are written the same way in both cases.
  // `budget` (ClaimBudget): the range ends after the last message whose payload bytes fit —
  // decided by the read statement itself (the rows past the cut are never sent), or by cutting
  // a cached prefix — and the cursor and the lease end exactly there.
  [[nodiscard]] ClaimResult claim(const Observation& obs, int32_t batch, Millis lease_ttl,
                                  RangeCache* cache = nullptr, ClaimBudget budget = {});

  // Takes the oldest lease of the group expired by the database's clock: rotates its token,
  // bumps `reclaims` (not for a handed-back lease) and extends it. A lease reaching
  // max_reclaims is quarantined: each of its messages becomes a `ready` exception (due at once)
  // and the lease is deleted. With a `cache`, a range it covers in full is not read again
  // (a reclaim never fills the cache).
  [[nodiscard]] ReclaimResult reclaim_expired(Millis lease_ttl, int32_t max_reclaims,
                                              RangeCache* cache = nullptr);

  // One transaction for all ranges. Returns, per range, true when committed, false when its
  // lease was lost (its outcomes were discarded). A committed range first deletes the old
  // exception rows of its resolved span that no retry lease holds (a re-delivery after a
  // rewind: its new outcome replaces the old one, a success removes an old dead letter); a row
  // `inflight` under a live retry lease is left to that lease's holder.
  // With `isolate`, each range's rows and each row are written under their own savepoint: a
  // row the database refuses deterministically is recorded dead instead (see RejectedWrite,
  // appended to *isolate) and the rest commits. Throws StoreError as usual otherwise; on
  // kInDoubt, in_doubt() describes the transaction.
  [[nodiscard]] std::vector<bool> commit_ranges(const std::vector<RangeCommit>& ranges,
                                                std::vector<RejectedWrite>* isolate = nullptr);

  // The last commit_ranges or commit_retries whose COMMIT was in doubt (cleared by the next
  // commit of either kind).
  const std::optional<InDoubtCommit>& in_doubt() const { return in_doubt_; }
  // Asks the database (pg_xact_status) what became of it; throws StoreError while unreachable
  // or while the transaction is still finishing. Clears in_doubt() unless it throws.
  InDoubtResolution resolve_in_doubt();

  // Extends the leases to database now + lease_ttl; returns the tokens that are no longer ours.
  [[nodiscard]] std::vector<std::string> renew_leases(const std::vector<std::string>& tokens,
                                                      Millis lease_ttl);

  // Claims up to `limit` due exception rows (`ready` and due, or `inflight` whose row lease
  // expired, both by the database's clock) with FOR UPDATE SKIP LOCKED; sets them `inflight`
  // under a fresh token whose row lease expires at database now + lease_ttl.
  // `pick` narrows it: kReady only due `ready` rows; kSuspects only `inflight` rows whose lease
  // expired (their host stopped while running them: maybe killed by that very message).
  // Reclaiming an expired `inflight` row counts its unfinished attempt — unless the row's budget
  // (`attempts - delays > max_retries`) was already spent: then the lost holder had only claimed
  // it to record it dead, ran no handler, and the count stays.
  // Ordered groups: `deferred` rows are due at once (kAll, kReady), and a row with a lane_key
  // is taken only while no other unresolved row of its key has a lower id (dead counts under
  // kKeyHold) and no lease of the group (any holder, this one too) with low < its id holds its
  // key — one statement; an inflight row is unresolved, so at most a key's lowest row is
  // eligible. Rows come back in id order. `chain` > 0 (ordered groups, not suspects): each
  // head also takes up to `chain` following rows of its key, in id order, while each is
  // `deferred` and no earlier lease holds the key (RetryClaim::chained); all count in `limit`.
  enum class RetryPick { kAll, kReady, kSuspects };
  [[nodiscard]] std::vector<RetryClaim> claim_due_retries(Millis lease_ttl, int32_t limit,
                                                          RetryPick pick = RetryPick::kAll,
                                                          int32_t max_retries = kNoRetryBudget,
                                                          int32_t chain = 0);
  static constexpr int32_t kNoRetryBudget = 1 << 30;
  // Ordered groups: the last claim_due_retries() (not suspects) walked the group's keys only
  // part of the way (its room filled, or its step budget ran out), so the next claim, which
  // goes on from where it stopped, may find more at once. False for unordered groups.
  bool retry_claim_left_keys() const { return retry_walk_more_; }

  // Time from database now until the next exception row becomes claimable (a `ready` row's
  // due time or an `inflight` row's lease expiry; <= 0 when one is claimable already); nullopt
  // when the group has none. Read-only: lets an idle retry loop sleep exactly as long as it may.
  // `deferred` rows are not counted (whether one may run depends on other rows and leases, not
  // on time): an ordered group's retry loop finds them at its next poll.
  std::optional<Millis> next_retry_due();

  // Parked rows of `versions` (every parked row when nullopt: the group skips unaccepted
  // versions) become `ready`, due now: the retry loop runs them (or passes them over) like any
  // retry. One index probe (parked rows sit at can_run_after = 'infinity' in exceptions_N_due).
  // Returns how many rows moved.
  int64_t release_parked(const std::optional<std::vector<int32_t>>& versions);

  // Writes retry results in one transaction; per result true when the token still matched.
  // `isolate` as for commit_ranges: a refused row is recorded dead under its token. Throws
  // StoreError as usual; on kInDoubt, in_doubt() describes the transaction (resolve it with
  // resolve_in_doubt(), as for commit_ranges).
  [[nodiscard]] std::vector<bool> commit_retries(const std::vector<RetryResult>& results,
                                                 std::vector<RejectedWrite>* isolate = nullptr);

  // Extends row leases of running retries to database now + lease_ttl; returns the tokens that
  // are no longer ours.
  [[nodiscard]] std::vector<std::string> renew_retry_leases(const std::vector<std::string>& tokens,
                                                            Millis lease_ttl);

  // committed = GREATEST(committed, LEAST(min lease low, min open exception - 1, claimed)):
  // read_advance_target() then apply_advance().
  AdvanceResult advance_cursor();
  // Statement 1: the target, with the cursor generation it was computed under (all 0 when the
  // group has no cursor row: it was dropped, and there is nothing to advance).
  AdvanceTarget read_advance_target();
  // Statement 2: moves committed up to the target only if the cursor generation is still the
  // one read (no rewind in between: a rewind plus a fresh claim keeps `claimed >= target` true,
  // so that alone cannot guard). Returns true when committed moved.
  [[nodiscard]] bool apply_advance(const AdvanceTarget& target);

  // The group's row (store/group_lifecycle read_group_state): paused by an operator, or gone.
  GroupState state();

  // Blocks up to `timeout` for a NOTIFY on the stream's channel (LISTENs on first use).
  // Returns true when woken by a notification.
  bool wait_for_notify(Millis timeout);

 private:
  Session& session_;
  int64_t stream_id_;
  int64_t group_id_;
  std::string holder_;
  StreamTables tables_;
  // The hot statements (observe, claim, range read, reclaim, range commits, lease renewal, the
  // advancer): text built once in group_store.cpp, prepared once per connection on first use
  // (store/core/pq.hpp exec_prepared()). Named sqlstreams_<name>_<stream id>
  // (store/core/statement.hpp): the text depends on nothing else. count_range_ runs only when a
  // claim is served from a RangeCache. claim_update_lease_ is claim_update_ and the range's lease
  // in one statement, claim_update_lease_keys_ the same with the range's key hashes (ordered
  // groups); gate_ is gate_keys()'s statement, gate_anything_ its keyless first check.
  // read_checked_ is a claim's read when the range is far below its byte budget, read_budget_
  // the read that cuts it (the budget's running sum); read_range_ re-reads a reclaimed lease's
  // whole range.
  Statement observe_, claim_lock_, claim_update_, claim_update_lease_, claim_update_lease_keys_,
      read_range_, read_budget_, read_checked_, count_range_, reclaim_, commit_complete_,
      commit_partial_, renew_, advance_read_, advance_apply_, gate_, gate_anything_;
  OrderingMode ordering_ = OrderingMode::kNone;
  // The ordered retry claim's key walk (README "The key walk"): the key after which the next
  // walk starts, and whether the last one stopped before it had looked at every key. Touched
  // only by claim_due_retries() (the retry loop's thread).
  std::string retry_walk_start_;
  bool retry_walk_more_ = false;
  static constexpr int32_t kRetryWalkSteps = 1000;
  std::optional<InDoubtCommit> in_doubt_;
  // Writes the outputs of a commit (emits.cpp); made on the first commit that has any.
  std::unique_ptr<Producer> emitter_;
  // Before a commit's transaction: looks up every target stream of `outputs` (a statement of its
  // own). In it: owns an xid (Rule 1) and inserts them, one statement per stream, in order; returns
  // per stream the highest id and the count (for make_room_after() once it committed).
  void prepare_outputs(const std::vector<const EmittedMessage*>& outputs);
  std::map<std::string, std::pair<int64_t, size_t>> write_outputs(
      pqxx::dbtransaction& tx, const std::vector<const EmittedMessage*>& outputs);
  void make_room_after(const std::map<std::string, std::pair<int64_t, size_t>>& written);
};

}  // namespace sqlstreams::store
