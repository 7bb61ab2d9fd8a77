#include "payments.hpp"

#include <algorithm>
#include <sstream>

#include "test_database.hpp"
#include "text.hpp"

namespace sqlstreams::testing {

void produce_payments(const std::string& url, int64_t n, int64_t from, int64_t batch) {
  for (int64_t lo = from; lo < from + n; lo += batch) {
    const int64_t hi = std::min(from + n - 1, lo + batch - 1);
    query(url, "SELECT sqlstreams.produce_batch('" + std::string(kPaymentsStream) +
                   "', array_agg(jsonb_build_object('order_id', 'order-' || g, 'amount_cents', "
                   "100 + g, 'currency', 'EUR') ORDER BY g)) FROM generate_series(" +
                   std::to_string(lo) + ", " + std::to_string(hi) + ") AS g");
  }
}

namespace {

// Calls `use(group, id, attempt)` for each complete line of the record files.
template <class Use>
void for_each_call(const std::vector<std::string>& files, Use use) {
  for (const auto& f : files) {
    const std::string content = read_file(f);
    std::istringstream lines(content.substr(0, content.rfind('\n') + 1));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string group, outcome;
      int64_t id = 0;
      int attempt = 0;
      if (fields >> group >> id >> attempt >> outcome) use(group, id, attempt);
    }
  }
}

}  // namespace

Records read_records(const std::vector<std::string>& files) {
  Records out;
  for_each_call(files, [&](const std::string& group, int64_t id, int) { out[group][id]++; });
  return out;
}

std::set<int64_t> retried_ids(const std::vector<std::string>& files, const std::string& group) {
  std::set<int64_t> out;
  for_each_call(files, [&](const std::string& g, int64_t id, int attempt) {
    if (g == group && attempt >= 2) out.insert(id);
  });
  return out;
}

}  // namespace sqlstreams::testing
