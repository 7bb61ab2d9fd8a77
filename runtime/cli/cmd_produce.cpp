// `sqlstreams produce STREAM [JSON]`: one document as an argument, or NDJSON on stdin.
// All of stdin is read and checked first — syntax, depth, NUL bytes (cli/json_payload), then
// every payload's size as the SQL functions measure it (octet_length(payload::jsonb::text), one
// read-only query per batch) — and only then produced, in ONE transaction (one INSERT per
// --batch-size lines): a bad line is a located error `stdin:N: ...` (exit 65) and nothing is
// written. The text of each line is what is stored: jsonb keeps numbers exactly as written.
// A line longer than twice the stream's max_payload_bytes (plus kLineSlack) is refused while it
// is read and never buffered: its stored form could fit only if most of it were whitespace or
// duplicate keys. An empty JSON argument is refused (it does not mean "read stdin").
// --idempotency-key K makes the run safe to repeat (V011, docs/design.md#idempotent-produce):
// the argument's message gets the key K, line N of stdin the key "K:N" (so the same input gives
// the same keys); a second run within the stream's idempotency_window writes nothing again (the
// argument form prints the first run's id). An in-doubt answer then says so: retry with the same
// keys is safe.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.hpp"
#include "cli/json_payload.hpp"
#include "common/errors.hpp"
#include "store/produce/producer.hpp"

