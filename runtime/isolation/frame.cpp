// Frame encoding and the blocking, deadline-aware socket I/O of a Channel.
#include "isolation/frame.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace sqlstreams::isolation {
namespace {

enum class Type : uint8_t { kInit = 1, kReady, kFailed, kRequest, kReply, kEmitPolicy };

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { fixed(v, 4); }
  void u64(uint64_t v) { fixed(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    if (s.size() > kMaxFrameBytes) throw FrameError("a frame field is larger than 1 GiB");
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string finish() {
    if (out_.size() - 4 > kMaxFrameBytes) throw FrameError("a frame is larger than 1 GiB");
    const auto len = static_cast<uint32_t>(out_.size() - 4);
    for (int i = 0; i < 4; ++i) out_[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    return std::move(out_);
  }

 private:
  void fixed(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_ = std::string(4, '\0');  // the length prefix, filled in by finish()
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint8_t u8() { return static_cast<uint8_t>(fixed(1)); }
  uint32_t u32() { return static_cast<uint32_t>(fixed(4)); }
  uint64_t u64() { return fixed(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool boolean() {
    const uint8_t v = u8();
    if (v > 1) throw FrameError("a boolean field holds " + std::to_string(v));
    return v == 1;
  }
  std::string str() {
    const uint32_t len = u32();
    need(len);
    std::string s(in_.substr(at_, len));
    at_ += len;
    return s;
  }
  void end() {
    if (at_ != in_.size()) {
      throw FrameError(std::to_string(in_.size() - at_) + " unexpected bytes after a frame");
    }
  }

 private:
  void need(size_t n) {
    if (in_.size() - at_ < n) throw FrameError("truncated frame");
  }
  uint64_t fixed(int bytes) {
    need(bytes);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[at_ + i])) << (8 * i);
    }
    at_ += bytes;
    return v;
  }
  std::string_view in_;
  size_t at_ = 0;
};

struct Encode {
  Writer& w;
  void operator()(const InitFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kInit));
    for (const auto* s : {&f.plugin_dir, &f.plugin, &f.handler, &f.stream, &f.group, &f.config_json,
                          &f.image_sha256}) {
      w.str(*s);
    }
  }
  void operator()(const ReadyFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kReady));
    w.str(f.plugin_name);
    w.u8(f.concurrent ? 1 : 0);
  }
  void operator()(const FailedFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kFailed));
    for (const auto* s : {&f.path, &f.symbol, &f.expected, &f.found, &f.hint}) w.str(*s);
  }
  void operator()(const RequestFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kRequest));
    w.u64(f.seq);
    w.i64(f.id);
    w.i32(f.schema_version);
    w.i32(f.attempt);
    w.i64(f.created_at_unix_ms);
    w.str(f.stream);
    w.str(f.group);
    w.str(f.payload);
    w.u8(f.message_key ? 1 : 0);
    if (f.message_key) w.str(*f.message_key);
  }
  void operator()(const ReplyFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kReply));
    w.u64(f.seq);
    w.u8(f.kind);
    w.i64(f.delay_ms);
    w.str(f.error);
    w.u32(static_cast<uint32_t>(f.outputs.size()));
    for (const auto& o : f.outputs) {
      w.str(o.stream);
      w.str(o.payload);
      w.i32(o.schema_version);
      w.u8(o.key ? 1 : 0);
      if (o.key) w.str(*o.key);
      w.u8(o.idempotency_key ? 1 : 0);
      if (o.idempotency_key) w.str(*o.idempotency_key);
    }
  }
  void operator()(const EmitPolicyFrame& f) {
    w.u8(static_cast<uint8_t>(Type::kEmitPolicy));
    w.u32(static_cast<uint32_t>(f.max_payload_bytes.size()));
    for (const auto& [stream, max] : f.max_payload_bytes) {
      w.str(stream);
      w.i64(max);
    }
    w.u64(f.max_count);
    w.i64(f.max_bytes);
  }
};

}  // namespace

std::string encode(const Frame& frame) {
  Writer w;
  std::visit(Encode{w}, frame);
  return w.finish();
}

