/* sqlstreams/set_error.h — report an error through a host's sqlstreams_type_error slot from C,
 * with NUL-terminated strings. Header-only C11 (also valid C++), plugin.h only.
 * sqlstreams_set_error_key names the config key the error is about (ABI 1.1 set_error_key, so
 * the host points at its file:line:col) and falls back to set_error on a 1.0 host.
 * OWNERSHIP: the host copies key and text before returning.
 * THREADING: as the slot: the thread that received it.
 *
 *   if (max_items < 1) {
 *     sqlstreams_set_error_key(error, "max_items", "max_items: must be >= 1");
 *     return false;
 *   }
 */
#ifndef SQLSTREAMS_SET_ERROR_H_
#define SQLSTREAMS_SET_ERROR_H_

#include <sqlstreams/plugin.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline void sqlstreams_set_error(sqlstreams_type_error* slot, const char* text) {
  if (slot != NULL && slot->set_error != NULL) slot->set_error(slot, text, strlen(text));
}

/* `key`: a path inside the handler's config ("max_items", "limits.per_order", "skus[2]"). */
static inline void sqlstreams_set_error_key(sqlstreams_type_error* slot, const char* key,
                                            const char* text) {
  if (slot != NULL && key != NULL &&
      SQLSTREAMS_HAS_FIELD(slot, sqlstreams_type_error, set_error_key) &&
      slot->set_error_key != NULL) {
    slot->set_error_key(slot, key, strlen(key), text, strlen(text));
  } else {
    sqlstreams_set_error(slot, text);
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SQLSTREAMS_SET_ERROR_H_ */
