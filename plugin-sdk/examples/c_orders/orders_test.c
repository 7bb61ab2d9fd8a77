/* Unit test of c_orders on the SDK's C fake host: no daemon, no database. Plain C; exits
 * non-zero on the first failed check (ctest runs it). */
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
  char why[SQLSTREAMS_FAKE_TEXT_MAX];

  /* Config: closed-world. */
  const sqlstreams_type_handler* h = sqlstreams_fake_find_handler(m, "count-items");
  CHECK(h != NULL);
  CHECK(sqlstreams_fake_validate(h, "{}", why));
  char key[SQLSTREAMS_FAKE_TEXT_MAX];
  CHECK(!sqlstreams_fake_validate_key(h, "{\"max_item\": 3}", why, key));
  CHECK(strstr(why, "unknown key 'max_item'") != NULL);
  CHECK(strcmp(key, "max_item") == 0); /* named with set_error_key: the host shows its line */
  CHECK(!sqlstreams_fake_validate_key(h, "{\"max_items\": 0}", why, key));
  CHECK(strcmp(key, "max_items") == 0);

  /* Two payload versions, listed in the descriptor. */
  CHECK(h->schema_version_count == 2 && h->schema_versions[0] == 1 && h->schema_versions[1] == 2);

  sqlstreams_fake_host host;
  CHECK(!sqlstreams_fake_host_create(&host, m, "count-items", "{\"max_items\": \"x\"}"));
  CHECK(strstr(host.error, "max_items") != NULL);
  if (!sqlstreams_fake_host_create(&host, m, "count-items", "{\"max_items\": 5}")) {
    fprintf(stderr, "create failed: %s\n", host.error);
    return 1;
  }

  sqlstreams_fake_outcome out =
      sqlstreams_fake_host_handle(&host, "{\"order_id\":\"o-1\",\"items\":3}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_OK);
  CHECK(host.log_count == 1 && strcmp(host.last_log, "counted message 1") == 0);

  out = sqlstreams_fake_host_handle(&host, "{\"order_id\":\"o-2\",\"items\":6}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL);
  CHECK(strstr(out.error, "over max_items 5") != NULL);

  out = sqlstreams_fake_host_handle(&host, "{\"order_id\":\"o-3\"}");
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL);
  CHECK(strstr(out.error, "items: a whole number is required") != NULL);

  sqlstreams_fake_message v2;
  memset(&v2, 0, sizeof v2);
  v2.payload = "{\"order_id\":\"o-4\",\"item_count\":6}";
  v2.schema_version = 2;
  out = sqlstreams_fake_host_handle_message(&host, &v2);
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL && strstr(out.error, "over max_items 5") != NULL);
  v2.payload = "{\"order_id\":\"o-5\",\"items\":2}"; /* a v1 shape at version 2 */
  out = sqlstreams_fake_host_handle_message(&host, &v2);
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL && strstr(out.error, "item_count") != NULL);

  out = sqlstreams_fake_host_handle(&host, "{\"order_id\":");
  CHECK(out.code == SQLSTREAMS_OUTCOME_TERMINAL);
  CHECK(strstr(out.error, "does not decode") != NULL);

  sqlstreams_fake_host_destroy(&host);
  if (failures == 0) printf("c_orders_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
