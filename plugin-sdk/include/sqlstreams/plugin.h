/* sqlstreams/plugin.h — the plugin ABI: the only thing a SQLStreams host and a handler plugin
 * share. Pure C (C11 and C++20), standard headers only; no C++ type, exception or JSON type
 * crosses it. A plugin exports ONE function, sqlstreams_plugin_manifest_v1, returning a static
 * manifest that describes its handlers.
 *
 * Versioning (ABI 1.3; 1.0, 1.1 and 1.2 plugins load unchanged):
 *   - The host loads a plugin only when abi_major == SQLSTREAMS_ABI_MAJOR and
 *     abi_minor <= the host's SQLSTREAMS_ABI_MINOR, and refuses it otherwise.
 *   - Every struct but the two plain views (str, bytes) starts with uint32_t struct_size (the
 *     manifest: right after its magic). Minors only ever APPEND fields. A reader copies at
 *     most struct_size bytes into a zero-initialised struct of its own and treats missing
 *     trailing fields as absent. The host refuses a manifest or handler descriptor whose
 *     struct_size is larger than it knows.
 *   - magic, struct_size, abi_major and abi_minor stay at the same offsets in every major.
 *   - Error text always travels through a host-owned sqlstreams_type_error slot handed to
 *     the call (validate, create, and each outcome), and the host copies it.
 *   - Any change to this file changes plugin-sdk/ABI_SHA256 and needs a CHANGES.md entry.
 *
 * What the host does with what a plugin hands over (so one bad value cannot stop a group):
 *   - Text (error text through set_error, log text through the host's log function): at most
 *     8192 bytes are read. A len above that is not trusted: the text is read only up to its
 *     first NUL within 8192 bytes. The copy is made valid UTF-8: invalid or truncated
 *     sequences, overlong forms, surrogates, code points above U+10FFFF and NUL bytes each
 *     become U+FFFD; text longer than 8192 bytes is cut at a code point boundary and ends with
 *     " ...(truncated)" (within the 8192 bytes). A NULL text is the empty text.
 *   - DELAY: delay_ms above 30 days (2592000000 ms) is clamped to 30 days (logged once per
 *     handler instance); a negative delay_ms, an unset or unknown outcome code is a plugin bug
 *     and is recorded as RETRY with an error naming it. RETRY or TERMINAL without error text
 *     get a default text.
 *   Send short, valid UTF-8 error text without NUL; never rely on the host to repair it.
 *
 * Naming: sqlstreams_type_* are types, sqlstreams_on_* are functions the plugin implements,
 * sqlstreams_host_* are functions the host implements. Every doc block ends with OWNERSHIP:
 * and THREADING: lines. Strings marked "NUL-terminated" are C strings; the others are
 * (pointer, length) views with no NUL assumption.
 */
#ifndef SQLSTREAMS_PLUGIN_H_
#define SQLSTREAMS_PLUGIN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQLSTREAMS_ABI_MAJOR 1
#define SQLSTREAMS_ABI_MINOR 3
/* "SQLSTRM1" read as a big-endian 64-bit number. */
#define SQLSTREAMS_PLUGIN_MAGIC UINT64_C(0x53514C5354524D31)
/* The name of the one exported entry function (see sqlstreams_on_manifest_fn). */
#define SQLSTREAMS_PLUGIN_ENTRY "sqlstreams_plugin_manifest_v1"

/* True when the sized struct at `ptr` (of type `type`, with a struct_size) carries `field`:
 * a field appended by a later minor is present only when the writer was built with it.
 * Example: SQLSTREAMS_HAS_FIELD(slot, sqlstreams_type_error, set_error_key). */
#define SQLSTREAMS_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* At most this many schema versions in one handler's list (the host refuses more). */
#define SQLSTREAMS_MAX_SCHEMA_VERSIONS 64

#if defined(_WIN32)
#define SQLSTREAMS_EXPORT __declspec(dllexport)
#else
#define SQLSTREAMS_EXPORT __attribute__((visibility("default")))
#endif

/* Outcome codes (sqlstreams_type_outcome.code). 0 means "not set": a handler that returns
 * without setting a code is a plugin bug, and the host records a RETRY. */
