/* Unit test of {{name}} on the SDK's C fake host: no daemon, no database. ctest runs it; it
 * exits non-zero on the first failed check. */
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

int main(void) {
  const sqlstreams_type_manifest* m = sqlstreams_plugin_manifest_v1();
  const sqlstreams_type_handler* h = sqlstreams_fake_find_handler(m, "{{handler}}");
  char why[SQLSTREAMS_FAKE_TEXT_MAX], key[SQLSTREAMS_FAKE_TEXT_MAX];
  CHECK(h != NULL);
  CHECK(!sqlstreams_fake_validate_key(h, "{\"max_amont\": 3}", why, key));
  CHECK(strstr(why, "unknown key 'max_amont'") != NULL);
  CHECK(strcmp(key, "max_amont") == 0); /* `sqlstreams config check` shows this key's line */
  CHECK(h->schema_version_count == 1 && h->schema_versions[0] == 1);

  sqlstreams_fake_host host;
  if (!sqlstreams_fake_host_create(&host, m, "{{handler}}", "{\"max_amount\": 10}")) {
    fprintf(stderr, "create failed: %s\n", host.error);
    return 1;
  }
  sqlstreams_fake_outcome out = sqlstreams_fake_host_handle(&host, "{\"id\":\"a-1\",\"amount\":5}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_OK);
  CHECK(host.log_count == 1 && strcmp(host.last_log, "handled message 1") == 0);
  out = sqlstreams_fake_host_handle(&host, "{\"id\":\"a-2\",\"amount\":11}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_RETRY);
  out = sqlstreams_fake_host_handle(&host, "{\"id\":\"a-3\",\"amount\":-1}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL);
  out = sqlstreams_fake_host_handle(&host, "{\"id\":\"a-4\"}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL);
  CHECK(strstr(out.error, "amount: a whole number is required") != NULL);
  sqlstreams_fake_host_destroy(&host);

  if (failures == 0) printf("{{name}}_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
