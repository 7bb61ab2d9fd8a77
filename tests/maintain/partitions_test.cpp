// Partitions: the janitor creates ahead of the head under a produce burst, heals a missing
// partition that can still receive ids, and producers heal a missing partition themselves.
#include <atomic>
#include <thread>

#include "maintain_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class PartitionsTest : public MaintainTest {
 protected:
  PartitionsTest() { partition_size_ = 10; }
  int64_t partitions_upto() {
    return db_.scalar<int64_t>("SELECT partitions_upto FROM sqlstreams.streams");
  }
  // The range partitions messages_N_p<k> (not the default partition, V007).
  int64_t partition_count() {
    return db_.scalar<int64_t>(
        "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE "
        "i.inhparent = '" +
        family_.messages + "'::regclass AND c.relname <> '" + family_.partition_default_name() +
        "'");
  }
};

TEST_F(PartitionsTest, CreatesAheadOfTheHeadDuringAProduceBurst) {
  constexpr int kProducers = 4, kBatches = 40, kBatch = 5;
  std::atomic<bool> done{false};
  std::atomic<int> janitor_passes{0}, created{0};
  // A healthy stream: its janitor has run before the burst. 10 ids per partition is tiny, so
  // it keeps 20 partitions ready (a real partition holds a million ids) and then sizes ahead
  // from the burst's rate. SQL producers never create partitions themselves: one that outruns
  // a starved janitor lands in the default partition (V007), which this test is not about, so
  // it paces them on the janitor instead of on the machine's speed. Before each SQL produce a
  // producer waits for a clean pass that STARTED after it began waiting; such a pass leaves >= 200
  // ids ready past the head it saw, and all producers draw at most 4 x 21 ids per pass: never a
  // missing one.
  std::atomic<int> passes_started{0}, clean_pass_started{0};
  auto wait_for_fresh_clean_pass = [&] {
    const int want = passes_started.load() + 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (clean_pass_started.load() < want) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "no clean janitor pass in 60 s";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  store::JanitorSettings settings;
  settings.janitor_period = Millis(100);  // the loop below runs passes back to back
  settings.partitions_ahead = 20;
  auto s = session();
  store::StreamJanitor j(*s, stream_.id);
  j.run_once(SystemClock::instance().now(), settings);
  std::thread janitor([&] {
    while (!done.load()) {
      store::JanitorReport r;
      const int pass = ++passes_started;
      try {
        r = j.run_once(SystemClock::instance().now(), settings);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "janitor pass: " << e.what();
        break;
      }
      // A busy stream's lock is not a failure (r.busy): the next pass tries again.
      for (const auto& e : r.errors) ADD_FAILURE() << "janitor step failed: " << e;
      created += static_cast<int>(r.created.size());
      janitor_passes++;
      if (r.errors.empty() && r.busy.empty()) {
        int seen = clean_pass_started.load();
        while (seen < pass && !clean_pass_started.compare_exchange_weak(seen, pass)) {
        }
      }
    }
  });
  std::vector<std::thread> producers;
  std::atomic<int> failures{0};
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      auto producer_session = session();
      store::Producer producer(*producer_session);
      for (int b = 0; b < kBatches; ++b) {
        std::vector<store::NewMessage> batch;
        for (int i = 0; i < kBatch; ++i) batch.push_back({R"({"p":)" + std::to_string(p) + "}"});
        try {
          producer.produce_batch(stream_.name, batch);
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
          failures++;
        }
        if (b % 4 == 0) {  // the SQL API too
          wait_for_fresh_clean_pass();
          try {
            db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"sql\":1}')");
          } catch (const std::exception& e) {
            ADD_FAILURE() << "SQL produce: " << e.what();
            failures++;
          }
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  done = true;
  janitor.join();
  const int64_t total = kProducers * kBatches * kBatch + kProducers * (kBatches / 4);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(count(family_.messages), total);
  EXPECT_GT(janitor_passes.load(), 0);
  EXPECT_GT(created.load(), 0) << "the janitor created partitions during the burst";
  // After a last pass, at least two partitions' worth of ids are ready past the last id drawn.
  j.run_once(SystemClock::instance().now(), {});
  const int64_t head = db_.scalar<int64_t>("SELECT max(id) FROM " + family_.messages);
  EXPECT_GE(partitions_upto(), head + 1 + 10);
  EXPECT_EQ(partition_count(), (partitions_upto() - 1) / 10);
}

TEST_F(PartitionsTest, CreatesAheadFromTheObservedProduceRateAndTheJanitorPeriod) {
  store::StreamJanitor j(*session_, stream_.id);
  store::JanitorSettings settings;
  settings.janitor_period = Millis(2000);
  j.run_once(now_, settings);  // first sample: nothing drawn yet
  EXPECT_EQ(partitions_upto(), 21);
  for (int i = 0; i < 20; ++i) {  // SQL producers: they never create partitions themselves
    db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"sql\":1}')");
  }
  // 20 ids in 1 s: 20/s × 2 s × kRateSafetyFactor 3 = 120 ids past the head (> 2 × 10).
  auto r = j.run_once(now_ + Millis(1000), settings);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(partitions_upto(), 20 + 120 + 1);
  EXPECT_EQ(partition_count(), 14);
  // A slower rate never shrinks what exists; an idle stream keeps partitions_ahead.
  j.run_once(now_ + Millis(61'000), settings);
  EXPECT_EQ(partitions_upto(), 141);
}

TEST_F(PartitionsTest, CreateAheadIsCappedAtMaxPartitionsAhead) {
  store::StreamJanitor j(*session_, stream_.id);
  store::JanitorSettings settings;
  settings.janitor_period = Millis(3'600'000);  // an hour between passes
  j.run_once(now_, settings);
  for (int i = 0; i < 20; ++i) {
    db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"sql\":1}')");
  }
  j.run_once(now_ + Millis(1000), settings);
  EXPECT_EQ(partitions_upto(), 20 + store::kMaxPartitionsAhead * 10 + 1);
}

TEST_F(PartitionsTest, JanitorHealsAMissingPartitionThatCanStillReceiveIds) {
  produce(5);  // p0 [1, 10]
  store::StreamJanitor j(*session_, stream_.id);
  j.run_once(now_, {});  // p0, p1 [11, 20], p2 [21, 30]
  db_.sql("DROP TABLE " + family_.partition(1));
  auto r = j.run_once(now_, {});
  ASSERT_EQ(r.created.size(), 1u);
  EXPECT_EQ(r.created[0].table, family_.partition_name(1));
  EXPECT_EQ(r.created[0].first_id, 11);
  EXPECT_EQ(r.created[0].last_id, 20);
  EXPECT_EQ(produce(20), 25);
  EXPECT_EQ(count(family_.messages), 25);
}

TEST_F(PartitionsTest, ProducersHealAMissingPartitionInsteadOfFailing) {
  // No janitor: the C++ producer and the SQL API both go past the partitions created so far,
  // with batches larger than a partition.
  EXPECT_EQ(partitions_upto(), 21);
  EXPECT_NO_THROW(produce(35));
  EXPECT_EQ(count(family_.messages), 35);
  for (int i = 0; i < 12; ++i) {
    db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"sql\":1}')");
  }
  db_.sql(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"a\":1}', "
      "'{\"a\":2}']::jsonb[])");
  EXPECT_EQ(count(family_.messages), 49);
  const int64_t head = db_.scalar<int64_t>("SELECT max(id) FROM " + family_.messages);
  EXPECT_GT(partitions_upto(), head);
}

}  // namespace
}  // namespace sqlstreams::testing
