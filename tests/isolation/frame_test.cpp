// The host ↔ handler-child frames: every frame type round-trips, and a malformed frame from a
// (possibly corrupted) child is a FrameError, never a crash or a silent default; a Channel's
// buffered reads split a stream of frames back into frames whatever the write boundaries.
#include "isolation/frame.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace sqlstreams::isolation {
namespace {

std::string body_of(const Frame& f) { return encode(f).substr(4); }

TEST(Frame, EveryFrameTypeRoundTrips) {
  RequestFrame with_key{7,
                        -42,
                        3,
                        2,
                        1700000000000,
                        "s",
                        "g",
                        std::string("{\"a\":\0}", 7),
                        std::string("k\xc3\xa9y")};
  RequestFrame without_key{8, 1, 1, 1, 0, "s", "g", "", std::nullopt};
  const std::vector<Frame> frames{
      InitFrame{"/plugins", "p.so", "h", "s", "g", "{\"x\":1}", std::string(64, 'c')},
      ReadyFrame{"crash-fixture", true},
      FailedFrame{"p.so", "sym", "exp", "found", "hint"},
      with_key,
      without_key,
      ReplyFrame{7, 2, 1500, "later", {}},
      ReplyFrame{9,
                 0,
                 0,
                 "",
                 {OutputFrame{"orders.enriched", "{\"from\": 1}", 2, "k\xc3\xa9y", "idem-1"},
                  OutputFrame{"orders.audit", std::string("{\"a\":\0}", 7), 1, std::nullopt,
                              std::nullopt}}},
      EmitPolicyFrame{{{"orders.enriched", 1 << 20}, {"orders.audit", 1024}}, 100, 4 << 20},
      EmitPolicyFrame{{}, 0, 0},
  };
  for (const auto& f : frames) {
    const std::string bytes = encode(f);
    ASSERT_GE(bytes.size(), 5u);
    const uint32_t len = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8 |
                         static_cast<uint8_t>(bytes[2]) << 16 |
                         static_cast<uint32_t>(static_cast<uint8_t>(bytes[3])) << 24;
    EXPECT_EQ(len, bytes.size() - 4);
    EXPECT_EQ(decode_body(bytes.substr(4)), f) << "frame index " << f.index();
  }
}

TEST(Frame, MalformedBodiesAreFrameErrors) {
  const std::string request = body_of(RequestFrame{1, 2, 1, 1, 0, "s", "g", "{}", "key"});
  for (size_t cut = 0; cut < request.size(); ++cut) {
    EXPECT_THROW(decode_body(request.substr(0, cut)), FrameError) << "cut at " << cut;
  }
  EXPECT_THROW(decode_body(request + "x"), FrameError);           // trailing bytes
  EXPECT_THROW(decode_body(std::string(1, '\x63')), FrameError);  // unknown type
  std::string bad_bool = body_of(ReadyFrame{"p", true});
  bad_bool.back() = '\x02';
  EXPECT_THROW(decode_body(bad_bool), FrameError);
  // A string length past the end of the body.
  std::string long_string = body_of(ReplyFrame{1, 0, 0, "abc", {}});
  long_string[long_string.size() - 11] = '\x7f';  // the error's length (then "abc", 0 outputs)
  EXPECT_THROW(decode_body(long_string), FrameError);
  // A reply's outputs and a policy: every cut is an error, and a count the bytes cannot hold is
  // "truncated", not a 4-billion-element allocation.
  for (const Frame& f : {Frame{ReplyFrame{1, 0, 0, "", {OutputFrame{"s", "{}", 1, "k", "i"}}}},
                         Frame{EmitPolicyFrame{{{"s", 10}}, 5, 100}}}) {
    const std::string body = body_of(f);
    for (size_t cut = 0; cut < body.size(); ++cut) {
      EXPECT_THROW(decode_body(body.substr(0, cut)), FrameError) << "cut at " << cut;
    }
  }
  std::string many = body_of(ReplyFrame{1, 0, 0, "", {}});
  many.replace(many.size() - 4, 4, "\xff\xff\xff\xff");
  EXPECT_THROW(decode_body(many), FrameError);
  std::string bad_key_flag = body_of(ReplyFrame{1, 0, 0, "", {OutputFrame{"s", "{}", 1, {}, {}}}});
  bad_key_flag[bad_key_flag.size() - 2] = '\x05';  // the key's present flag
  EXPECT_THROW(decode_body(bad_key_flag), FrameError);
}

TEST(Channel, CarriesFramesLargerThanTheSocketBufferAndReportsClose) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  auto a = std::make_unique<Channel>(fds[0], kMaxFrameFromChild);
  Channel b(fds[1], kMaxFrameToChild);
  RequestFrame big{1, 9, 1, 1, 0, "s", "g", std::string(3 << 20, 'x'), std::nullopt};
  std::thread writer([&] {
    EXPECT_TRUE(a->send(big));
    a.reset();  // closes: the reader sees the end after the frame
  });
  auto got = b.receive();
  writer.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<RequestFrame>(*got), big);
  EXPECT_FALSE(b.receive().has_value());
}

