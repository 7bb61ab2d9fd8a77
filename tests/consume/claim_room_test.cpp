// Claimer::held_bytes_allowing: how much a group may hold for its next claim to take a message
// of a known size under batch_bytes and queue_bytes (the claimer waits for that, not for any
// freed byte: ByteBudget.AHostHoldsAtMostQueueBytesOfLargePayloads read the same two 1 MiB
// payloads ~4 times per message before it).
#include <gtest/gtest.h>

#include "consume/claimer.hpp"

namespace sqlstreams::consume {
namespace {

struct RoomRow {
  int64_t next_bytes;
  int64_t batch_bytes;
  int64_t queue_bytes;
  int64_t allowed;
};

TEST(ClaimRoom, TheNextMessageFitsBesideAtMostTheAllowedHeldBytes) {
  const RoomRow rows[] = {
      {1, 100, 1000, 999},    // a small message: room for one byte is enough
      {100, 100, 1000, 900},  // exactly batch_bytes still fits a non-empty queue
      {101, 100, 1000, 0},    // past batch_bytes: only as the first of an empty queue
      {1000, 4000, 1000, 0},  // exactly queue_bytes: only into an empty queue
      {1001, 4000, 1000, 0},  // past queue_bytes: alone, first_always
      {1 << 20, 4 << 20, 16 << 20, 15 << 20},  // the ByteBudget test's 1 MiB payloads
  };
  for (const RoomRow& r : rows) {
    config::GroupConfig g;
    g.batch_bytes = r.batch_bytes;
    g.queue_bytes = r.queue_bytes;
    EXPECT_EQ(Claimer::held_bytes_allowing(r.next_bytes, g), r.allowed)
        << r.next_bytes << " bytes, batch_bytes " << r.batch_bytes << ", queue_bytes "
        << r.queue_bytes;
  }
}

}  // namespace
}  // namespace sqlstreams::consume
