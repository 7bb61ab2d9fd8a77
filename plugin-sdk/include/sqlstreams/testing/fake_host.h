/* sqlstreams/testing/fake_host.h — unit-test a C handler without the daemon or PostgreSQL.
 * Header-only C11 (also valid C++), standard headers only: no JSON library, no runtime.
 * Owns: sqlstreams_fake_host, which drives one handler of a manifest through the C ABI exactly
 * as the host does (validate → create → handle → destroy), keeping copies of error texts and
 * the last log line. Texts longer than SQLSTREAMS_FAKE_TEXT_MAX - 1 bytes are cut.
 * THREADING: one sqlstreams_fake_host per thread; nothing here is thread-safe.
 *
 *   sqlstreams_fake_host host;
 *   if (!sqlstreams_fake_host_create(&host, sqlstreams_plugin_manifest_v1(), "count-items",
 *                                    "{\"max_items\": 10}")) {
 *     fprintf(stderr, "create failed: %s\n", host.error);  return 1;
 *   }
 *   sqlstreams_fake_outcome out = sqlstreams_fake_host_handle(&host, "{\"items\": 3}");
 *   // out.code == SQLSTREAMS_OUTCOME_OK; out.error holds RETRY/TERMINAL text
 *   sqlstreams_fake_host_destroy(&host);
 *   char why[SQLSTREAMS_FAKE_TEXT_MAX], key[SQLSTREAMS_FAKE_TEXT_MAX];
 *   sqlstreams_fake_validate_key(h, "{\"max_items\": 0}", why, key);  // key: "max_items"
 *
 * Asynchronous handlers (ABI 1.2 handle_async): start a message, let the plugin complete it
 * from any thread (host_api->complete), and poll for the outcome:
 *
 *   uint64_t token = sqlstreams_fake_host_start(&host, &msg);  // 0: no handle_async, or full
 *   while (!sqlstreams_fake_host_poll(&host, token, &out)) { ...wait a little... }
 *
 * The completion side is thread-safe (lock-free, GCC/Clang __atomic builtins); start, poll and
 * destroy stay on the fake host's thread. A completion that is unknown, repeated, or comes after
 * destroy is dropped: complete() returns false and sqlstreams_fake_dropped_completions() counts
 * it. At most SQLSTREAMS_FAKE_ASYNC_SLOTS messages are outstanding (started, not yet polled)
 * per translation unit that includes this header.
 *
 * Link the plugin's sources into the test executable (the manifest function is then an
 * ordinary function), or load the built .so yourself with dlopen/dlsym.
 */
#ifndef SQLSTREAMS_TESTING_FAKE_HOST_H_
#define SQLSTREAMS_TESTING_FAKE_HOST_H_

#include <sqlstreams/plugin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQLSTREAMS_FAKE_TEXT_MAX 1024
#define SQLSTREAMS_FAKE_ASYNC_SLOTS 256

/* A host-side error slot with its own copy of the text, and of the config key the plugin named
 * through set_error_key (ABI 1.1; "" when none). */
typedef struct sqlstreams_fake_error {
  sqlstreams_type_error slot;
  bool set;
  char text[SQLSTREAMS_FAKE_TEXT_MAX];
  char key[SQLSTREAMS_FAKE_TEXT_MAX];
} sqlstreams_fake_error;

/* One message; fields left zero get defaults (id 1, attempt 1, schema_version 1,
 * stream "test.stream", group "test-group"). payload is a NUL-terminated JSON text. */
typedef struct sqlstreams_fake_message {
  const char* payload;
  int64_t id;
  int32_t attempt;
  int32_t schema_version;
  const char* stream;
  const char* group;
  const char* message_key; /* NULL: no key */
  int64_t created_at_unix_ms;
} sqlstreams_fake_message;

typedef struct sqlstreams_fake_outcome {
  int32_t code; /* SQLSTREAMS_OUTCOME_* (UNSET when the handler set none) */
  int64_t delay_ms;
  char error[SQLSTREAMS_FAKE_TEXT_MAX]; /* "" when the handler set no text */
  /* ABI 1.3: what the call emitted (host_api->emit), whatever its outcome: the real host
   * writes them only with an OK outcome. The fake accepts any stream. */
  int emit_count;
  int32_t last_emit_schema_version;
  char last_emit_stream[SQLSTREAMS_FAKE_TEXT_MAX];
  char last_emit_payload[SQLSTREAMS_FAKE_TEXT_MAX];
  char last_emit_key[SQLSTREAMS_FAKE_TEXT_MAX]; /* "" when it had none */
} sqlstreams_fake_outcome;