#define SQLSTREAMS_OUTCOME_UNSET 0
#define SQLSTREAMS_OUTCOME_OK 1       /* done; nothing is recorded */
#define SQLSTREAMS_OUTCOME_RETRY 2    /* transient failure: retry after backoff */
#define SQLSTREAMS_OUTCOME_DELAY 3    /* try again after delay_ms; spends no retry budget */
#define SQLSTREAMS_OUTCOME_TERMINAL 4 /* dead-letter now: no retry can fix it */

/* Handler flags (sqlstreams_type_handler.flags). Unknown bits make the host refuse. */
/* handle() may run concurrently on one instance; without it the host serialises the calls. */
#define SQLSTREAMS_HANDLER_CONCURRENT UINT32_C(0x1)

/* Log levels (sqlstreams_host_log_fn). */
#define SQLSTREAMS_LOG_TRACE 0
#define SQLSTREAMS_LOG_DEBUG 1
#define SQLSTREAMS_LOG_INFO 2
#define SQLSTREAMS_LOG_WARN 3
#define SQLSTREAMS_LOG_ERROR 4

/* A text view: `len` bytes at `data`, not NUL-terminated. data == NULL means absent.
 * OWNERSHIP: whoever hands it over says how long it lives (see each use).
 * THREADING: immutable while borrowed. */
typedef struct sqlstreams_type_str {
  const char* data;
  size_t len;
} sqlstreams_type_str;

/* A byte view: `len` bytes at `data` (data may be NULL when len == 0).
 * OWNERSHIP: as for sqlstreams_type_str.
 * THREADING: immutable while borrowed. */
typedef struct sqlstreams_type_bytes {
  const uint8_t* data;
  size_t len;
} sqlstreams_type_bytes;

/* An error slot for one call. The plugin reports failure text with
 * `slot->set_error(slot, text, len)`; the host copies the text before set_error returns, and a
 * second call replaces the first. Text is UTF-8, not NUL-terminated; the host reads at most
 * 8192 bytes and sanitizes the copy (see "What the host does" at the top of this file).
 * ABI 1.1: `set_error_key(slot, key_path, key_len, text, len)` does the same and also names
 * the config key the error is about, so the host can point at its file:line:col. key_path is
 * a path inside the handler's config object: keys joined by '.', array elements as [N]
 * (e.g. "max_items", "limits.per_order", "orders[2]"); empty or unknown paths point at the
 * group's config table. Present only when SQLSTREAMS_HAS_FIELD(slot, sqlstreams_type_error,
 * set_error_key) and non-NULL (a 1.0 host has no such field): fall back to set_error.
 * Meant for validate(); a host may ignore the key elsewhere (create(), outcomes).
 * OWNERSHIP: host-owned; valid only during the call it was passed to. The plugin must not
 *   keep the pointer. `text` and `key_path` stay the plugin's.
 * THREADING: one slot per call; use it only from the thread that received it. */
typedef struct sqlstreams_type_error sqlstreams_type_error;
typedef void (*sqlstreams_host_set_error_fn)(sqlstreams_type_error* slot, const char* text,
                                             size_t len);
typedef void (*sqlstreams_host_set_error_key_fn)(sqlstreams_type_error* slot, const char* key_path,
                                                 size_t key_len, const char* text, size_t len);
struct sqlstreams_type_error {
  uint32_t struct_size;
  uint32_t reserved; /* zero */
  void* host_ctx;    /* opaque to the plugin */
  sqlstreams_host_set_error_fn set_error;
  sqlstreams_host_set_error_key_fn set_error_key; /* ABI 1.1 */
};

/* Writes one log line through the host's logger (never put payloads in logs). The text is read
 * and sanitized as error text is (at most 8192 bytes, valid UTF-8).
 * OWNERSHIP: `text` stays the plugin's; the host copies it before returning.
 * THREADING: safe to call from any thread while the instance lives. */
typedef void (*sqlstreams_host_log_fn)(void* host_ctx, int32_t level, const char* text, size_t len);

