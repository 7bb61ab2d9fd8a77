// bench/peers_bench — the peer rows of the table (bench/README.md#peers-phase-9): reads the JSON
// that bench/peers/run.sh wrote (graphile-worker and pg-boss measured on the same server just
// before sqlstreams_bench ran) and sets each peer's enqueue, batched drain and NOTIFY pickup beside
// the runtime's figures of the same run (recorded by the produce, drain and latency phases), with
// the ratio to the best peer. A peer that failed to install or run is a row that says why.
#include <fmt/format.h>

#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "bench.hpp"

namespace bench {
namespace {

std::mutex recorded_mu;
std::map<std::string, double>& recorded_figures() {
  static std::map<std::string, double> figures;
  return figures;
}

struct Peer {
  std::string label;  // "graphile-worker 0.18.0"
  double enqueue = 0, drain = 0, p50 = 0, p99 = 0;
  int64_t n = 0;
  double load_p99 = 0, load_per_s = 0;  // pickup under background load
  int64_t load_left = 0;                // jobs not done when that pickup ended
};

// One comparison row: the runtime's figure, every peer's (with `detail` of the peer after it,
// when given), the ratio to the best peer.
Row compare(const std::string& workload, std::optional<double> ours, const std::vector<Peer>& peers,
            double Peer::*field, bool higher_is_better,
            const std::function<std::string(double)>& show,
            const std::function<std::string(const Peer&)>& detail = nullptr) {
  std::string theirs;
  std::optional<double> best;
  for (const Peer& p : peers) {
    const double v = p.*field;
    theirs += fmt::format("{}{}: {}{}", theirs.empty() ? "" : "; ", p.label, show(v),
                          detail && v > 0 ? detail(p) : "");
    if (v > 0 && (!best || (higher_is_better ? v > *best : v < *best))) best = v;
  }
  std::string ratio = "—";
  if (ours && best && *ours > 0) {
    ratio = fmt_ratio(higher_is_better ? *ours / *best : *best / *ours) + " of the best peer";
  }
  return Row{"9 peers",
             workload,
             ours ? show(*ours) : "not measured in this run",
             theirs.empty() ? "—" : theirs,
             ratio,
             ""};
}

}  // namespace

void record(const std::string& key, double value) {
  std::lock_guard lock(recorded_mu);
  recorded_figures()[key] = value;
}

std::optional<double> recorded(const std::string& key) {
  std::lock_guard lock(recorded_mu);
  auto it = recorded_figures().find(key);
  if (it == recorded_figures().end()) return std::nullopt;
  return it->second;
}

std::vector<Row> peer_rows(const Options& o) {
  std::ifstream in(o.peers_file);
  if (!in) throw std::runtime_error("cannot read the peers' results " + o.peers_file);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(
        fmt::format("{}: not the JSON of bench/peers: {}", o.peers_file, e.what()));
  }
  std::vector<Peer> peers;
  for (const auto& p : doc.value("peers", nlohmann::json::array())) {
    peers.push_back(Peer{p.at("name").get<std::string>() + " " + p.at("version").get<std::string>(),
                         p.value("enqueue_per_s", 0.0), p.value("drain_per_s", 0.0),
                         p.value("pickup_p50_ms", 0.0), p.value("pickup_p99_ms", 0.0),
                         p.value("pickup_n", int64_t{0}), p.value("load_pickup_p99_ms", 0.0),
                         p.value("load_per_s", 0.0), p.value("load_left", int64_t{0})});
  }
  std::vector<Row> rows;
  for (const auto& e : doc.value("errors", nlohmann::json::array())) {
    rows.push_back(Row{"9 peers", "not measured", "—", e.get<std::string>(), "—", ""});
  }
  if (peers.empty()) return rows;
  auto per_s = [](double v) { return rate(v); };
  auto ms = [](double v) { return fmt::format("{:.1f} ms", v); };
  rows.push_back(compare("enqueue, 100 B, batches of 500 (runtime: phase 1 produce)",
                         recorded("produce_100b"), peers, &Peer::enqueue, true, per_s));
  rows.push_back(
      compare("batched drain of a 100 B backlog, no-op handler (runtime: phase 2, "
              "until cursor `committed` = head)",
              recorded("drain_cursor"), peers, &Peer::drain, true, per_s));
  rows.push_back(compare(fmt::format("pickup p50 with NOTIFY, {} msgs/s, one per transaction "
                                     "(runtime: phase 4 notify)",
                                     o.latency_rate),
                         recorded("pickup_notify_p50"), peers, &Peer::p50, false, ms));
  rows.push_back(compare("pickup p99 with NOTIFY, same run", recorded("pickup_notify_p99"), peers,
                         &Peer::p99, false, ms));
  // Under load: each peer's p99 with the load rate it reached and what its worker left undone
  // (a worker that does not keep up queues the paced jobs behind the load).
  auto load_reached = [](const Peer& p) {
    return fmt::format(" ({} load, {} left)", rate(p.load_per_s), p.load_left);
  };
  rows.push_back(compare(fmt::format("pickup p99 with NOTIFY under {} msgs/s of background load "
                                     "(runtime: phase pickup_load, 4 groups)",
                                     grouped(o.pickup_load_rate)),
                         recorded("pickup_load_p99"), peers, &Peer::load_p99, false, ms,
                         load_reached));
  return rows;
}

}  // namespace bench
