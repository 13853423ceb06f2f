/* private_test: private copy-on-write views through include/v6d.h, for
 * tests/c/test_private.py. Usage: private_test SOCKET; prints "private ok" and
 * exits 0, or names the failed check on stderr and exits non-zero. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v6d.h"

#define SIZE (3u * 4096u + 100u) /* not page-aligned, spans several pages */

static int fail(const char *what, v6d_status st, v6d_error *err) {
  fprintf(stderr, "private_test: %s: %s (%d): %s\n", what, v6d_status_name(st), (int)st,
          err->message ? err->message : "");
  v6d_error_release(err);
  return 1;
}

#define CHECK(call)                                 \
  do {                                              \
    v6d_status st_ = (call);                        \
    if (st_ != V6D_OK) return fail(#call, st_, &err); \
  } while (0)

#define EXPECT(call, want)                                                  \
  do {                                                                      \
    v6d_status st_ = (call);                                                \
    if (st_ != (want) || err.code != (int32_t)(want) || !err.message) {     \
      fprintf(stderr, "private_test: %s returned %s, want %s\n", #call,     \
              v6d_status_name(st_), v6d_status_name(want));                  \
      return 1;                                                             \
    }                                                                       \
    v6d_error_release(&err);                                                \
  } while (0)

#define ENSURE(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "private_test: line %d: %s\n", __LINE__, #cond); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

static uint8_t pattern(size_t i) { return (uint8_t)(i * 13 + i / 4096); }

/* The memory of blobs and of leases (a client's new blobs lie in its lease
   until it names them to the daemon). */
static uint64_t memory_usage(v6d_client c) {
  v6d_error err = {0};
  char *json = NULL;
  if (v6d_instance_status(c, &json, NULL, &err) != V6D_OK) return UINT64_MAX;
  const char *p = strstr(json, "\"memory_usage\":");
  const char *q = strstr(json, "\"memory_leased\":");
  uint64_t v = p ? strtoull(p + strlen("\"memory_usage\":"), NULL, 10) : UINT64_MAX;
  if (q && v != UINT64_MAX) v += strtoull(q + strlen("\"memory_leased\":"), NULL, 10);
  v6d_free(json);
  return v;
}

static int intact(const uint8_t *p) {
  for (size_t i = 0; i < SIZE; i++)
    if (p[i] != pattern(i)) return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: private_test SOCKET\n");
    return 2;
  }
  v6d_error err = {0};
  v6d_client c = 0, other = 0;
  uint64_t bid = 0, size = 0, unsealed = 0;
  uint8_t *data = NULL, *view = NULL, *view2 = NULL;
  const uint8_t *ro = NULL, *ro2 = NULL;
  CHECK(v6d_connect(argv[1], &c, &err));
  CHECK(v6d_connect(argv[1], &other, &err));

  CHECK(v6d_create_buffer(c, SIZE, &bid, &data, &err));
  for (size_t i = 0; i < SIZE; i++) data[i] = pattern(i);
  CHECK(v6d_seal(c, bid, &err));
  CHECK(v6d_get(c, bid, &ro, &size, &err));

  /* Writes through the view land in private pages, never in the store. */
  CHECK(v6d_map_private(c, bid, &view, &size, &err));
  ENSURE(size == SIZE && view != ro && intact(view));
  memset(view, 0xEE, SIZE); /* must not fault */
  ENSURE(view[SIZE - 1] == 0xEE && intact(ro));
  CHECK(v6d_get(other, bid, &ro2, &size, &err));
  ENSURE(intact(ro2));
  ENSURE(v6d_private_views() == 1);
  CHECK(v6d_unmap_private(view, &err));
  ENSURE(v6d_private_views() == 0);

  /* Errors change nothing. */
  EXPECT(v6d_unmap_private(view, &err), V6D_INVALID); /* double unmap */
  EXPECT(v6d_unmap_private(NULL, &err), V6D_INVALID);
  EXPECT(v6d_unmap_private((uint8_t *)ro + 1, &err), V6D_INVALID);
  EXPECT(v6d_map_private(c, 0x8000000000000000ull, &view, NULL, &err), V6D_INVALID);
  EXPECT(v6d_map_private(c, 0x8000000000000123ull, &view, NULL, &err), V6D_OBJECT_NOT_EXISTS);
  EXPECT(v6d_map_private(c, bid, NULL, NULL, &err), V6D_INVALID);
  EXPECT(v6d_map_private(12345, bid, &view, NULL, &err), V6D_INVALID_HANDLE);
  CHECK(v6d_create_buffer(c, 64, &unsealed, &data, &err));
  EXPECT(v6d_map_private(c, unsealed, &view, NULL, &err), V6D_OBJECT_NOT_SEALED);

  /* A view outlives the caller's references and the handle: the blob stays
   * pinned (deleting it frees nothing) until the view is unmapped. */
  CHECK(v6d_map_private(c, bid, &view, NULL, &err));
  CHECK(v6d_map_private(c, bid, &view2, NULL, &err));
  view2[0] ^= 1;
  CHECK(v6d_release(c, bid, &err)); /* the get's */
  CHECK(v6d_release(c, bid, &err)); /* the seal's */
  CHECK(v6d_disconnect(c, &err));
  EXPECT(v6d_map_private(c, bid, &view, NULL, &err), V6D_INVALID_HANDLE);
  CHECK(v6d_release(other, bid, &err));
  CHECK(v6d_delete(other, 1, &bid, 0, &err));
  for (int k = 0; k < 8; k++) { /* reuse freed memory as hard as possible */
    uint64_t id;
    CHECK(v6d_create_buffer(other, SIZE, &id, &data, &err));
    memset(data, 0x55, SIZE);
  }
  ENSURE(intact(view) && view2[0] == (pattern(0) ^ 1));
  uint64_t held = memory_usage(other);
  CHECK(v6d_unmap_private(view, &err));
  CHECK(v6d_unmap_private(view2, &err)); /* the last: the connection closes */
  ENSURE(v6d_private_views() == 0);
  /* ... and the daemon frees the deleted blob and c's unsealed buffer. */
  for (int tries = 0; memory_usage(other) > held - SIZE - 64; tries++) {
    ENSURE(tries < 500);
    nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
  }
  CHECK(v6d_disconnect(other, &err));
  ENSURE(v6d_open_handles() == 0);
  printf("private ok\n");
  return 0;
}
