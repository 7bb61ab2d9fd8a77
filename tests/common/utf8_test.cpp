// The text sanitizer used where plugin text enters the host and where the committer writes.
#include "common/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sqlstreams {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";
const std::string kE = "\xC3\xA9";  // é, two bytes

TEST(Utf8Test, ValidTextIsUnchanged) {
  std::string s = "plain ascii, " + kE + ", \xE2\x82\xAC, \xF0\x9F\x98\x80";
  EXPECT_TRUE(is_clean_utf8(s));
  EXPECT_EQ(sanitize_utf8(s), s);
  EXPECT_EQ(sanitize_utf8(""), "");
}

TEST(Utf8Test, NulBecomesReplacementCharacter) {
  std::string s("a\0b", 3);
  EXPECT_FALSE(is_clean_utf8(s));
  EXPECT_EQ(sanitize_utf8(s), "a" + kFffd + "b");
}

TEST(Utf8Test, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(sanitize_utf8("x\xFFy"), "x" + kFffd + "y");
  EXPECT_EQ(sanitize_utf8("\x80"), kFffd);                          // lone continuation byte
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), kFffd + kFffd);              // overlong '/'
  EXPECT_EQ(sanitize_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);  // overlong, 3 bytes
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a UTF-16 surrogate
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(sanitize_utf8("\xF5"), kFffd);
  for (const char* bad : {"x\xFFy", "\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
    EXPECT_FALSE(is_clean_utf8(bad)) << bad;
    EXPECT_TRUE(is_clean_utf8(sanitize_utf8(bad))) << bad;
  }
}

TEST(Utf8Test, TruncatedMultibyteAtTheEndIsReplaced) {
  EXPECT_EQ(sanitize_utf8("ab\xC3"), "ab" + kFffd);
  EXPECT_EQ(sanitize_utf8("ab\xE2\x82"), "ab" + kFffd + kFffd);
}

TEST(Utf8Test, CutsAtACodePointBoundaryAndMarksTheCut) {
  // 'a' then 5000 × é: 10001 bytes, the poison message of
  // tests/e2e/poison_drain_test.cpp (a cut at 8192 bytes lands mid-é).
  std::string s = "a";
  for (int i = 0; i < 5000; ++i) s += kE;
  std::string out = sanitize_utf8(s, 8192);
  EXPECT_LE(out.size(), 8192u);
  EXPECT_TRUE(is_clean_utf8(out));
  ASSERT_GE(out.size(), kTruncatedMarker.size());
  EXPECT_EQ(out.substr(out.size() - kTruncatedMarker.size()), kTruncatedMarker);
  std::string body = out.substr(0, out.size() - kTruncatedMarker.size());
  EXPECT_EQ(body.size() % 2, 1u);  // 'a' plus whole é's only
  EXPECT_EQ(s.substr(0, body.size()), body);
}

TEST(Utf8Test, TextThatFitsExactlyIsNotMarked) {
  std::string s = "a" + kE + kE;  // 5 bytes
  EXPECT_EQ(sanitize_utf8(s, 5), s);
  EXPECT_EQ(sanitize_utf8(s, 4), "a" + kE);  // too small for the marker: just cut
  EXPECT_EQ(sanitize_utf8(s, 2), "a");
  EXPECT_EQ(sanitize_utf8(s, 0), "");
}

TEST(Utf8Test, ReplacementsCountAgainstTheBudget) {
  std::string s(10000, '\0');  // each NUL grows to three bytes
  std::string out = sanitize_utf8(s, 100);
  EXPECT_LE(out.size(), 100u);
  EXPECT_TRUE(is_clean_utf8(out));
  EXPECT_EQ(out.substr(0, 3), kFffd);
}

}  // namespace
}  // namespace sqlstreams

namespace sqlstreams {
namespace {

TEST(EscapeForText, PrintableUtf8PassesUnchanged) {
  const std::string s = "plain, " + kE + ", \xE2\x82\xAC, \xF0\x9F\x98\x80 \"quoted\"";
  EXPECT_EQ(escape_for_text(s), s);
}

TEST(EscapeForText, LineBreaksControlsAndInvalidBytesBecomeVisibleEscapes) {
  EXPECT_EQ(escape_for_text("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(escape_for_text(std::string("nul\0!", 5)), "nul\\x00!");
  EXPECT_EQ(escape_for_text("\x1b[31mred\x07"), "\\x1b[31mred\\x07");
  EXPECT_EQ(escape_for_text("del\x7f"), "del\\x7f");
  EXPECT_EQ(escape_for_text("c1 \xc2\x85 \xc2\x9b"), "c1 \\u0085 \\u009b");
  EXPECT_EQ(escape_for_text("ls \xe2\x80\xa8 ps \xe2\x80\xa9"), "ls \\u2028 ps \\u2029");
  EXPECT_EQ(escape_for_text("bad \xff \x9b"), "bad \\xff \\x9b");
  EXPECT_EQ(escape_for_text("back\\slash"), "back\\\\slash") << "an escape always means one";
  EXPECT_EQ(escape_for_text("\xc2\xa0 nbsp stays"), "\xc2\xa0 nbsp stays");
}

}  // namespace
}  // namespace sqlstreams
