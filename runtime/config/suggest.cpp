#include "config/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace sqlstreams::config {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  // d[i][j] = distance between a[0, i) and b[0, j); three rows are enough for transpositions.
  std::vector<size_t> two_back(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        cur[j] = std::min(cur[j], two_back[j - 2] + 1);
      }
    }
    std::swap(two_back, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string_view> suggest(std::string_view word,
                                        std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  size_t best_distance = 0;
  for (std::string_view candidate : candidates) {
    const size_t limit = std::min<size_t>(3, std::max<size_t>(1, candidate.size() / 3));
    const size_t d = edit_distance(word, candidate);
    if (d <= limit && (!best || d < best_distance)) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace sqlstreams::config