/* ABI 1.2: completes one message that handle_async() accepted (see sqlstreams_on_handle_async_fn)
 * with the same outcome kinds as handle(): `code` is SQLSTREAMS_OUTCOME_*, `delay_ms` is read for
 * DELAY only, `error`/`error_len` is the error text (read and sanitized as set_error text is;
 * NULL is the empty text). Returns true when the outcome was taken; false when it was dropped:
 * an unknown token, a token completed before (completing twice), or a message the host gave up
 * on (handler_timeout reached, lease lost, the group stopped, the instance destroyed). A dropped
 * completion is counted by the host and otherwise harmless.
 * OWNERSHIP: `error` stays the plugin's; the host copies it before returning. The function
 *   itself is host code that stays valid for the life of the process: it may be called through
 *   a copy of the pointer at any time, even after destroy() of the instance returned (the
 *   completion is then dropped).
 * THREADING: any thread, concurrently, including from inside handle_async(). */
typedef bool (*sqlstreams_host_complete_fn)(uint64_t completion_token, int32_t code,
                                            int64_t delay_ms, const char* error, size_t error_len);

/* ABI 1.3: one message a handler emits during a call (see sqlstreams_host_emit_fn).
 * OWNERSHIP: borrowed for the emit() call only; the host copies every view before it returns.
 * THREADING: read-only during the call. */
typedef struct sqlstreams_type_output {
  uint32_t struct_size;
  int32_t schema_version;              /* >= 1 */
  sqlstreams_type_str stream;          /* one of the group's `emits` */
  sqlstreams_type_bytes payload;       /* a JSON object as text, not NUL-terminated */
  sqlstreams_type_str message_key;     /* data == NULL: no key */
  sqlstreams_type_str idempotency_key; /* data == NULL: none (1 .. 255 bytes otherwise) */
} sqlstreams_type_output;

/* What emit() answers. */
#define SQLSTREAMS_EMIT_OK 0       /* kept; written iff this call's OK outcome is committed */
#define SQLSTREAMS_EMIT_REJECTED 1 /* the output is invalid (the reason says why); not kept */
#define SQLSTREAMS_EMIT_LIMIT 2    /* the call's budget (count or bytes) is spent; not kept */
#define SQLSTREAMS_EMIT_CLOSED 3   /* the call is over, unknown, or may not emit; not kept */

/* ABI 1.3: emits `output` from the call named by `call_token` (the message's call_token; for
 * handle_async the completion token). The host checks the output at once — the stream is one
 * the group declares in `emits`, the payload a JSON object within the stream's
 * max_payload_bytes, the schema version >= 1, the keys within their limits, the call's budget
 * (the group's max_emits_per_message and max_emit_bytes_per_message) — and keeps a copy with
 * the call. The kept outputs are written to their streams in the same transaction that commits
 * the call's OK outcome, and only then: RETRY, DELAY, TERMINAL, a timeout, a lost lease, a crash
 * of the host write none of them. A call that is handled again emits again; only the committed
 * call's outputs appear. On a refusal the host writes NUL-terminated text saying why into
 * `reason` (at most reason_size bytes; reason may be NULL).
 * OWNERSHIP: `output` and its views are borrowed for the call; `reason` is the plugin's buffer.
 *   The function is host code valid for the life of the process (a stale token is CLOSED).
 * THREADING: any thread, concurrently, while the call it names is in progress (for
 *   handle_async: until the plugin completes the message). */
typedef int32_t (*sqlstreams_host_emit_fn)(uint64_t call_token,
                                           const sqlstreams_type_output* output, char* reason,
                                           size_t reason_size);

/* What the host offers one handler instance; handed to create().
 * ABI 1.2 appends `complete` (non-NULL in every 1.2 host; a plugin may check
 * SQLSTREAMS_HAS_FIELD(api, sqlstreams_type_host_api, complete)). ABI 1.3 appends `emit`
 * (non-NULL in every 1.3 host).
 * OWNERSHIP: host-owned; the pointer and host_ctx stay valid until destroy() of that instance
 *   returns, so an instance may keep them (copy `complete` to call it later).
 * THREADING: every function may be called from any thread. */
typedef struct sqlstreams_type_host_api {
  uint32_t struct_size;
  uint32_t reserved; /* zero */
  void* host_ctx;    /* opaque; pass back to the functions below */
  sqlstreams_host_log_fn log;
  sqlstreams_host_complete_fn complete; /* ABI 1.2 */
  sqlstreams_host_emit_fn emit;         /* ABI 1.3 */
} sqlstreams_type_host_api;

