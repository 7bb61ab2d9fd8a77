// isolation/frame — the wire format between the host and a handler child process
// (runtime/isolation/README.md#frames). A frame is a 4-byte little-endian body length, then the
// body: a 1-byte type and its fields (integers little-endian, strings as a 4-byte length and the
// bytes). The channel is a SOCK_STREAM socketpair: length-prefixed frames keep message boundaries
// at any payload size (a SOCK_SEQPACKET datagram is capped by the socket buffer). Decoding never
// trusts the peer: a truncated body, an unknown type, a length past the end or past kMaxFrameBytes
// is a FrameError, never a crash.
// Threading: pure functions; a Channel is used by one thread at a time (its owner).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/unique_fd.hpp"

namespace sqlstreams::isolation {

inline constexpr uint32_t kMaxFrameBytes = 1u << 30;  // 1 GiB: jsonb's own ceiling
// What each end accepts from the other (a larger announced length is a FrameError before
// anything is allocated for it; the host kills such a child). Host → child: one message
// (payloads are at most 64 MiB, streams.max_payload_bytes) and its names. Child → host: a
// reply (its error text at most plugin_host::kMaxErrorBytes) or a load failure; a child of a
// group that emits may send its reply's outputs on top (max_frame_from_emitting_child).
inline constexpr uint32_t kMaxFrameToChild = (64u << 20) + (1u << 20);
inline constexpr uint32_t kMaxFrameFromChild = 1u << 20;

// The host's limit for a reply with outputs: kMaxFrameFromChild, the budget's payload bytes, and
// for each output its other fields at the most they can be (stream name, key, idempotency key;
// kMaxOutputFieldBytes together), capped at kMaxFrameBytes.
inline constexpr uint64_t kMaxOutputFieldBytes = 64u << 10;
inline uint32_t max_frame_from_emitting_child(uint64_t max_count, int64_t max_bytes) {
  const uint64_t bytes = uint64_t{kMaxFrameFromChild} + static_cast<uint64_t>(max_bytes) +
                         max_count * kMaxOutputFieldBytes;
  return static_cast<uint32_t>(std::min<uint64_t>(bytes, kMaxFrameBytes));
}

class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Host → child, first frame: what to load and create. image_sha256: the SHA-256 of the host's
// sealed plugin image the child inherited (spawn_child's image_fd), which it maps instead of
// `plugin` on disk and refuses when the hash differs; empty: no image, `plugin` is loaded from
// plugin_dir (tests and tools only; a host always passes its image).
struct InitFrame {
  std::string plugin_dir, plugin, handler, stream, group, config_json;
  std::string image_sha256;
  bool operator==(const InitFrame&) const = default;
};
// Child → host: the instance is created and serves requests.
struct ReadyFrame {
  std::string plugin_name;
  bool concurrent = false;
  bool operator==(const ReadyFrame&) const = default;
};
// Child → host: loading or creating failed (the fields of plugin_host::PluginLoadError).
struct FailedFrame {
  std::string path, symbol, expected, found, hint;
  bool operator==(const FailedFrame&) const = default;
};
// Host → child: one message to handle.
struct RequestFrame {
  uint64_t seq = 0;
  int64_t id = 0;
  int32_t schema_version = 1;
  int32_t attempt = 1;
  int64_t created_at_unix_ms = 0;
  std::string stream, group, payload;
  std::optional<std::string> message_key;
  bool operator==(const RequestFrame&) const = default;
};
// One message a call emitted (plugin_host::Output), in a reply.
struct OutputFrame {
  std::string stream, payload;
  int32_t schema_version = 1;
  std::optional<std::string> key, idempotency_key;
  bool operator==(const OutputFrame&) const = default;
};
// Child → host: the outcome of request `seq`. kind is plugin_host::OutcomeKind as a number;
// outputs: what an OK call emitted (a child sends none for any other outcome, and the host keeps
// none then).
struct ReplyFrame {
  uint64_t seq = 0;
  uint8_t kind = 0;
  int64_t delay_ms = 0;
  std::string error;
  std::vector<OutputFrame> outputs;
  bool operator==(const ReplyFrame&) const = default;
};
// Host → child, between requests: from the next request on, each call may emit under this
// policy (plugin_host::EmitPolicy: the group's `emits` streams with their max_payload_bytes, the
// per-call budget). Sent before the first request a child gets after the group set its policy.
struct EmitPolicyFrame {
  std::vector<std::pair<std::string, int64_t>> max_payload_bytes;
  uint64_t max_count = 0;
  int64_t max_bytes = 0;
  bool operator==(const EmitPolicyFrame&) const = default;
};

using Frame =
    std::variant<InitFrame, ReadyFrame, FailedFrame, RequestFrame, ReplyFrame, EmitPolicyFrame>;

// The whole frame, length prefix included.
std::string encode(const Frame& frame);
// Decodes one body (without its length prefix); throws FrameError.
Frame decode_body(std::string_view body);

// One end of the channel (owns the fd; closes it when dropped). Reads are buffered: one recv
// takes whatever the peer has written (several frames of a batch at once).
class Channel {
 public:
  // `max_frame_bytes`: the longest frame body this end accepts (kMaxFrameToChild in the
  // child, kMaxFrameFromChild in the host).
  Channel(int fd, uint32_t max_frame_bytes) : fd_(fd), max_frame_bytes_(max_frame_bytes) {}
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_.get(); }
  // The host's limit for a child that may emit: a reply then carries its outputs as well.
  void set_max_frame_bytes(uint32_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }
  // Sends a whole frame; false when the peer is gone (EPIPE, ECONNRESET). Never raises SIGPIPE.
  [[nodiscard]] bool send(const Frame& frame);
  // Receives one frame. nullopt: the peer closed the channel (or `deadline` passed: then
  // *timed_out is set). Throws FrameError on a malformed frame.
  std::optional<Frame> receive(
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
      bool* timed_out = nullptr);

  // Non-blocking pieces for a caller that writes and reads at once (a batch, without waiting
  // on the child's replies to finish writing, nor on a full socket to read them):
  // Writes what the socket takes now of bytes[0, len): the count written (0: it is full), or
  // -1 when the peer is gone.
  ssize_t send_some(const char* bytes, size_t len);
  // One recv of what is there into the buffer: false when the peer closed the channel (or it
  // broke); true when it read something or nothing was there yet.
  bool read_available();
  // The next whole frame already read, nullopt if none; throws FrameError on a malformed one.
  std::optional<Frame> next_buffered();

 private:
  UniqueFd fd_;
  uint32_t max_frame_bytes_;
  std::string in_;    // read, not yet decoded
  size_t in_at_ = 0;  // decoded up to here
};

}  // namespace sqlstreams::isolation
