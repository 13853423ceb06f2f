/* timeout_test: drives v6d_set_timeout / v6d_get_timeout for tests/c/test_timeout.py.
 * Usage: timeout_test ranges SOCKET
 *        timeout_test stopped SOCKET MS  (prints "ready", waits for a line on
 *        stdin while the test stops the daemon, then calls it)
 * Prints "ok" lines on stdout, exits non-zero on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "v6d.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != V6D_OK) {                                                       \
      fprintf(stderr, "timeout_test: %s: %s: %s\n", #call,                     \
              v6d_status_name(st_), err.message ? err.message : "");           \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != (want) || err.code != (int32_t)(want) || !err.message) {        \
      fprintf(stderr, "timeout_test: %s returned %s, want %s (%s)\n", #call,   \
              v6d_status_name(st_), v6d_status_name(want),                     \
              err.message ? err.message : "no message");                       \
      return 1;                                                                \
    }                                                                          \
    fprintf(stderr, "timeout_test: %s: %s\n", #call, err.message);             \
    v6d_error_release(&err);                                                   \
  } while (0)

#define EXPECT_TIMEOUT(c, want)                                                \
  do {                                                                         \
    int64_t got_ = -1;                                                         \
    CHECK(v6d_get_timeout((c), &got_, &err));                                  \
    if (got_ != (want)) {                                                      \
      fprintf(stderr, "timeout_test: timeout %" PRId64 " ms, want %" PRId64    \
              "\n", got_, (int64_t)(want));                                    \
      return 1;                                                                \
    }                                                                          \
  } while (0)

static int ranges(v6d_client c) {
  v6d_error err = {0};
  uint64_t id = 0;
  EXPECT_TIMEOUT(c, 300000);
  const int64_t bad[] = {0, -1, INT64_MIN, (int64_t)1 << 31, INT64_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    EXPECT(v6d_set_timeout(c, bad[i], &err), V6D_INVALID);
  }
  EXPECT_TIMEOUT(c, 300000);
  CHECK(v6d_set_timeout(c, INT32_MAX, &err));
  EXPECT_TIMEOUT(c, INT32_MAX);
  CHECK(v6d_set_timeout(c, 1, &err));
  EXPECT_TIMEOUT(c, 1);
  CHECK(v6d_set_timeout(c, 5000, &err));
  EXPECT(v6d_get_timeout(c, NULL, &err), V6D_INVALID);
  EXPECT(v6d_get_timeout(0, NULL, &err), V6D_INVALID_HANDLE);
  EXPECT(v6d_set_timeout(0, 1000, &err), V6D_INVALID_HANDLE);
  /* Waits that overflowed the conversion to nanoseconds (issue 14). */
  EXPECT(v6d_get_name(c, "no-such-name", 1, (int64_t)1 << 62, &id, &err), V6D_INVALID);
  EXPECT(v6d_get_name(c, "no-such-name", 1, 10000000000000LL, &id, &err), V6D_INVALID);
  /* A wait longer than the client's timeout gets the daemon's answer. */
  CHECK(v6d_set_timeout(c, 250, &err));
  EXPECT(v6d_get_name(c, "no-such-name", 1, 500, &id, &err), V6D_TIMEOUT);
  int32_t exists = -1;
  CHECK(v6d_exists(c, 1, &exists, &err));
  printf("ranges ok\n");
  return 0;
}

static int stopped(v6d_client c, int64_t ms) {
  v6d_error err = {0};
  CHECK(v6d_set_timeout(c, ms, &err));
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1;
  char *json = NULL;
  int32_t exists = -1;
  EXPECT(v6d_instance_status(c, &json, NULL, &err), V6D_TIMEOUT);
  EXPECT(v6d_exists(c, 1, &exists, &err), V6D_CONNECTION_ERROR);
  EXPECT_TIMEOUT(c, ms);
  printf("timeout ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: timeout_test MODE SOCKET [MS]\n");
    return 2;
  }
  v6d_error err = {0};
  v6d_client c = 0;
  CHECK(v6d_connect(argv[2], &c, &err));
  int rc = 2;
  if (strcmp(argv[1], "ranges") == 0) {
    rc = ranges(c);
  } else if (strcmp(argv[1], "stopped") == 0 && argc > 3) {
    int64_t ms = 0;
    if (sscanf(argv[3], "%" SCNd64, &ms) != 1) return 2;
    rc = stopped(c, ms);
  }
  CHECK(v6d_disconnect(c, &err));
  if (rc == 0 && v6d_open_handles() != 0) {
    fprintf(stderr, "timeout_test: handles leaked\n");
    return 1;
  }
  return rc;
}