Frame decode_body(std::string_view body) {
  Reader r(body);
  const uint8_t type = r.u8();
  Frame out;
  switch (static_cast<Type>(type)) {
    case Type::kInit: {
      InitFrame f;
      for (auto* s : {&f.plugin_dir, &f.plugin, &f.handler, &f.stream, &f.group, &f.config_json,
                      &f.image_sha256}) {
        *s = r.str();
      }
      out = std::move(f);
      break;
    }
    case Type::kReady: {
      ReadyFrame f;
      f.plugin_name = r.str();
      f.concurrent = r.boolean();
      out = std::move(f);
      break;
    }
    case Type::kFailed: {
      FailedFrame f;
      for (auto* s : {&f.path, &f.symbol, &f.expected, &f.found, &f.hint}) *s = r.str();
      out = std::move(f);
      break;
    }
    case Type::kRequest: {
      RequestFrame f;
      f.seq = r.u64();
      f.id = r.i64();
      f.schema_version = r.i32();
      f.attempt = r.i32();
      f.created_at_unix_ms = r.i64();
      f.stream = r.str();
      f.group = r.str();
      f.payload = r.str();
      if (r.boolean()) f.message_key = r.str();
      out = std::move(f);
      break;
    }
    case Type::kReply: {
      ReplyFrame f;
      f.seq = r.u64();
      f.kind = r.u8();
      f.delay_ms = r.i64();
      f.error = r.str();
      // No reserve: the count is the peer's word; each output must be there (truncated frame).
      for (uint32_t n = r.u32(); n > 0; --n) {
        OutputFrame o;
        o.stream = r.str();
        o.payload = r.str();
        o.schema_version = r.i32();
        if (r.boolean()) o.key = r.str();
        if (r.boolean()) o.idempotency_key = r.str();
        f.outputs.push_back(std::move(o));
      }
      out = std::move(f);
      break;
    }
    case Type::kEmitPolicy: {
      EmitPolicyFrame f;
      for (uint32_t n = r.u32(); n > 0; --n) {
        std::string stream = r.str();
        f.max_payload_bytes.emplace_back(std::move(stream), r.i64());
      }
      f.max_count = r.u64();
      f.max_bytes = r.i64();
      out = std::move(f);
      break;
    }
    default:
      throw FrameError("unknown frame type " + std::to_string(type));
  }
  r.end();
  return out;
}

bool Channel::send(const Frame& frame) {
  const std::string bytes = encode(frame);
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd(), bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

ssize_t Channel::send_some(const char* bytes, size_t len) {
  for (;;) {
    const ssize_t n = ::send(fd(), bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

bool Channel::read_available() {
  if (in_at_ > 0 && in_at_ == in_.size()) {
    in_.clear();
    in_at_ = 0;
  } else if (in_at_ > (1u << 20)) {  // keep the buffer from growing with a long stream
    in_.erase(0, in_at_);
    in_at_ = 0;
  }
  char chunk[64 * 1024];
  ssize_t n;
  do {
    n = ::recv(fd(), chunk, sizeof chunk, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    in_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // 0: closed; else broken
}

std::optional<Frame> Channel::next_buffered() {
  const size_t have = in_.size() - in_at_;
  if (have < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + in_at_);
  const uint32_t len = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
  if (len == 0 || len > max_frame_bytes_) {
    throw FrameError("a frame announces " + std::to_string(len) + " bytes (this end accepts " +
                     std::to_string(max_frame_bytes_) + ")");
  }
  // Nothing is reserved for the announced length: the buffer grows with what really arrives.
  if (have - 4 < len) return std::nullopt;
  Frame frame = decode_body(std::string_view(in_).substr(in_at_ + 4, len));
  in_at_ += 4 + len;
  return frame;
}

std::optional<Frame> Channel::receive(std::optional<std::chrono::steady_clock::time_point> deadline,
                                      bool* timed_out) {
  for (;;) {
    if (auto frame = next_buffered()) return frame;
    int wait_ms = -1;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    pollfd p{fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (timed_out) *timed_out = true;
      return std::nullopt;
    }
    if (!read_available()) return std::nullopt;  // closed (0) or reset
  }
}

}  // namespace sqlstreams::isolation
