/* The C fake host's emit (ABI 1.3, sqlstreams/testing/fake_host.h): a C handler emits from
 * handle() and from handle_async() before it completes; the fake records each call's outputs
 * with its outcome and refuses a token that names no call. Plain C11; exits non-zero on the first
 * failed check (ctest runs it). */
#include <sqlstreams/testing/fake_host.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static const sqlstreams_type_host_api* host_api = NULL;
static uint64_t kept_token = 0;

static int32_t emit(uint64_t token, const char* payload) {
  sqlstreams_type_output o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.schema_version = 2;
  o.stream.data = "orders.enriched";
  o.stream.len = strlen("orders.enriched");
  o.payload.data = (const uint8_t*)payload;
  o.payload.len = strlen(payload);
  o.message_key.data = "k";
  o.message_key.len = 1;
  return host_api->emit(token, &o, NULL, 0);
}

static bool validate(const char* config, size_t len, sqlstreams_type_error* error) {
  (void)config;
  (void)len;
  (void)error;
  return true;
}

static bool create(const sqlstreams_type_host_api* api, const char* config, size_t len, void** out,
                   sqlstreams_type_error* error) {
  (void)config;
  (void)len;
  (void)error;
  host_api = api;
  *out = NULL;
  return true;
}

static void handle(void* self, const sqlstreams_type_message* m, sqlstreams_type_outcome* out) {
  (void)self;
  emit(m->call_token, "{\"n\": 1}");
  emit(m->call_token, "{\"n\": 2}");
  kept_token = m->call_token;
  out->code = SQLSTREAMS_OUTCOME_OK;
}

static void handle_async(void* self, const sqlstreams_type_message* m, uint64_t token) {
  (void)self;
  emit(m->call_token, "{\"later\": true}");
  host_api->complete(token, SQLSTREAMS_OUTCOME_RETRY, 0, "not yet", 7);
}

static void destroy(void* self) { (void)self; }

static const sqlstreams_type_handler handler = {sizeof(sqlstreams_type_handler),
                                                0,
                                                "c-emit",
                                                1,
                                                0,
                                                validate,
                                                create,
                                                handle,
                                                destroy,
                                                NULL,
                                                0,
                                                0,
                                                handle_async};
static const sqlstreams_type_handler* const handlers[] = {&handler};
static const sqlstreams_type_manifest manifest = {SQLSTREAMS_PLUGIN_MAGIC,
                                                  sizeof(sqlstreams_type_manifest),
                                                  SQLSTREAMS_ABI_MAJOR,
                                                  SQLSTREAMS_ABI_MINOR,
                                                  0,
                                                  "fake-emit",
                                                  "0.1.0",
                                                  "test",
                                                  handlers,
                                                  1};

int main(void) {
  sqlstreams_fake_host host;
  sqlstreams_fake_outcome out;
  sqlstreams_fake_message m;
  uint64_t token;
  CHECK(sqlstreams_fake_host_create(&host, &manifest, "c-emit", "{}"));
  out = sqlstreams_fake_host_handle(&host, "{}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_OK);
  CHECK(out.emit_count == 2);
  CHECK(strcmp(out.last_emit_stream, "orders.enriched") == 0);
  CHECK(strcmp(out.last_emit_payload, "{\"n\": 2}") == 0);
  CHECK(strcmp(out.last_emit_key, "k") == 0);
  CHECK(out.last_emit_schema_version == 2);
  /* The call returned: its token is closed. */
  CHECK(emit(kept_token, "{}") == SQLSTREAMS_EMIT_CLOSED);
  CHECK(emit(0, "{}") == SQLSTREAMS_EMIT_CLOSED);

  memset(&m, 0, sizeof m);
  m.payload = "{}";
  token = sqlstreams_fake_host_start(&host, &m);
  CHECK(token != 0);
  CHECK(sqlstreams_fake_host_poll(&host, token, &out));
  CHECK(out.code == SQLSTREAMS_OUTCOME_RETRY);
  CHECK(out.emit_count == 1); /* recorded whatever the outcome: the real host writes none */
  CHECK(strcmp(out.last_emit_payload, "{\"later\": true}") == 0);
  sqlstreams_fake_host_destroy(&host);
  if (failures == 0) printf("fake_emit_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
