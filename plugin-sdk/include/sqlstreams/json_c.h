/* sqlstreams/json_c.h — reading a payload or config JSON text in a C plugin with json-c.
 * Optional: the C SDK (plugin.h, testing/fake_host.h) needs no JSON library; include this
 * header only in a plugin that links json-c 0.15 or newer (Debian: libjson-c-dev; CMake:
 * find_package(json-c CONFIG) → json-c::json-c). Header-only C11.
 * Every function returns false (or NULL) with a one-line reason in `why` (why_len bytes,
 * NUL-terminated) that names the key, ready to be a TERMINAL error or a validate() error.
 * OWNERSHIP: sqlstreams_json_parse returns a new reference: json_object_put() it. Strings
 * from sqlstreams_json_string point into the object and live as long as it does.
 * THREADING: no shared state (a json_tokener per parse); call from any thread.
 *
 *   char why[256];
 *   json_object* doc = sqlstreams_json_parse((const char*)m->payload.data, m->payload.len,
 *                                            why, sizeof why);
 *   const char* id;  int64_t amount;
 *   if (doc == NULL || !sqlstreams_json_string(doc, "id", &id, why, sizeof why) ||
 *       !sqlstreams_json_int64(doc, "amount", &amount, why, sizeof why)) { ... TERMINAL ... }
 *   json_object_put(doc);
 */
#ifndef SQLSTREAMS_JSON_C_H_
#define SQLSTREAMS_JSON_C_H_

#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses exactly `len` bytes (no NUL needed) holding one JSON object. */
static inline json_object* sqlstreams_json_parse(const char* text, size_t len, char* why,
                                                 size_t why_len) {
  json_tokener* tok;
  json_object* obj;
  enum json_tokener_error err;
  if (len > (size_t)INT_MAX) {
    snprintf(why, why_len, "%zu bytes of JSON is more than json-c reads at once", len);
    return NULL;
  }
  tok = json_tokener_new();
  if (tok == NULL) {
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  obj = json_tokener_parse_ex(tok, text, (int)len);
  err = json_tokener_get_error(tok);
  if (obj == NULL || err != json_tokener_success) {
    snprintf(why, why_len, "not JSON: %s",
             err == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(err));
    json_object_put(obj);
    obj = NULL;
  } else if (json_tokener_get_parse_end(tok) < len) {
    snprintf(why, why_len, "not JSON: text after the value");
    json_object_put(obj);
    obj = NULL;
  } else if (!json_object_is_type(obj, json_type_object)) {
    snprintf(why, why_len, "not a JSON object (got %s)",
             json_type_to_name(json_object_get_type(obj)));
    json_object_put(obj);
    obj = NULL;
  }
  json_tokener_free(tok);
  return obj;
}

/* obj[key] must be a string; *out points into obj. */
static inline bool sqlstreams_json_string(json_object* obj, const char* key, const char** out,
                                          char* why, size_t why_len) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string)) {
    snprintf(why, why_len, "%s: a string is required (got %s)", key,
             v == NULL ? "nothing" : json_type_to_name(json_object_get_type(v)));
    return false;
  }
  *out = json_object_get_string(v);
  return true;
}

/* obj[key] must be a whole number (no fraction); above INT64_MAX is refused (json-c clamps
 * numbers below INT64_MIN to INT64_MIN when it parses). */
static inline bool sqlstreams_json_int64(json_object* obj, const char* key, int64_t* out, char* why,
                                         size_t why_len) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_int)) {
    snprintf(why, why_len, "%s: a whole number is required (got %s)", key,
             v == NULL ? "nothing" : json_type_to_name(json_object_get_type(v)));
    return false;
  }
  *out = json_object_get_int64(v);
  if (*out == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX) {
    snprintf(why, why_len, "%s: out of range for a 64-bit integer", key);
    return false;
  }
  return true;
}

/* The first key of obj that is not in `known` (a NULL-terminated list), or NULL. The string
 * lives as long as obj. */
static inline const char* sqlstreams_json_unknown_key(json_object* obj, const char* const* known) {
  json_object_object_foreach(obj, key, value) {
    const char* const* k = known;
    (void)value;
    while (*k != NULL && strcmp(*k, key) != 0) ++k;
    if (*k == NULL) return key;
  }
  return NULL;
}

/* Closed-world: every key of obj is one of `known` (a NULL-terminated list). */
static inline bool sqlstreams_json_only_keys(json_object* obj, const char* const* known, char* why,
                                             size_t why_len) {
  const char* unknown = sqlstreams_json_unknown_key(obj, known);
  if (unknown == NULL) return true;
  snprintf(why, why_len, "unknown key '%.64s'", unknown);
  return false;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SQLSTREAMS_JSON_C_H_ */
