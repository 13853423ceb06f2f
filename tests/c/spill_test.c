/* spill_test.c - v6d_evict, v6d_load (pin) and v6d_unpin against a daemon
 * started with --spill-path: a blob evicted, loaded and pinned (an evict then
 * leaves it), unpinned and evicted again, then got back intact; bad
 * arguments refused.
 *
 * usage: spill_test SOCKET   (prints "ok" and exits 0)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "v6d.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != V6D_OK) {                                                       \
      fprintf(stderr, "spill_test: %s: %s: %s\n", #call,                      \
              v6d_status_name(st_), err.message ? err.message : "");          \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "spill_test: line %d: %s\n", __LINE__, #cond);           \
      return 1;                                                                \
    }                                                                          \
  } while (0)

enum { SIZE = 1 << 20 };

/* spilled returns the daemon's spilled_objects, or -1. */
static int spilled(v6d_client c) {
  char *json = NULL;
  if (v6d_instance_status(c, &json, NULL, NULL) != V6D_OK) return -1;
  int n = -1;
  const char *p = strstr(json, "\"spilled_objects\":");
  if (p) sscanf(p + strlen("\"spilled_objects\":"), "%d", &n);
  v6d_free(json);
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: spill_test SOCKET\n");
    return 2;
  }
  v6d_error err = {0};
  v6d_client c = 0;
  CHECK(v6d_connect(argv[1], &c, &err));
  uint64_t id = 0;
  uint8_t *w = NULL;
  CHECK(v6d_create_buffer(c, SIZE, &id, &w, &err));
  for (int i = 0; i < SIZE; i++) w[i] = (uint8_t)(i * 7 + (i >> 10));
  CHECK(v6d_seal(c, id, &err));
  CHECK(v6d_release(c, id, &err));

  CHECK(v6d_evict(c, 1, &id, &err));
  EXPECT(spilled(c) == 1);
  CHECK(v6d_load(c, 1, &id, 1, &err));
  EXPECT(spilled(c) == 0);
  CHECK(v6d_evict(c, 1, &id, &err)); /* pinned: stays */
  EXPECT(spilled(c) == 0);
  CHECK(v6d_unpin(c, 1, &id, &err));
  CHECK(v6d_evict(c, 1, &id, &err));
  EXPECT(spilled(c) == 1);

  const uint8_t *r = NULL;
  uint64_t size = 0;
  CHECK(v6d_get(c, id, &r, &size, &err));
  EXPECT(size == SIZE);
  for (int i = 0; i < SIZE; i++) EXPECT(r[i] == (uint8_t)(i * 7 + (i >> 10)));
  CHECK(v6d_release(c, id, &err));
  EXPECT(spilled(c) == 0);

  EXPECT(v6d_evict(c, 1, NULL, &err) == V6D_INVALID);
  v6d_error_release(&err);
  uint64_t missing = 12345;
  EXPECT(v6d_load(c, 1, &missing, 0, &err) == V6D_OBJECT_NOT_EXISTS);
  v6d_error_release(&err);
  CHECK(v6d_evict(c, 0, NULL, &err)); /* nothing to do */
  CHECK(v6d_disconnect(c, &err));
  printf("ok\n");
  return 0;
}