/* One message handed to handle().
 * ABI 1.3 appends call_token: what host_api->emit names the call by. It is 0 when the group
 * declares no `emits` (emit then answers CLOSED); for handle_async it is the completion token.
 * OWNERSHIP: host-owned; the struct and every view in it (stream, group, payload,
 *   message_key) are borrowed for the duration of the handle() call only: copy what you keep.
 * THREADING: read-only; each call gets its own message. */
typedef struct sqlstreams_type_message {
  uint32_t struct_size;
  int32_t schema_version;     /* the producer's payload schema version */
  int64_t id;                 /* position in the stream; unique per stream */
  int32_t attempt;            /* 1 = first delivery to this group */
  uint32_t reserved;          /* zero */
  int64_t created_at_unix_ms; /* when the message was produced */
  sqlstreams_type_str stream;
  sqlstreams_type_str group;
  sqlstreams_type_bytes payload;   /* JSON text, not NUL-terminated */
  sqlstreams_type_str message_key; /* data == NULL when the message has no key */
  uint64_t call_token;             /* ABI 1.3: for host_api->emit; 0 = this call may not emit */
} sqlstreams_type_message;

/* What handle() decided. The host zeroes it, fills struct_size and error, and the plugin sets
 * code (and delay_ms for DELAY); error text goes through error->set_error.
 * OWNERSHIP: host-owned, valid during the handle() call only; error as sqlstreams_type_error.
 * THREADING: one outcome per call. */
typedef struct sqlstreams_type_outcome {
  uint32_t struct_size;
  int32_t code;     /* SQLSTREAMS_OUTCOME_* */
  int64_t delay_ms; /* DELAY only; >= 0; above 30 days the host uses 30 days */
  sqlstreams_type_error* error;
} sqlstreams_type_outcome;

/* Checks a handler config without side effects (used by `sqlstreams config check`).
 * `config_json` is a JSON object as text (len bytes, not NUL-terminated). Returns true when
 * the config is acceptable; otherwise sets an error on `error_out` and returns false.
 * OWNERSHIP: config_json and error_out are borrowed for the call.
 * THREADING: may run on any thread, concurrently with other calls. */
typedef bool (*sqlstreams_on_validate_fn)(const char* config_json, size_t len,
                                          sqlstreams_type_error* error_out);

/* Creates one handler instance (once per consumer group). On success stores an opaque
 * instance (may be NULL) in *instance_out and returns true; otherwise sets an error and
 * returns false (no instance exists then, and destroy is not called).
 * OWNERSHIP: the instance is plugin-owned until destroy(); host_api lives until destroy()
 *   returns; config_json and error_out are borrowed for the call.
 * THREADING: control-plane thread; never concurrent with handle() on the same instance. */
typedef bool (*sqlstreams_on_create_fn)(const sqlstreams_type_host_api* host_api,
                                        const char* config_json, size_t len, void** instance_out,
                                        sqlstreams_type_error* error_out);

/* Handles one message and sets outcome->code. Must not throw or longjmp out.
 * OWNERSHIP: message and outcome are borrowed for the call.
 * THREADING: concurrently on one instance iff the descriptor has
 *   SQLSTREAMS_HANDLER_CONCURRENT; otherwise the host calls it from one thread at a time. */
typedef void (*sqlstreams_on_handle_fn)(void* instance, const sqlstreams_type_message* message,
                                        sqlstreams_type_outcome* outcome);

/* ABI 1.2, optional: accepts one message and completes it later, from any thread, by calling
 * host_api->complete(completion_token, ...) exactly once; returns at once (it must not wait for
 * the work). A host that has handle_async in a descriptor runs the handler this way: no host
 * thread waits for the outcome, and the group's `max_in_flight` bounds how many messages are
 * accepted and not yet completed. The runtime keeps every rule of handle(): handler_timeout
 * applies per message (then the host records a RETRY and drops the late completion), lease
 * loss and stop drop completions too, retries and dead letters follow the outcome kind.
 * handle() stays required: the host calls it where it runs messages one at a time (isolation
 * = "process" runs handle() in the child); it may wait for its own asynchronous work.
 * OWNERSHIP: `message` and every view in it stay valid until the plugin calls complete() for
 *   its token, or until destroy() of the instance returns, whichever comes first; the host then
 *   frees them. Reading them after complete() is a use-after-free. The token is a plain number
 *   (never reused in the process), not a pointer.
 * THREADING: like handle(): concurrently on one instance iff SQLSTREAMS_HANDLER_CONCURRENT,
 *   otherwise one call at a time (completions may still come from any thread at any time). */
