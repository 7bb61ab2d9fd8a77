/* c_orders.so — a handler plugin in plain C (C11) against sqlstreams/plugin.h, reading its
 * payload and config with json-c (Debian package libjson-c-dev; the SDK does not need it).
 *
 * The JSON helpers (sqlstreams/json_c.h) parse exactly the payload's bytes and name the key
 * in every error.
 *
 * Handler "count-items", two payload schema versions (ABI 1.1 list: schema_versions):
 *   v1 {"order_id": "o-1", "items": 3}, v2 {"order_id": "o-1", "item_count": 3}; both decode
 *   into struct order (the newest shape), so the rest of the handler sees one type.
 *   - a payload that does not decode into struct order → TERMINAL (no retry can fix it);
 *   - more items than the config's max_items → TERMINAL;
 *   - otherwise OK, with one info log line naming the message id (never the payload).
 * Config (the group's [groups.config]): {"max_items": N}, N >= 1, default 100; unknown keys
 * are refused (closed-world, like the host's own config). Errors name the key
 * (sqlstreams_set_error_key), so `sqlstreams config check` points at its line.
 * THREADING: handle() keeps no shared state (one json_tokener per call): declared concurrent.
 */
#include <inttypes.h>
#include <sqlstreams/json_c.h>
#include <sqlstreams/plugin.h>
#include <sqlstreams/set_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct order {
  char order_id[64];
  int64_t items;
} order;

typedef struct instance {
  int64_t max_items;
  const sqlstreams_type_host_api* host; /* valid until destroy() */
} instance;

/* The typed decode of each version: false with `why` filled when the payload is not an order
 * of that version. */
static bool decode_order(const sqlstreams_type_bytes* payload, int32_t version, order* out,
                         char* why, size_t why_len) {
  const char* count_key = version == 1 ? "items" : "item_count"; /* v2 renamed it */
  json_object* doc = sqlstreams_json_parse((const char*)payload->data, payload->len, why, why_len);
  if (doc == NULL) return false;
  const char* id = NULL;
  bool ok = sqlstreams_json_string(doc, "order_id", &id, why, why_len) &&
            sqlstreams_json_int64(doc, count_key, &out->items, why, why_len);
  if (ok && (id[0] == '\0' || strlen(id) >= sizeof out->order_id)) {
    snprintf(why, why_len, "order_id: 1 to %zu bytes are required", sizeof out->order_id - 1);
    ok = false;
  } else if (ok && out->items < 0) {
    snprintf(why, why_len, "%s: must be >= 0", count_key);
    ok = false;
  }
  if (ok) snprintf(out->order_id, sizeof out->order_id, "%s", id);
  json_object_put(doc);
  return ok;
}

/* Reads the config into *max_items; false with `why` and `key` (the config key at fault, ""
 * for the whole config) filled when it is not acceptable. */
static bool read_config(const char* json, size_t len, int64_t* max_items, char* why, size_t why_len,
                        char key[64]) {
  static const char* const kKnown[] = {"max_items", NULL};
  key[0] = '\0';
  json_object* doc = sqlstreams_json_parse(json, len, why, why_len);
  if (doc == NULL) return false;
  *max_items = 100;
  const char* unknown = sqlstreams_json_unknown_key(doc, kKnown);
  if (unknown != NULL) snprintf(key, 64, "%s", unknown);
  bool ok = sqlstreams_json_only_keys(doc, kKnown, why, why_len);
  if (ok) snprintf(key, 64, "max_items");
  if (ok && json_object_object_get_ex(doc, "max_items", NULL)) {
    ok = sqlstreams_json_int64(doc, "max_items", max_items, why, why_len);
    if (ok && *max_items < 1) {
      snprintf(why, why_len, "max_items: must be >= 1");
      ok = false;
    }
  }
  json_object_put(doc);
  return ok;
}

static bool on_validate(const char* config, size_t len, sqlstreams_type_error* error) {
  char why[256], key[64];
  int64_t max_items;
  if (read_config(config, len, &max_items, why, sizeof why, key)) return true;
  sqlstreams_set_error_key(error, key, why);
  return false;
}

static bool on_create(const sqlstreams_type_host_api* host, const char* config, size_t len,
                      void** instance_out, sqlstreams_type_error* error) {
  char why[256], key[64];
  int64_t max_items;
  if (!read_config(config, len, &max_items, why, sizeof why, key)) {
    sqlstreams_set_error_key(error, key, why);
    return false;
  }
  instance* self = malloc(sizeof *self);
  if (self == NULL) {
    sqlstreams_set_error(error, "out of memory");
    return false;
  }
  self->max_items = max_items;
  self->host = host;
  *instance_out = self;
  return true;
}

static void on_handle(void* inst, const sqlstreams_type_message* m, sqlstreams_type_outcome* out) {
  const instance* self = inst;
  char text[256];
  order o;
  if (!decode_order(&m->payload, m->schema_version, &o, text, sizeof text)) {
    char why[300];
    snprintf(why, sizeof why, "payload does not decode into an order (v%d): %s",
             (int)m->schema_version, text);
    sqlstreams_set_error(out->error, why);
    out->code = SQLSTREAMS_OUTCOME_TERMINAL;
    return;
  }
  if (o.items > self->max_items) {
    snprintf(text, sizeof text, "order has %" PRId64 " items, over max_items %" PRId64, o.items,
             self->max_items);
    sqlstreams_set_error(out->error, text);
    out->code = SQLSTREAMS_OUTCOME_TERMINAL;
    return;
  }
  snprintf(text, sizeof text, "counted message %" PRId64, m->id);
  self->host->log(self->host->host_ctx, SQLSTREAMS_LOG_INFO, text, strlen(text));
  out->code = SQLSTREAMS_OUTCOME_OK;
}

static void on_destroy(void* inst) { free(inst); }

/* Every payload version handle() understands; the host passes other versions over. */
static const int32_t versions[] = {1, 2};

static const sqlstreams_type_handler count_items = {
    .struct_size = sizeof(sqlstreams_type_handler),
    .flags = SQLSTREAMS_HANDLER_CONCURRENT,
    .name = "count-items",
    .schema_version = 2, /* the newest (what a single-version reader shows) */
    .schema_versions = versions,
    .schema_version_count = sizeof versions / sizeof versions[0],
    .validate = on_validate,
    .create = on_create,
    .handle = on_handle,
    .destroy = on_destroy,
};

static const sqlstreams_type_handler* const handlers[] = {&count_items};

static const sqlstreams_type_manifest manifest = {
    .magic = SQLSTREAMS_PLUGIN_MAGIC,
    .struct_size = sizeof(sqlstreams_type_manifest),
    .abi_major = SQLSTREAMS_ABI_MAJOR,
    .abi_minor = SQLSTREAMS_ABI_MINOR,
    .plugin_name = "c_orders",
    .plugin_version = "1.0.0",
    .sdk_build = "sqlstreams-plugin-sdk (C)",
    .handlers = handlers,
    .handler_count = sizeof handlers / sizeof handlers[0],
};

SQLSTREAMS_EXPORT const sqlstreams_type_manifest* sqlstreams_plugin_manifest_v1(void) {
  return &manifest;
}