namespace sqlstreams::cli {
namespace {

struct ProduceFlags {
  DatabaseFlags db;
  std::string stream;
  std::string json;
  bool json_given = false;
  int batch_size = 500;
  int schema_version = 1;
  std::string key;
  std::string idempotency_key;
  bool idempotency_key_given = false;
};

class BadInput : public ControlPlaneError {
 public:
  explicit BadInput(std::string msg)
      : ControlPlaneError(ExitCode::kData, std::move(msg), "fix the input and run again") {}
};

constexpr size_t kMaxReportedProblems = 20;
constexpr size_t kLineSlack = 64 * 1024;

// The longest stdin line worth reading for a stream (see the header comment).
size_t line_limit(const store::StreamRef& stream) {
  return 2 * static_cast<size_t>(std::max<int32_t>(stream.max_payload_bytes, 0)) + kLineSlack;
}

// Reads one line of `in` into `text` (without the newline), keeping at most `limit` bytes:
// a longer line is consumed to its end and reported through `length` (its full length) with
// `text` cleared. False at the end of input.
bool read_bounded_line(std::FILE* in, size_t limit, std::string& text, size_t& length) {
  text.clear();
  length = 0;
  bool any = false;
  for (int c = getc_unlocked(in); c != EOF; c = getc_unlocked(in)) {
    any = true;
    if (c == '\n') return true;
    if (++length <= limit) {
      text.push_back(static_cast<char>(c));
    } else if (!text.empty()) {
      std::string().swap(text);  // give the memory back
    }
  }
  return any;
}

struct Line {
  std::string where;  // "stdin:N" or "argument"
  std::string text;
};

// Every problem of every line (the first kMaxReportedProblems), or nothing.
void check_all(const std::vector<Line>& lines, store::Producer& producer,
               const store::StreamRef& stream, size_t batch_size) {
  std::vector<std::string> problems;
  size_t more = 0;
  auto report = [&](const Line& l, const std::string& what) {
    if (problems.size() < kMaxReportedProblems) {
      problems.push_back(fmt::format("{}: {}", l.where, what));
    } else {
      ++more;
    }
  };
  std::vector<const Line*> well_formed;
  for (const auto& l : lines) {
    if (auto problem = payload_problem(l.text)) {
      report(l, *problem);
    } else {
      well_formed.push_back(&l);
    }
  }
  // Sizes as sqlstreams.produce() measures them, asked of PostgreSQL (nothing is written).
  auto measure = [&](size_t begin, size_t end) {
    std::vector<std::string> texts;
    for (size_t i = begin; i < end; ++i) texts.push_back(well_formed[i]->text);
    auto sizes = producer.stored_sizes(texts);
    for (size_t i = begin; i < end; ++i) {
      if (sizes[i - begin] > stream.max_payload_bytes) {
        report(*well_formed[i],
               fmt::format("payload of {} bytes exceeds max_payload_bytes {} of "
                           "stream '{}' (measured as stored: jsonb text)",
                           sizes[i - begin], stream.max_payload_bytes, stream.name));
      }
    }
  };
  for (size_t begin = 0; begin < well_formed.size(); begin += batch_size) {
    const size_t end = std::min(well_formed.size(), begin + batch_size);
    try {
      measure(begin, end);
    } catch (const store::StoreError& e) {
      if (!e.deterministic()) throw;
      // PostgreSQL refused some line's JSON (e.g. a number beyond numeric's range): find it.
      for (size_t i = begin; i < end; ++i) {
        try {
          measure(i, i + 1);
        } catch (const store::StoreError& one) {
          if (!one.deterministic()) throw;
          report(*well_formed[i], fmt::format("PostgreSQL refuses this JSON: {}", one.what()));
        }
      }
    }
  }
  if (problems.empty()) return;
  std::string msg = fmt::format("{} bad line(s); nothing was produced", problems.size() + more);
  for (const auto& p : problems) msg += "\n  " + p;
  if (more) msg += fmt::format("\n  ... and {} more", more);
  throw BadInput(msg);
}

int produce(const ProduceFlags& f) {
  auto config = maybe_load(f.db.config_file);
  std::optional<std::string> key;
  if (!f.key.empty()) key = f.key;
  try {
    store::Producer::check_key(key, "--key");
  } catch (const store::StoreError& e) {
    throw BadInput(e.what());
  }
  if (f.json_given && f.json.empty()) {
    throw BadInput("argument: the JSON argument is empty (omit it to read NDJSON from stdin)");
  }
  const bool keyed = f.idempotency_key_given;
  if (keyed) {
    // The longest key a run can make is K:<line number>; the shortest is K itself.
    try {
      store::Producer::check_idempotency_key(f.idempotency_key, "--idempotency-key");
    } catch (const store::StoreError& e) {
      throw BadInput(e.what());
    }
  }
  store::Session session(f.db.resolve(config));
  auto stream = store::find_stream(session, f.stream);
  if (!stream) {
    throw ControlPlaneError(ExitCode::kData, fmt::format("unknown stream '{}'", f.stream),
                            "declare it first: sqlstreams declare --config FILE");
  }
  std::vector<Line> lines;
  std::vector<int64_t> line_numbers;  // of stdin, for the idempotency keys "K:N"
  std::vector<std::string> too_long;  // located errors of lines refused while reading
  size_t too_long_count = 0;
  if (f.json_given) {
    lines.push_back({"argument", f.json});
  } else {
    const size_t limit = line_limit(*stream);
    std::string text;
    size_t length = 0;
    for (int64_t line_no = 1; read_bounded_line(stdin, limit, text, length); ++line_no) {
      if (length > limit) {
        if (++too_long_count <= kMaxReportedProblems) {
          too_long.push_back(fmt::format(
              "stdin:{}: line of {} bytes refused while reading: more than twice "
              "max_payload_bytes {} of stream '{}' (+{} bytes), so its payload cannot fit",
              line_no, length, stream->max_payload_bytes, stream->name, kLineSlack));
        }
        continue;
      }
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      lines.push_back({fmt::format("stdin:{}", line_no), std::move(text)});
      line_numbers.push_back(line_no);
    }
    if (std::ferror(stdin)) throw BadInput("stdin: read error; nothing was produced");
  }
  if (too_long_count > 0) {
    std::string msg = fmt::format("{} line(s) too long; nothing was produced", too_long_count);
    for (const auto& p : too_long) msg += "\n  " + p;
    if (too_long_count > too_long.size()) {
      msg += fmt::format("\n  ... and {} more", too_long_count - too_long.size());
    }
    throw BadInput(msg);
  }
  store::Producer producer(session);
  check_all(lines, producer, *stream, static_cast<size_t>(f.batch_size));
  std::vector<store::NewMessage> messages;
  messages.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    std::optional<std::string> idempotency_key;
    if (keyed) {
      idempotency_key = f.json_given ? f.idempotency_key
                                     : fmt::format("{}:{}", f.idempotency_key, line_numbers[i]);
      try {
        store::Producer::check_idempotency_key(idempotency_key, lines[i].where);
      } catch (const store::StoreError& e) {
        throw BadInput(std::string(e.what()) + "; nothing was produced");
      }
    }
    messages.push_back({std::move(lines[i].text), f.schema_version, key, idempotency_key});
  }
  lines.clear();
  auto report_failure = [keyed](const store::StoreError& e) {
    if (e.kind() == store::StoreError::Kind::kInDoubt) {
      if (keyed) {
        std::fprintf(stderr,
                     "the connection was lost while the batch committed: it may or may not have "
                     "been produced (all or nothing); it carried idempotency keys, so retry with "
                     "the same keys: safe (run the same command on the same input, with the same "
                     "--idempotency-key, within the stream's idempotency_window)\n");
      } else {
        std::fprintf(stderr,
                     "the connection was lost while the batch committed: it may or may not have "
                     "been produced (all or nothing); look before sending it again (or produce "
                     "with --idempotency-key: then retrying is safe)\n");
      }
    } else {
      std::fprintf(stderr, "nothing was produced (one transaction)\n");
    }
  };
  if (f.json_given) {
    try {
      std::printf("%lld\n", static_cast<long long>(producer.produce(f.stream, messages.at(0))));
    } catch (const store::StoreError& e) {
      report_failure(e);
      throw;
    }
    return 0;
  }
  const bool tty = isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  store::Producer::BatchOptions options;
  options.chunk = static_cast<size_t>(f.batch_size);
  options.progress = [&](size_t inserted) {
    auto now = std::chrono::steady_clock::now();
    if (!tty || now - last_progress < std::chrono::milliseconds(200)) return;
    double secs = std::chrono::duration<double>(now - started).count();
    std::fprintf(stderr, "\rinserted %zu of %zu messages (%.0f/s)", inserted, messages.size(),
                 secs > 0 ? inserted / secs : 0.0);
    last_progress = now;
  };
  try {
    producer.produce_batch(f.stream, messages, options);
  } catch (const store::StoreError& e) {
    if (tty) std::fprintf(stderr, "\n");
    report_failure(e);
    throw;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (tty) std::fprintf(stderr, "\r");
  std::fprintf(stderr, "produced %zu messages in %.2fs\n", messages.size(), secs);
  return 0;
}

}  // namespace

void register_produce(CLI::App& app, Action& action) {
  auto f = std::make_shared<ProduceFlags>();
  auto* cmd = app.add_subcommand(
      "produce", "Append messages: one JSON object as an argument, or NDJSON on stdin");
  f->db.add_to(cmd, false);
  cmd->add_option("stream", f->stream, "stream name")->required();
  auto* json = cmd->add_option("json", f->json, "one JSON object (omit to read NDJSON from stdin)");
  cmd->add_option("--batch-size", f->batch_size,
                  "messages per INSERT when reading stdin (all in one transaction)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--schema-version", f->schema_version, "payload schema version")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--key", f->key, "message key for every message (at most 1024 bytes)");
  auto* idem = cmd->add_option(
      "--idempotency-key", f->idempotency_key,
      "make the run safe to repeat: the argument's message gets this key, stdin line N the key "
      "KEY:N; a repeat within the stream's idempotency_window writes nothing (at most 255 "
      "bytes per key)");
  cmd->callback([&action, f, json, idem] {
    f->json_given = json->count() > 0;
    f->idempotency_key_given = idem->count() > 0;
    action = [f] { return produce(*f); };
  });
}

}  // namespace sqlstreams::cli
