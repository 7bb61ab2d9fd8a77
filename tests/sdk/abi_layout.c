/* Compiles sqlstreams/plugin.h as strict C11 and pins the layout of every boundary struct. */
#include <stddef.h>

#include "abi_pins.h"

#if !defined(__x86_64__)
#error "the ABI pins are for x86_64 (LP64); add pins for this platform"
#endif

#define C_PIN_SIZE(T, n) _Static_assert(sizeof(T) == (n), "sizeof(" #T ") changed");
#define C_PIN_OFFSET(T, f, n) \
  _Static_assert(offsetof(T, f) == (n), "offsetof(" #T ", " #f ") changed");
SQLSTREAMS_ABI_PINS(C_PIN_SIZE, C_PIN_OFFSET)

_Static_assert(SQLSTREAMS_ABI_MAJOR == 1 && SQLSTREAMS_ABI_MINOR == 3, "ABI version changed");
_Static_assert(SQLSTREAMS_OUTCOME_UNSET == 0, "a zeroed outcome must mean 'not set'");

#define C_ROW_SIZE(T, n) {"sizeof(" #T ")", sizeof(T), (n)},
#define C_ROW_OFFSET(T, f, n) {"offsetof(" #T ", " #f ")", offsetof(T, f), (n)},
const sqlstreams_test_pin sqlstreams_test_c_pins[] = {
    SQLSTREAMS_ABI_PINS(C_ROW_SIZE, C_ROW_OFFSET)};
const size_t sqlstreams_test_c_pin_count =
    sizeof sqlstreams_test_c_pins / sizeof sqlstreams_test_c_pins[0];
