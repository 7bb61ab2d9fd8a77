/* The C fake host's asynchronous path (ABI 1.2, sqlstreams/testing/fake_host.h): a C handler
 * with handle_async completes inline, later from another thread, twice, or after destroy; the
 * fake host reports each outcome once and drops what the real host drops. Plain C11 + pthreads;
 * exits non-zero on the first failed check (ctest runs it). */
#include <pthread.h>
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

/* The instance keeps the host's complete function and the last "later" token. */
typedef struct instance {
  sqlstreams_host_complete_fn complete;
  uint64_t later_token;
  char later_payload[64];
} instance;

static bool validate(const char* config, size_t len, sqlstreams_type_error* error) {
  (void)config;
  (void)len;
  (void)error;
  return true;
}

static bool create(const sqlstreams_type_host_api* api, const char* config, size_t len, void** out,
                   sqlstreams_type_error* error) {
  static instance inst;
  (void)config;
  (void)len;
  (void)error;
  memset(&inst, 0, sizeof inst);
  inst.complete = api->complete;
  *out = &inst;
  return true;
}

static void handle(void* self, const sqlstreams_type_message* m, sqlstreams_type_outcome* out) {
  (void)self;
  (void)m;
  out->code = SQLSTREAMS_OUTCOME_OK;
}

/* "now" completes inside the call; "retry" too, with a RETRY and its text; anything else is
 * kept for the test to complete later (the message stays readable until then). */
static void handle_async(void* self, const sqlstreams_type_message* m, uint64_t token) {
  instance* inst = (instance*)self;
  const char* payload = (const char*)m->payload.data;
  if (m->payload.len == 5 && memcmp(payload, "\"now\"", 5) == 0) {
    inst->complete(token, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0);
  } else if (m->payload.len == 7 && memcmp(payload, "\"retry\"", 7) == 0) {
    inst->complete(token, SQLSTREAMS_OUTCOME_RETRY, 0, "upstream busy", 13);
  } else {
    inst->later_token = token;
  }
}

static void destroy(void* self) { (void)self; }

static const sqlstreams_type_handler kHandler = {sizeof(sqlstreams_type_handler),
                                                 SQLSTREAMS_HANDLER_CONCURRENT,
                                                 "async-test",
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
static const sqlstreams_type_handler* const kHandlers[] = {&kHandler};

/* A second thread completes the kept message: the delay a network client would report. */
static void* complete_later(void* arg) {
  instance* inst = (instance*)arg;
  /* The message is still the plugin's to read until it completes: read it first. */
  CHECK(strcmp(inst->later_payload, "\"later\"") == 0);
  CHECK(inst->complete(inst->later_token, SQLSTREAMS_OUTCOME_DELAY, 250, "rate limited", 12));
  return NULL;
}

int main(void) {
  sqlstreams_type_manifest manifest;
  sqlstreams_fake_host host;
  sqlstreams_fake_outcome out;
  sqlstreams_fake_message m;
  pthread_t thread;
  uint64_t token, dropped;
  instance* inst;

  memset(&manifest, 0, sizeof manifest);
  manifest.struct_size = (uint32_t)sizeof manifest;
  manifest.handlers = kHandlers;
  manifest.handler_count = 1;
  if (!sqlstreams_fake_host_create(&host, &manifest, "async-test", "{}")) {
    fprintf(stderr, "create failed: %s\n", host.error);
    return 1;
  }
  inst = (instance*)host.instance;
  CHECK(inst->complete != NULL); /* a 1.2 host offers complete */
  memset(&m, 0, sizeof m);

  /* Completed inside handle_async: the outcome is there at once, and only once. */
  m.payload = "\"now\"";
  token = sqlstreams_fake_host_start(&host, &m);
  CHECK(token != 0);
  CHECK(sqlstreams_fake_host_poll(&host, token, &out));
  CHECK(out.code == SQLSTREAMS_OUTCOME_OK && out.error[0] == '\0');
  CHECK(!sqlstreams_fake_host_poll(&host, token, &out));

  m.payload = "\"retry\"";
  token = sqlstreams_fake_host_start(&host, &m);
  CHECK(sqlstreams_fake_host_poll(&host, token, &out));
  CHECK(out.code == SQLSTREAMS_OUTCOME_RETRY && strcmp(out.error, "upstream busy") == 0);

  /* Completed later, from another thread. */
  m.payload = "\"later\"";
  token = sqlstreams_fake_host_start(&host, &m);
  CHECK(token != 0 && inst->later_token == token);
  CHECK(!sqlstreams_fake_host_poll(&host, token, &out)); /* not completed yet */
  memcpy(inst->later_payload, m.payload, strlen(m.payload) + 1);
  CHECK(pthread_create(&thread, NULL, complete_later, inst) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(sqlstreams_fake_host_poll(&host, token, &out));
  CHECK(out.code == SQLSTREAMS_OUTCOME_DELAY && out.delay_ms == 250);
  CHECK(strcmp(out.error, "rate limited") == 0);

  /* Completing twice, or an unknown token: dropped and counted, never an outcome. */
  dropped = sqlstreams_fake_dropped_completions();
  CHECK(!inst->complete(token, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0));
  CHECK(!inst->complete(987654321, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0));
  CHECK(!inst->complete(0, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0));
  CHECK(sqlstreams_fake_dropped_completions() == dropped + 3);
  CHECK(!sqlstreams_fake_host_poll(&host, token, &out));

  /* More outstanding messages than slots: start says so with 0, nothing is overwritten. */
  {
    uint64_t first = 0, last = 0, n = 0;
    m.payload = "\"later\"";
    for (;;) {
      uint64_t t = sqlstreams_fake_host_start(&host, &m);
      if (t == 0) break;
      if (first == 0) first = t;
      last = t;
      ++n;
    }
    CHECK(n == SQLSTREAMS_FAKE_ASYNC_SLOTS);
    CHECK(inst->complete(first, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0));
    CHECK(sqlstreams_fake_host_poll(&host, first, &out) && out.code == SQLSTREAMS_OUTCOME_OK);
    CHECK(!sqlstreams_fake_host_poll(&host, last, &out));

    /* Destroy with messages outstanding: their completions come too late and are dropped. */
    dropped = sqlstreams_fake_dropped_completions();
    sqlstreams_fake_host_destroy(&host);
    CHECK(!inst->complete(last, SQLSTREAMS_OUTCOME_OK, 0, NULL, 0));
    CHECK(sqlstreams_fake_dropped_completions() == dropped + 1);
  }

  /* A handler without handle_async: start refuses with 0. */
  {
    sqlstreams_type_handler sync_only = kHandler;
    const sqlstreams_type_handler* handlers[1];
    sync_only.handle_async = NULL;
    handlers[0] = &sync_only;
    manifest.handlers = handlers;
    CHECK(sqlstreams_fake_host_create(&host, &manifest, "async-test", "{}"));
    CHECK(sqlstreams_fake_host_start(&host, &m) == 0);
    sqlstreams_fake_host_destroy(&host);
  }

  if (failures == 0) printf("fake_async_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