typedef void (*sqlstreams_on_handle_async_fn)(void* instance,
                                              const sqlstreams_type_message* message,
                                              uint64_t completion_token);

/* Destroys an instance made by create(); called exactly once per successful create().
 * OWNERSHIP: ends the instance's life; the host_api given to its create() dies after this.
 *   Messages accepted by handle_async() and not completed yet stay readable during destroy()
 *   (completing them there is allowed: they are dropped) and are freed when it returns.
 * THREADING: called after every handle() and handle_async() call on the instance has returned. */
typedef void (*sqlstreams_on_destroy_fn)(void* instance);

/* Describes one handler of a plugin.
 * Payload schema versions: ABI 1.1 appends a list, schema_versions[0 .. schema_version_count),
 * of every version handle() understands (each >= 1, no duplicates, at most
 * SQLSTREAMS_MAX_SCHEMA_VERSIONS; the host refuses the plugin otherwise). With
 * schema_version_count == 0 (and in every 1.0 plugin) the list is the one schema_version.
 * With a list, set schema_version to its newest entry (what a single-version reader shows).
 * Asynchronous completion: ABI 1.2 appends handle_async (see sqlstreams_on_handle_async_fn);
 * NULL (and every 1.0/1.1 plugin) means the host calls handle() only.
 * OWNERSHIP: plugin-owned static data, valid while the library is loaded (forever: the host
 *   never unloads plugins). name is NUL-terminated, unique within the plugin; schema_versions
 *   points to static data too.
 * THREADING: immutable. */
typedef struct sqlstreams_type_handler {
  uint32_t struct_size;
  uint32_t flags;         /* SQLSTREAMS_HANDLER_* */
  const char* name;       /* e.g. "charge-cards" */
  int32_t schema_version; /* payload schema version this handler understands */
  uint32_t reserved;      /* zero */
  sqlstreams_on_validate_fn validate;
  sqlstreams_on_create_fn create;
  sqlstreams_on_handle_fn handle;
  sqlstreams_on_destroy_fn destroy;
  const int32_t* schema_versions; /* ABI 1.1: every version understood; NULL when count 0 */
  uint32_t schema_version_count;  /* ABI 1.1: 0 = just schema_version */
  uint32_t reserved2;             /* zero */
  sqlstreams_on_handle_async_fn handle_async; /* ABI 1.2: NULL = handle() only */
} sqlstreams_type_handler;

/* What a plugin is. Checked by the host before anything else runs.
 * OWNERSHIP: plugin-owned static data, valid while the library is loaded (forever). Strings
 *   are NUL-terminated. `handlers` is an array of handler_count pointers (pointers, so that a
 *   descriptor can grow without changing the array stride).
 * THREADING: immutable. */
typedef struct sqlstreams_type_manifest {
  uint64_t magic;       /* SQLSTREAMS_PLUGIN_MAGIC */
  uint32_t struct_size; /* sizeof(sqlstreams_type_manifest) as the plugin was built */
  uint32_t abi_major;   /* SQLSTREAMS_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;   /* SQLSTREAMS_ABI_MINOR the plugin was built with */
  uint32_t reserved;    /* zero */
  const char* plugin_name;
  const char* plugin_version;
  const char* sdk_build; /* free text, e.g. "sqlstreams-plugin-sdk 1.0 g++ 12.2" */
  const sqlstreams_type_handler* const* handlers;
  size_t handler_count;
} sqlstreams_type_manifest;

/* The entry function every plugin exports (with default visibility) under the name
 * SQLSTREAMS_PLUGIN_ENTRY. Returns the same static manifest every time.
 * OWNERSHIP: the manifest is plugin-owned static data.
 * THREADING: may be called from any thread; must not fail, allocate per call or throw. */
typedef const sqlstreams_type_manifest* (*sqlstreams_on_manifest_fn)(void);
SQLSTREAMS_EXPORT const sqlstreams_type_manifest* sqlstreams_plugin_manifest_v1(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SQLSTREAMS_PLUGIN_H_ */
