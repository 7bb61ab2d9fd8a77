// "did you mean": edit distance and the closeness rule.
#include "config/suggest.hpp"

#include <gtest/gtest.h>

#include <array>

namespace sqlstreams::config {
namespace {

TEST(EditDistance, Table) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("name", "name"), 0u);
  EXPECT_EQ(edit_distance("nmae", "name"), 1u);  // transposition
  EXPECT_EQ(edit_distance("concurency", "concurrency"), 1u);
  EXPECT_EQ(edit_distance("max-delay", "max_delay"), 1u);
  EXPECT_EQ(edit_distance("Stream", "stream"), 0u);  // case-insensitive
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // optimal string alignment, not full Damerau
}

TEST(Suggest, OnlyWhenClose) {
  constexpr std::array<std::string_view, 6> kKeys{"max_retries", "initial_backoff", "base_delay",
                                                  "exponent",    "max_delay",       "jitter"};
  EXPECT_EQ(suggest("max_retry", kKeys), "max_retries");
  EXPECT_EQ(suggest("max_dealy", kKeys), "max_delay");
  EXPECT_EQ(suggest("jiter", kKeys), "jitter");
  EXPECT_EQ(suggest("exponant", kKeys), "exponent");
  EXPECT_EQ(suggest("colour", kKeys), std::nullopt);
  EXPECT_EQ(suggest("delay", kKeys), std::nullopt);
  EXPECT_EQ(suggest("", kKeys), std::nullopt);
  constexpr std::array<std::string_view, 4> kTop{"database", "host", "streams", "groups"};
  EXPECT_EQ(suggest("stream", kTop), "streams");
  EXPECT_EQ(suggest("hots", kTop), "host");
  EXPECT_EQ(suggest("group", kTop), "groups");
  EXPECT_EQ(suggest("retry", kTop), std::nullopt);
}

}  // namespace
}  // namespace sqlstreams::config
