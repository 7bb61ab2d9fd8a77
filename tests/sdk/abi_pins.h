/* tests/sdk/abi_pins.h — the x86_64 (LP64) layout of every struct in sqlstreams/plugin.h,
 * as one X-macro list checked from C (abi_layout.c) and from C++ (abi_layout_test.cpp).
 * A failing pin means the ABI changed: bump the version, update ABI_SHA256 and CHANGES.md. */
#ifndef SQLSTREAMS_TESTS_SDK_ABI_PINS_H_
#define SQLSTREAMS_TESTS_SDK_ABI_PINS_H_

#include <sqlstreams/plugin.h>

#define SQLSTREAMS_ABI_PINS(SIZE, OFFSET)                   \
  SIZE(sqlstreams_type_str, 16)                             \
  OFFSET(sqlstreams_type_str, data, 0)                      \
  OFFSET(sqlstreams_type_str, len, 8)                       \
  SIZE(sqlstreams_type_bytes, 16)                           \
  OFFSET(sqlstreams_type_bytes, data, 0)                    \
  OFFSET(sqlstreams_type_bytes, len, 8)                     \
  SIZE(sqlstreams_type_error, 32)                           \
  OFFSET(sqlstreams_type_error, struct_size, 0)             \
  OFFSET(sqlstreams_type_error, reserved, 4)                \
  OFFSET(sqlstreams_type_error, host_ctx, 8)                \
  OFFSET(sqlstreams_type_error, set_error, 16)              \
  OFFSET(sqlstreams_type_error, set_error_key, 24)          \
  SIZE(sqlstreams_type_host_api, 40)                        \
  OFFSET(sqlstreams_type_host_api, struct_size, 0)          \
  OFFSET(sqlstreams_type_host_api, reserved, 4)             \
  OFFSET(sqlstreams_type_host_api, host_ctx, 8)             \
  OFFSET(sqlstreams_type_host_api, log, 16)                 \
  OFFSET(sqlstreams_type_host_api, complete, 24)            \
  OFFSET(sqlstreams_type_host_api, emit, 32)                \
  SIZE(sqlstreams_type_output, 72)                          \
  OFFSET(sqlstreams_type_output, struct_size, 0)            \
  OFFSET(sqlstreams_type_output, schema_version, 4)         \
  OFFSET(sqlstreams_type_output, stream, 8)                 \
  OFFSET(sqlstreams_type_output, payload, 24)               \
  OFFSET(sqlstreams_type_output, message_key, 40)           \
  OFFSET(sqlstreams_type_output, idempotency_key, 56)       \
  SIZE(sqlstreams_type_message, 104)                        \
  OFFSET(sqlstreams_type_message, struct_size, 0)           \
  OFFSET(sqlstreams_type_message, schema_version, 4)        \
  OFFSET(sqlstreams_type_message, id, 8)                    \
  OFFSET(sqlstreams_type_message, attempt, 16)              \
  OFFSET(sqlstreams_type_message, reserved, 20)             \
  OFFSET(sqlstreams_type_message, created_at_unix_ms, 24)   \
  OFFSET(sqlstreams_type_message, stream, 32)               \
  OFFSET(sqlstreams_type_message, group, 48)                \
  OFFSET(sqlstreams_type_message, payload, 64)              \
  OFFSET(sqlstreams_type_message, message_key, 80)          \
  OFFSET(sqlstreams_type_message, call_token, 96)           \
  SIZE(sqlstreams_type_outcome, 24)                         \
  OFFSET(sqlstreams_type_outcome, struct_size, 0)           \
  OFFSET(sqlstreams_type_outcome, code, 4)                  \
  OFFSET(sqlstreams_type_outcome, delay_ms, 8)              \
  OFFSET(sqlstreams_type_outcome, error, 16)                \
  SIZE(sqlstreams_type_handler, 80)                         \
  OFFSET(sqlstreams_type_handler, struct_size, 0)           \
  OFFSET(sqlstreams_type_handler, flags, 4)                 \
  OFFSET(sqlstreams_type_handler, name, 8)                  \
  OFFSET(sqlstreams_type_handler, schema_version, 16)       \
  OFFSET(sqlstreams_type_handler, reserved, 20)             \
  OFFSET(sqlstreams_type_handler, validate, 24)             \
  OFFSET(sqlstreams_type_handler, create, 32)               \
  OFFSET(sqlstreams_type_handler, handle, 40)               \
  OFFSET(sqlstreams_type_handler, destroy, 48)              \
  OFFSET(sqlstreams_type_handler, schema_versions, 56)      \
  OFFSET(sqlstreams_type_handler, schema_version_count, 64) \
  OFFSET(sqlstreams_type_handler, reserved2, 68)            \
  OFFSET(sqlstreams_type_handler, handle_async, 72)         \
  SIZE(sqlstreams_type_manifest, 64)                        \
  OFFSET(sqlstreams_type_manifest, magic, 0)                \
  OFFSET(sqlstreams_type_manifest, struct_size, 8)          \
  OFFSET(sqlstreams_type_manifest, abi_major, 12)           \
  OFFSET(sqlstreams_type_manifest, abi_minor, 16)           \
  OFFSET(sqlstreams_type_manifest, reserved, 20)            \
  OFFSET(sqlstreams_type_manifest, plugin_name, 24)         \
  OFFSET(sqlstreams_type_manifest, plugin_version, 32)      \
  OFFSET(sqlstreams_type_manifest, sdk_build, 40)           \
  OFFSET(sqlstreams_type_manifest, handlers, 48)            \
  OFFSET(sqlstreams_type_manifest, handler_count, 56)

/* One measured pin, as the C compiler saw it (filled by abi_layout.c). */
typedef struct sqlstreams_test_pin {
  const char* what;
  size_t measured;
  size_t pinned;
} sqlstreams_test_pin;

#ifdef __cplusplus
extern "C" {
#endif
extern const sqlstreams_test_pin sqlstreams_test_c_pins[];
extern const size_t sqlstreams_test_c_pin_count;
#ifdef __cplusplus
}
#endif

#endif /* SQLSTREAMS_TESTS_SDK_ABI_PINS_H_ */
