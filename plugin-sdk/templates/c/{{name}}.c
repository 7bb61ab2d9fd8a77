/* {{name}}.so — handler "{{handler}}" in plain C (C11) against sqlstreams/plugin.h.
 * Payload, schema version 1: {"id": "a-1", "amount": 5}, decoded into struct payload with
 * json-c (sqlstreams/json_c.h). Config (the group's [groups.config]): {"max_amount": N}.
 * THREADING: handle() keeps no shared state, so it is declared concurrent. */
#include <inttypes.h>
#include <sqlstreams/json_c.h>
#include <sqlstreams/plugin.h>
#include <sqlstreams/set_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct payload {
  char id[64];
  int64_t amount;
} payload;

typedef struct instance {
  int64_t max_amount;
  const sqlstreams_type_host_api* host; /* valid until destroy() */
} instance;

/* The typed decode: false with `why` filled when the payload is not a struct payload. */
static bool decode(const sqlstreams_type_bytes* bytes, payload* out, char* why, size_t why_len) {
  json_object* doc = sqlstreams_json_parse((const char*)bytes->data, bytes->len, why, why_len);
  if (doc == NULL) return false;
  const char* id = NULL;
  bool ok = sqlstreams_json_string(doc, "id", &id, why, why_len) &&
            sqlstreams_json_int64(doc, "amount", &out->amount, why, why_len);
  if (ok && strlen(id) >= sizeof out->id) {
    snprintf(why, why_len, "id: at most %zu bytes", sizeof out->id - 1);
    ok = false;
  }
  if (ok) snprintf(out->id, sizeof out->id, "%s", id);
  json_object_put(doc);
  return ok;
}

/* Closed-world config: max_amount (>= 1, default 1000) and nothing else. On a problem `key`
 * names the config key at fault ("" = the whole config), for sqlstreams_set_error_key. */
static bool read_config(const char* json, size_t len, int64_t* max_amount, char* why,
                        size_t why_len, char key[64]) {
  static const char* const kKnown[] = {"max_amount", NULL};
  key[0] = '\0';
  json_object* doc = sqlstreams_json_parse(json, len, why, why_len);
  if (doc == NULL) return false;
  *max_amount = 1000;
  const char* unknown = sqlstreams_json_unknown_key(doc, kKnown);
  snprintf(key, 64, "%s", unknown != NULL ? unknown : "max_amount");
  bool ok = sqlstreams_json_only_keys(doc, kKnown, why, why_len);
  if (ok && json_object_object_get_ex(doc, "max_amount", NULL)) {
    ok = sqlstreams_json_int64(doc, "max_amount", max_amount, why, why_len);
    if (ok && *max_amount < 1) {
      snprintf(why, why_len, "max_amount: must be >= 1");
      ok = false;
    }
  }
  json_object_put(doc);
  return ok;
}

static bool on_validate(const char* config, size_t len, sqlstreams_type_error* error) {
  char why[256], key[64];
  int64_t max_amount;
  if (read_config(config, len, &max_amount, why, sizeof why, key)) return true;
  sqlstreams_set_error_key(error, key, why); /* the host points at that key's line */
  return false;
}

static bool on_create(const sqlstreams_type_host_api* host, const char* config, size_t len,
                      void** instance_out, sqlstreams_type_error* error) {
  char why[256], key[64];
  instance* self = malloc(sizeof *self);
  if (self == NULL) {
    sqlstreams_set_error(error, "out of memory");
    return false;
  }
  if (!read_config(config, len, &self->max_amount, why, sizeof why, key)) {
    free(self);
    sqlstreams_set_error_key(error, key, why);
    return false;
  }
  self->host = host;
  *instance_out = self;
  return true;
}

static void on_handle(void* inst, const sqlstreams_type_message* m, sqlstreams_type_outcome* out) {
  const instance* self = inst;
  char why[256], text[320];
  payload p;
  if (!decode(&m->payload, &p, why, sizeof why)) {  /* no retry can fix it: dead-letter now */
    snprintf(text, sizeof text, "payload does not decode: %s", why);
    sqlstreams_set_error(out->error, text);
    out->code = SQLSTREAMS_OUTCOME_TERMINAL;
    return;
  }
  if (p.amount < 0) {
    sqlstreams_set_error(out->error, "amount is negative");
    out->code = SQLSTREAMS_OUTCOME_TERMINAL;
    return;
  }
  if (p.amount > self->max_amount) { /* transient: the runtime retries after backoff */
    sqlstreams_set_error(out->error, "amount over max_amount");
    out->code = SQLSTREAMS_OUTCOME_RETRY;
    return;
  }
  snprintf(text, sizeof text, "handled message %" PRId64, m->id); /* never log payloads */
  self->host->log(self->host->host_ctx, SQLSTREAMS_LOG_INFO, text, strlen(text));
  out->code = SQLSTREAMS_OUTCOME_OK;
}

static void on_destroy(void* inst) { free(inst); }

/* Every payload schema version handle() understands (a v2 rollout: add 2 here, and decode by
 * m->schema_version); the host passes messages at other versions over. */
static const int32_t versions[] = {1};

static const sqlstreams_type_handler handler = {
    .struct_size = sizeof(sqlstreams_type_handler),
    .flags = SQLSTREAMS_HANDLER_CONCURRENT,
    .name = "{{handler}}", /* the group's `handler =` */
    .schema_version = 1,   /* the newest version of the list */
    .schema_versions = versions,
    .schema_version_count = sizeof versions / sizeof versions[0],
    .validate = on_validate,
    .create = on_create,
    .handle = on_handle,
    .destroy = on_destroy,
};

static const sqlstreams_type_handler* const handlers[] = {&handler};

static const sqlstreams_type_manifest manifest = {
    .magic = SQLSTREAMS_PLUGIN_MAGIC,
    .struct_size = sizeof(sqlstreams_type_manifest),
    .abi_major = SQLSTREAMS_ABI_MAJOR,
    .abi_minor = SQLSTREAMS_ABI_MINOR,
    .plugin_name = "{{name}}",
    .plugin_version = "0.1.0",
    .sdk_build = "sqlstreams-plugin-sdk (C)",
    .handlers = handlers,
    .handler_count = sizeof handlers / sizeof handlers[0],
};

/* The one exported function (SQLSTREAMS_EXPORT: default visibility, C linkage). */
SQLSTREAMS_EXPORT const sqlstreams_type_manifest* sqlstreams_plugin_manifest_v1(void) {
  return &manifest;
}