TEST(Channel, AbsurdLengthPrefixIsRefusedAndADeadlineTimesOut) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Channel a(fds[0], kMaxFrameToChild), b(fds[1], kMaxFrameFromChild);
  bool timed_out = false;
  EXPECT_FALSE(
      b.receive(std::chrono::steady_clock::now() + std::chrono::milliseconds(20), &timed_out));
  EXPECT_TRUE(timed_out);
  const char huge[4] = {'\xff', '\xff', '\xff', '\x7f'};
  ASSERT_EQ(::write(a.fd(), huge, 4), 4);
  EXPECT_THROW(b.receive(), FrameError);
}

// runtime/isolation/README.md#frames: each direction has its own limit, checked on the header,
// before anything is read or allocated for the body: the host end refuses a child's reply past
// kMaxFrameFromChild (1 MiB); the child end takes a request up to kMaxFrameToChild (a 64 MiB
// payload and its names).
TEST(Channel, EachEndRefusesAFrameLongerThanItsDirectionAllows) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Channel child(fds[0], kMaxFrameToChild), host(fds[1], kMaxFrameFromChild);
  const ReplyFrame too_long{1, 0, 0, std::string(kMaxFrameFromChild, 'e')};
  std::thread writer([&] { (void)child.send(too_long); });  // may break off at the shutdown
  try {
    host.receive();
    ADD_FAILURE() << "a reply longer than kMaxFrameFromChild was accepted";
  } catch (const FrameError& e) {
    EXPECT_NE(std::string(e.what()).find("this end accepts 1048576"), std::string::npos)
        << e.what();
  }
  ::shutdown(host.fd(), SHUT_RDWR);  // unblocks the writer
  writer.join();

  int more[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, more), 0);
  Channel host2(more[0], kMaxFrameFromChild), child2(more[1], kMaxFrameToChild);
  const RequestFrame big{1, 9, 1, 1, 0, "s", "g", std::string(8 << 20, 'x'), std::nullopt};
  std::thread sender([&] { EXPECT_TRUE(host2.send(big)); });
  auto got = child2.receive();
  sender.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<RequestFrame>(*got), big);
  const char announced[4] = {0, 0, 0, '\x05'};  // 80 MiB: past kMaxFrameToChild
  ASSERT_EQ(::write(host2.fd(), announced, 4), 4);
  EXPECT_THROW(child2.receive(), FrameError);
}

TEST(Channel, SeveralFramesInOneWriteAndAFrameSplitAcrossWritesAreEachDecodedOnce) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Channel a(fds[0], kMaxFrameToChild), b(fds[1], kMaxFrameFromChild);
  const ReplyFrame r1{1, 0, 0, ""}, r2{2, 1, 0, "boom"}, r3{3, 2, 500, "later"};
  const std::string third = encode(r3);
  const std::string bytes = encode(r1) + encode(r2) + third.substr(0, 7);
  ASSERT_EQ(a.send_some(bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(b.read_available());
  EXPECT_EQ(std::get<ReplyFrame>(*b.next_buffered()), r1);
  EXPECT_EQ(std::get<ReplyFrame>(*b.next_buffered()), r2);
  EXPECT_FALSE(b.next_buffered().has_value());  // the third is not whole yet
  EXPECT_TRUE(b.read_available());              // nothing more there: not a close
  ASSERT_EQ(a.send_some(third.data() + 7, third.size() - 7),
            static_cast<ssize_t>(third.size() - 7));
  auto got = b.receive(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::get<ReplyFrame>(*got), r3);
  ::shutdown(a.fd(), SHUT_WR);
  EXPECT_FALSE(b.read_available());  // closed
}

}  // namespace
}  // namespace sqlstreams::isolation
