// The same layout pins as abi_layout.c, checked by the C++ compiler, plus C-vs-C++ agreement
// and the values of every ABI constant.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "abi_pins.h"

#define CXX_PIN_SIZE(T, n) static_assert(sizeof(T) == (n), "sizeof(" #T ") changed");
#define CXX_PIN_OFFSET(T, f, n) \
  static_assert(offsetof(T, f) == (n), "offsetof(" #T ", " #f ") changed");
SQLSTREAMS_ABI_PINS(CXX_PIN_SIZE, CXX_PIN_OFFSET)

namespace {

#define CXX_ROW_SIZE(T, n) {"sizeof(" #T ")", sizeof(T), (n)},
#define CXX_ROW_OFFSET(T, f, n) {"offsetof(" #T ", " #f ")", offsetof(T, f), (n)},
const sqlstreams_test_pin kCxxPins[] = {SQLSTREAMS_ABI_PINS(CXX_ROW_SIZE, CXX_ROW_OFFSET)};

TEST(AbiLayout, CAndCxxCompilersAgreeOnEveryPin) {
  ASSERT_EQ(sqlstreams_test_c_pin_count, std::size(kCxxPins));
  for (size_t i = 0; i < std::size(kCxxPins); ++i) {
    SCOPED_TRACE(kCxxPins[i].what);
    EXPECT_EQ(std::string(sqlstreams_test_c_pins[i].what), kCxxPins[i].what);
    EXPECT_EQ(sqlstreams_test_c_pins[i].measured, kCxxPins[i].measured);
    EXPECT_EQ(sqlstreams_test_c_pins[i].measured, sqlstreams_test_c_pins[i].pinned);
  }
}

TEST(AbiLayout, ConstantsArePinned) {
  EXPECT_EQ(SQLSTREAMS_ABI_MAJOR, 1);
  EXPECT_EQ(SQLSTREAMS_ABI_MINOR, 3);
  EXPECT_EQ(SQLSTREAMS_EMIT_OK, 0);
  EXPECT_EQ(SQLSTREAMS_EMIT_REJECTED, 1);
  EXPECT_EQ(SQLSTREAMS_EMIT_LIMIT, 2);
  EXPECT_EQ(SQLSTREAMS_EMIT_CLOSED, 3);
  EXPECT_EQ(SQLSTREAMS_MAX_SCHEMA_VERSIONS, 64);
  EXPECT_EQ(SQLSTREAMS_PLUGIN_MAGIC, 0x53514C5354524D31ull);
  EXPECT_STREQ(SQLSTREAMS_PLUGIN_ENTRY, "sqlstreams_plugin_manifest_v1");
  EXPECT_EQ(SQLSTREAMS_OUTCOME_UNSET, 0);
  EXPECT_EQ(SQLSTREAMS_OUTCOME_OK, 1);
  EXPECT_EQ(SQLSTREAMS_OUTCOME_RETRY, 2);
  EXPECT_EQ(SQLSTREAMS_OUTCOME_DELAY, 3);
  EXPECT_EQ(SQLSTREAMS_OUTCOME_TERMINAL, 4);
  EXPECT_EQ(SQLSTREAMS_HANDLER_CONCURRENT, 1u);
  EXPECT_EQ(SQLSTREAMS_LOG_TRACE, 0);
  EXPECT_EQ(SQLSTREAMS_LOG_ERROR, 4);
}

}  // namespace