typedef struct sqlstreams_fake_host {
  const sqlstreams_type_handler* handler; /* NULL until create succeeded */
  void* instance;
  sqlstreams_type_host_api api;
  char error[SQLSTREAMS_FAKE_TEXT_MAX];     /* why create (or validate) failed */
  char error_key[SQLSTREAMS_FAKE_TEXT_MAX]; /* the config key it named ("" when none) */
  int log_count;                            /* log lines written so far */
  int32_t last_log_level;                   /* SQLSTREAMS_LOG_* of the last line */
  char last_log[SQLSTREAMS_FAKE_TEXT_MAX];
} sqlstreams_fake_host;

static inline void sqlstreams_fake_copy_text_(char* dst, const char* text, size_t len) {
  if (text == NULL) len = 0;
  if (len > SQLSTREAMS_FAKE_TEXT_MAX - 1) len = SQLSTREAMS_FAKE_TEXT_MAX - 1;
  if (len > 0) memcpy(dst, text, len);
  dst[len] = '\0';
}

static inline void sqlstreams_fake_set_error_(sqlstreams_type_error* slot, const char* text,
                                              size_t len) {
  sqlstreams_fake_error* e = (sqlstreams_fake_error*)slot->host_ctx;
  e->set = true;
  sqlstreams_fake_copy_text_(e->text, text, len);
  e->key[0] = '\0';
}

static inline void sqlstreams_fake_set_error_key_(sqlstreams_type_error* slot, const char* key,
                                                  size_t key_len, const char* text, size_t len) {
  sqlstreams_fake_error* e = (sqlstreams_fake_error*)slot->host_ctx;
  sqlstreams_fake_set_error_(slot, text, len);
  sqlstreams_fake_copy_text_(e->key, key, key_len);
}

static inline void sqlstreams_fake_error_init(sqlstreams_fake_error* e) {
  memset(e, 0, sizeof *e);
  e->slot.struct_size = (uint32_t)sizeof e->slot;
  e->slot.host_ctx = e;
  e->slot.set_error = sqlstreams_fake_set_error_;
  e->slot.set_error_key = sqlstreams_fake_set_error_key_;
}

static inline void sqlstreams_fake_log_(void* ctx, int32_t level, const char* text, size_t len) {
  sqlstreams_fake_host* host = (sqlstreams_fake_host*)ctx;
  host->log_count++;
  host->last_log_level = level;
  sqlstreams_fake_copy_text_(host->last_log, text, len);
}

/* ABI 1.2: one started asynchronous message. `owner` is the host that started it (NULL: the
 * slot is free; only the fake host's thread writes it). `pending` is its token until the
 * plugin completes it (the one compare-and-swap that decides which completion wins), `done`
 * its token once the outcome is written. */
typedef struct sqlstreams_fake_async_slot_ {
  const struct sqlstreams_fake_host* owner;
  uint64_t pending;
  uint64_t done;
  sqlstreams_type_message message;
  sqlstreams_fake_outcome outcome;
} sqlstreams_fake_async_slot_;

typedef struct sqlstreams_fake_async_table_ {
  uint64_t next_token;
  uint64_t dropped;
  sqlstreams_fake_async_slot_ slots[SQLSTREAMS_FAKE_ASYNC_SLOTS];
} sqlstreams_fake_async_table_;

static inline sqlstreams_fake_async_table_* sqlstreams_fake_async_(void) {
  static sqlstreams_fake_async_table_ table; /* zero: every slot free */
  return &table;
}

static inline sqlstreams_fake_async_slot_* sqlstreams_fake_async_slot_of_(uint64_t token) {
  return &sqlstreams_fake_async_()->slots[(token - 1) % SQLSTREAMS_FAKE_ASYNC_SLOTS];
}

/* The synchronous call in progress (handle(): one at a time per process in the C fake) and the
 * outcome its emits are recorded into. */
typedef struct sqlstreams_fake_sync_call_ {
  uint64_t token;
  sqlstreams_fake_outcome* into;
} sqlstreams_fake_sync_call_;

