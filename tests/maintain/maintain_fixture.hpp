// tests/maintain/maintain_fixture — a fresh, migrated database with stream
// `payments.requested` (small partitions, retention 30 days; its table family in `family_`) and the
// groups `charge-cards` and `audit-payments`; helpers to age messages, set cursors and read the
// table family.
// Times: the janitor gets `now_` (the wall clock at set-up); ages are set on the rows relative
// to it, never waited for.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/clock.hpp"
#include "store/connection/session.hpp"
#include "store/fleet/janitor.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/catalog.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::testing {

class MaintainTest : public ::testing::Test {
 protected:
  void SetUp() override { declare(partition_size_, std::chrono::hours(24 * 30), false); }
  // Re-declares the stream (it exists after SetUp: only retention/allow change).
  void declare(int64_t partition_size, std::optional<Millis> retention, bool allow_drop);

  store::SessionOptions options() const;
  std::unique_ptr<store::Session> session() const;

  // Produces `n` messages {"n": i}; returns the last id.
  int64_t produce(int n);
  // created_at = now_ - days for ids in [first, last].
  void age(int64_t first, int64_t last, int days);
  // Sets claimed = committed = `committed` and settled_head = max(settled_head, committed).
  void set_committed(const store::GroupRef& g, int64_t committed);
  int64_t count(const std::string& table_where) const;  // family_.messages + " WHERE id < 3"
  bool table_exists(const std::string& table) const;    // family_.partition(0)
  std::string t(const std::string& table) const { return "sqlstreams." + table; }

  int64_t partition_size_ = 2;  // set in a subclass constructor for other sizes
  TestDatabase db_{TestDatabase::Schema::kMigrated};
  std::unique_ptr<store::Session> session_;
  store::StreamRef stream_;
  StreamFamily family_;  // stream_'s tables
  store::GroupRef charge_, audit_;
  SysTime now_ = SystemClock::instance().now();
};

}  // namespace sqlstreams::testing
