// `sqlstreams produce STREAM [JSON]`: one document as an argument, or NDJSON on stdin sent in
// batches (one multi-row INSERT each). Every line of a batch is checked before the batch is
// sent: a bad line stops the command, naming the line, and nothing of its batch is written.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "store/producer.hpp"

namespace sqlstreams::cli {
namespace {

struct ProduceFlags {
  DatabaseFlags db;
  std::string stream;
  std::string json;
  int batch_size = 500;
  int schema_version = 1;
  std::string key;
};

class BadInput : public ControlPlaneError {
 public:
  explicit BadInput(std::string msg)
      : ControlPlaneError(ExitCode::kData, std::move(msg), "fix the input and run again") {}
};

// Parses one document; returns its compact form. Throws BadInput naming `where`.
std::string checked_payload(const std::string& text, const std::string& where,
                            int32_t max_bytes) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw BadInput(fmt::format("{}: invalid JSON: {}", where, e.what()));
  }
  if (!doc.is_object()) {
    throw BadInput(fmt::format("{}: payload must be a JSON object (got {})", where, doc.type_name()));
  }
  std::string compact = doc.dump();
  if (max_bytes > 0 && static_cast<int64_t>(compact.size()) > max_bytes) {
    throw BadInput(fmt::format("{}: payload of {} bytes exceeds the stream's max_payload_bytes {}",
                               where, compact.size(), max_bytes));
  }
  return compact;
}

int produce(const ProduceFlags& f) {
  auto config = maybe_load(f.db.config_file);
  store::Session session(f.db.resolve(config));
  auto stream = store::find_stream(session, f.stream);
  if (!stream) {
    throw ControlPlaneError(ExitCode::kData, fmt::format("unknown stream '{}'", f.stream),
                            "declare it first: sqlstreams declare --config FILE");
  }
  store::Producer producer(session);
  std::optional<std::string> key;
  if (!f.key.empty()) key = f.key;
  if (!f.json.empty()) {
    auto payload = checked_payload(f.json, "argument", stream->max_payload_bytes);
    auto id = producer.produce(f.stream, {payload, f.schema_version, key});
    std::printf("%lld\n", static_cast<long long>(id));
    return 0;
  }
  const bool tty = isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  std::vector<store::NewMessage> batch;
  int64_t line_no = 0, sent = 0;
  std::string line;
  auto flush = [&] {
    if (batch.empty()) return;
    producer.produce_batch(f.stream, batch);
    sent += static_cast<int64_t>(batch.size());
    batch.clear();
    auto now = std::chrono::steady_clock::now();
    if (tty && now - last_progress > std::chrono::milliseconds(200)) {
      double secs = std::chrono::duration<double>(now - started).count();
      std::fprintf(stderr, "\rproduced %lld messages (%.0f/s)", static_cast<long long>(sent),
                   secs > 0 ? sent / secs : 0.0);
      last_progress = now;
    }
  };
  try {
    while (std::getline(std::cin, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      batch.push_back({checked_payload(line, fmt::format("stdin:{}", line_no),
                                       stream->max_payload_bytes),
                       f.schema_version, key});
      if (static_cast<int>(batch.size()) >= f.batch_size) flush();
    }
    flush();
  } catch (...) {
    if (tty) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "produced %lld message(s) before the error; the failing batch was not "
                         "written\n", static_cast<long long>(sent));
    throw;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (tty) std::fprintf(stderr, "\r");
  std::fprintf(stderr, "produced %lld messages in %.2fs\n", static_cast<long long>(sent), secs);
  return 0;
}

}  // namespace

void register_produce(CLI::App& app, Action& action) {
  auto f = std::make_shared<ProduceFlags>();
  auto* cmd = app.add_subcommand(
      "produce", "Append messages: one JSON object as an argument, or NDJSON on stdin");
  f->db.add_to(cmd, false);
  cmd->add_option("stream", f->stream, "stream name")->required();
  cmd->add_option("json", f->json, "one JSON object (omit to read NDJSON from stdin)");
  cmd->add_option("--batch-size", f->batch_size, "messages per INSERT when reading stdin")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--schema-version", f->schema_version, "payload schema version")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--key", f->key, "message key for every message");
  cmd->callback([&action, f] { action = [f] { return produce(*f); }; });
}

}  // namespace sqlstreams::cli