static inline sqlstreams_fake_sync_call_* sqlstreams_fake_sync_call_state_(void) {
  static sqlstreams_fake_sync_call_ call; /* zero: no call */
  return &call;
}

static inline void sqlstreams_fake_record_emit_(sqlstreams_fake_outcome* into,
                                                const sqlstreams_type_output* o) {
  ++into->emit_count;
  into->last_emit_schema_version = o->schema_version;
  sqlstreams_fake_copy_text_(into->last_emit_stream, o->stream.data, o->stream.len);
  sqlstreams_fake_copy_text_(into->last_emit_payload, (const char*)o->payload.data, o->payload.len);
  sqlstreams_fake_copy_text_(into->last_emit_key, o->message_key.data, o->message_key.len);
}

/* host_api->emit (ABI 1.3): records into the call's outcome; CLOSED for a token that names no
 * call in progress. */
static inline int32_t sqlstreams_fake_emit_(uint64_t token, const sqlstreams_type_output* o,
                                            char* reason, size_t reason_size) {
  sqlstreams_fake_sync_call_* call = sqlstreams_fake_sync_call_state_();
  sqlstreams_fake_outcome* into = NULL;
  if (token != 0 && call->token == token) {
    into = call->into;
  } else if (token != 0) {
    sqlstreams_fake_async_slot_* slot = sqlstreams_fake_async_slot_of_(token);
    if (__atomic_load_n(&slot->pending, __ATOMIC_ACQUIRE) == token) into = &slot->outcome;
  }
  if (into == NULL || o == NULL) {
    if (reason != NULL && reason_size > 0) {
      sqlstreams_fake_copy_text_(reason, "fake host: no call in progress has this token",
                                 reason_size > 46 ? 45 : reason_size - 1);
    }
    return SQLSTREAMS_EMIT_CLOSED;
  }
  sqlstreams_fake_record_emit_(into, o);
  return SQLSTREAMS_EMIT_OK;
}

/* host_api->complete: any thread. */
static inline bool sqlstreams_fake_complete_(uint64_t token, int32_t code, int64_t delay_ms,
                                             const char* error, size_t error_len) {
  sqlstreams_fake_async_slot_* slot = sqlstreams_fake_async_slot_of_(token == 0 ? 1 : token);
  uint64_t expected = token;
  if (token == 0 || !__atomic_compare_exchange_n(&slot->pending, &expected, 0, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    __atomic_fetch_add(&sqlstreams_fake_async_()->dropped, 1, __ATOMIC_RELAXED);
    return false;
  }
  slot->outcome.code = code;
  slot->outcome.delay_ms = delay_ms;
  sqlstreams_fake_copy_text_(slot->outcome.error, error, error_len);
  __atomic_store_n(&slot->done, token, __ATOMIC_RELEASE);
  return true;
}

/* Completions dropped so far (unknown or repeated tokens, or after destroy), in this
 * translation unit. */
static inline uint64_t sqlstreams_fake_dropped_completions(void) {
  return __atomic_load_n(&sqlstreams_fake_async_()->dropped, __ATOMIC_RELAXED);
}

/* The handler named `name` in `manifest`, or NULL. */
static inline const sqlstreams_type_handler* sqlstreams_fake_find_handler(
    const sqlstreams_type_manifest* manifest, const char* name) {
  size_t i;
  if (manifest == NULL || manifest->handlers == NULL || name == NULL) return NULL;
  for (i = 0; i < manifest->handler_count; ++i) {
    const sqlstreams_type_handler* h = manifest->handlers[i];
    if (h != NULL && h->name != NULL && strcmp(h->name, name) == 0) return h;
  }
  return NULL;
}

/* Runs the handler's validate(config_json). Returns true when accepted; otherwise copies the
 * plugin's text (or a note that it gave none) into error_out and the config key it named with
 * set_error_key ("" when none) into key_out (each SQLSTREAMS_FAKE_TEXT_MAX bytes, may be
 * NULL). */
static inline bool sqlstreams_fake_validate_key(const sqlstreams_type_handler* handler,
                                                const char* config_json, char* error_out,
                                                char* key_out) {
  sqlstreams_fake_error e;
  const char* none = "(validate failed without an error message)";
  sqlstreams_fake_error_init(&e);
  if (handler->validate(config_json, strlen(config_json), &e.slot)) return true;
  if (error_out != NULL) {
    sqlstreams_fake_copy_text_(error_out, e.set ? e.text : none, strlen(e.set ? e.text : none));
  }
  if (key_out != NULL) sqlstreams_fake_copy_text_(key_out, e.key, strlen(e.key));
  return false;
}

/* sqlstreams_fake_validate_key without the key. */
static inline bool sqlstreams_fake_validate(const sqlstreams_type_handler* handler,
                                            const char* config_json, char* error_out) {
  return sqlstreams_fake_validate_key(handler, config_json, error_out, NULL);
}

/* Finds `handler_name` in `manifest`, validates `config_json` and creates an instance, as the
 * host does once per group. Returns false with host->error set when any step fails. */
static inline bool sqlstreams_fake_host_create(sqlstreams_fake_host* host,
                                               const sqlstreams_type_manifest* manifest,
                                               const char* handler_name, const char* config_json) {
  sqlstreams_fake_error e;
  const sqlstreams_type_handler* h = sqlstreams_fake_find_handler(manifest, handler_name);
  memset(host, 0, sizeof *host);
  host->api.struct_size = (uint32_t)sizeof host->api;
  host->api.host_ctx = host;
  host->api.log = sqlstreams_fake_log_;
  host->api.complete = sqlstreams_fake_complete_;
  host->api.emit = sqlstreams_fake_emit_;
  if (h == NULL) {
    const char* msg = "no handler of that name in the manifest";
    sqlstreams_fake_copy_text_(host->error, msg, strlen(msg));
    return false;
  }
  if (!sqlstreams_fake_validate_key(h, config_json, host->error, host->error_key)) return false;
  sqlstreams_fake_error_init(&e);
  if (!h->create(&host->api, config_json, strlen(config_json), &host->instance, &e.slot)) {
    const char* text = e.set ? e.text : "(create failed without an error message)";
    sqlstreams_fake_copy_text_(host->error, text, strlen(text));
    sqlstreams_fake_copy_text_(host->error_key, e.key, strlen(e.key));
    return false;
  }
  host->handler = h;
  return true;
}

/* The ABI message for `m`, with the defaults filled in; its views point into m's strings. */
static inline void sqlstreams_fake_build_message_(const sqlstreams_fake_message* m,
                                                  sqlstreams_type_message* msg) {
  const char* payload = m->payload != NULL ? m->payload : "{}";
  const char* stream = m->stream != NULL ? m->stream : "test.stream";
  const char* group = m->group != NULL ? m->group : "test-group";
  memset(msg, 0, sizeof *msg);
  msg->struct_size = (uint32_t)sizeof *msg;
  msg->schema_version = m->schema_version != 0 ? m->schema_version : 1;
  msg->id = m->id != 0 ? m->id : 1;
  msg->attempt = m->attempt != 0 ? m->attempt : 1;
  msg->created_at_unix_ms = m->created_at_unix_ms;
  msg->stream.data = stream;
  msg->stream.len = strlen(stream);
  msg->group.data = group;
  msg->group.len = strlen(group);
  msg->payload.data = (const uint8_t*)payload;
  msg->payload.len = strlen(payload);
  if (m->message_key != NULL) {
    msg->message_key.data = m->message_key;
    msg->message_key.len = strlen(m->message_key);
  }
}

/* Calls handle() once with the message `m`. */
static inline sqlstreams_fake_outcome sqlstreams_fake_host_handle_message(
    sqlstreams_fake_host* host, const sqlstreams_fake_message* m) {
  sqlstreams_fake_outcome result;
  sqlstreams_fake_error e;
  sqlstreams_type_message msg;
  sqlstreams_type_outcome out;
  memset(&result, 0, sizeof result);
  memset(&out, 0, sizeof out);
  sqlstreams_fake_error_init(&e);
  sqlstreams_fake_build_message_(m, &msg);
  out.struct_size = (uint32_t)sizeof out;
  out.error = &e.slot;
  msg.call_token = ++sqlstreams_fake_async_()->next_token; /* one counter for every call */
  sqlstreams_fake_sync_call_state_()->token = msg.call_token;
  sqlstreams_fake_sync_call_state_()->into = &result;
  host->handler->handle(host->instance, &msg, &out);
  sqlstreams_fake_sync_call_state_()->token = 0;
  sqlstreams_fake_sync_call_state_()->into = NULL;
  result.code = out.code;
  result.delay_ms = out.delay_ms;
  if (e.set) memcpy(result.error, e.text, sizeof result.error);
  return result;
}

/* Calls handle() once with `payload_json` (first attempt, message id 1). */
static inline sqlstreams_fake_outcome sqlstreams_fake_host_handle(sqlstreams_fake_host* host,
                                                                  const char* payload_json) {
  sqlstreams_fake_message m;
  memset(&m, 0, sizeof m);
  m.payload = payload_json;
  return sqlstreams_fake_host_handle_message(host, &m);
}

/* ABI 1.2: hands `m` to handle_async() and returns its completion token; 0 when the handler has
 * no handle_async or SQLSTREAMS_FAKE_ASYNC_SLOTS messages are outstanding. The strings of *m
 * (payload, stream, group, key) must stay valid until poll returned true for the token or the
 * host was destroyed: the plugin may read them until it completes. */
static inline uint64_t sqlstreams_fake_host_start(sqlstreams_fake_host* host,
                                                  const sqlstreams_fake_message* m) {
  sqlstreams_fake_async_table_* t = sqlstreams_fake_async_();
  sqlstreams_fake_async_slot_* slot;
  uint64_t token;
  if (host->handler == NULL ||
      !SQLSTREAMS_HAS_FIELD(host->handler, sqlstreams_type_handler, handle_async) ||
      host->handler->handle_async == NULL) {
    return 0;
  }
  token = ++t->next_token;
  slot = sqlstreams_fake_async_slot_of_(token);
  if (slot->owner != NULL) {
    --t->next_token;
    return 0;
  }
  slot->owner = host;
  memset(&slot->outcome, 0, sizeof slot->outcome);
  sqlstreams_fake_build_message_(m, &slot->message);
  slot->message.call_token = token;
  __atomic_store_n(&slot->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->pending, token, __ATOMIC_RELEASE);
  host->handler->handle_async(host->instance, &slot->message, token);
  return token;
}

/* ABI 1.2: true once the plugin completed `token`: copies its outcome into *out and forgets
 * the token (poll it again: false). False while it is not completed yet. */
static inline bool sqlstreams_fake_host_poll(sqlstreams_fake_host* host, uint64_t token,
                                             sqlstreams_fake_outcome* out) {
  sqlstreams_fake_async_slot_* slot;
  if (token == 0) return false;
  slot = sqlstreams_fake_async_slot_of_(token);
  if (slot->owner != host || __atomic_load_n(&slot->done, __ATOMIC_ACQUIRE) != token) {
    return false;
  }
  if (out != NULL) *out = slot->outcome;
  __atomic_store_n(&slot->done, 0, __ATOMIC_RELAXED);
  slot->owner = NULL;
  return true;
}

/* Destroys the instance (once); safe after a failed create. Messages it started and the plugin
 * did not complete are dropped, as the host does: a later complete() returns false. */
static inline void sqlstreams_fake_host_destroy(sqlstreams_fake_host* host) {
  size_t i;
  sqlstreams_fake_async_table_* t = sqlstreams_fake_async_();
  for (i = 0; i < SQLSTREAMS_FAKE_ASYNC_SLOTS; ++i) {
    sqlstreams_fake_async_slot_* slot = &t->slots[i];
    uint64_t token;
    if (slot->owner != host) continue;
    token = __atomic_load_n(&slot->pending, __ATOMIC_ACQUIRE);
    if (token == 0 || !__atomic_compare_exchange_n(&slot->pending, &token, 0, false,
                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      /* completed, or being completed right now: wait for its outcome, then forget it */
      while (__atomic_load_n(&slot->done, __ATOMIC_ACQUIRE) == 0) {
      }
      __atomic_store_n(&slot->done, 0, __ATOMIC_RELAXED);
    }
    slot->owner = NULL; /* a later completion finds no token: dropped */
  }
  if (host->handler != NULL) host->handler->destroy(host->instance);
  host->handler = NULL;
  host->instance = NULL;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SQLSTREAMS_TESTING_FAKE_HOST_H_ */
