/*
 * share.c - put bytes into vineyardd from one process, get them in another.
 *
 *   share put SOCKET [TEXT]   stores TEXT (default: a greeting) as a sealed blob
 *                             and prints its object id, e.g. o8000000000001f40
 *   share get SOCKET ID       maps the blob read-only and prints its bytes
 *
 * Both modes print "<n> bytes, fnv1a64 <hash>" to stderr, so that a script can
 * check that the reader saw exactly what the writer wrote. SOCKET may be "" to
 * use $VINEYARD_IPC_SOCKET.
 *
 * Build:  cc -std=c11 -Wall -Wextra -Iinclude examples/c/share.c \
 *            -Lbuild -lv6d -Wl,-rpath,"$PWD/build" -o build/examples/share
 *    or:  cc share.c $(pkg-config --cflags --libs v6d)   (after make install)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <v6d.h>

/* Prints what failed and why, releases the error, and returns 1. */
static int fail(const char *what, v6d_status st, v6d_error *err) {
  fprintf(stderr, "share: %s: %s (%d): %s\n", what, v6d_status_name(st),
          (int)st, err->message != NULL ? err->message : "(no message)");
  v6d_error_release(err);
  return 1;
}

static uint64_t fnv1a64(const uint8_t *p, uint64_t n) {
  uint64_t h = 14695981039346656037ULL;
  for (uint64_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Parses "o%016x" (the text form of an ObjectID) or a decimal number. */
static int parse_id(const char *s, uint64_t *id) {
  char *end = NULL;
  int base = 10;
  if (s[0] == 'o') {
    s++;
    base = 16;
  }
  if (*s == '\0') {
    return -1;
  }
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno != 0 || *end != '\0') {
    return -1;
  }
  *id = (uint64_t)v;
  return 0;
}

static int put(const char *socket, const char *text) {
  v6d_error err = {0, NULL};
  v6d_client client = 0;
  uint64_t id = 0;
  uint8_t *data = NULL;
  size_t n = strlen(text);
  v6d_status st;

  if ((st = v6d_connect(socket, &client, &err)) != V6D_OK) {
    return fail("connect", st, &err);
  }
  /* The daemon allocates the blob in its shared arena; data points into our
   * writable mapping of it, so this memcpy is the only copy ever made. */
  if ((st = v6d_create_buffer(client, n, &id, &data, &err)) != V6D_OK) {
    fail("create_buffer", st, &err);
    v6d_disconnect(client, NULL);
    return 1;
  }
  if (n > 0) {
    memcpy(data, text, n);
  }
  /* Sealed blobs are immutable and visible to every other client. */
  if ((st = v6d_seal(client, id, &err)) != V6D_OK) {
    fail("seal", st, &err);
    v6d_abort(client, id, NULL);
    v6d_disconnect(client, NULL);
    return 1;
  }
  /* Seal left us holding a reference; dropping it keeps the blob stored. */
  if ((st = v6d_release(client, id, &err)) != V6D_OK) {
    fail("release", st, &err);
    v6d_disconnect(client, NULL);
    return 1;
  }
  if ((st = v6d_disconnect(client, &err)) != V6D_OK) {
    return fail("disconnect", st, &err);
  }
  printf("o%016" PRIx64 "\n", id);
  fprintf(stderr, "share: put %zu bytes, fnv1a64 %016" PRIx64 "\n", n,
          fnv1a64((const uint8_t *)text, n));
  return 0;
}

static int get(const char *socket, uint64_t id) {
  v6d_error err = {0, NULL};
  v6d_client client = 0;
  const uint8_t *data = NULL;
  uint64_t size = 0;
  v6d_status st;

  if ((st = v6d_connect(socket, &client, &err)) != V6D_OK) {
    return fail("connect", st, &err);
  }
  /* data points straight into the daemon's arena, mapped read-only: no copy,
   * and the bytes cannot change while we hold the reference. */
  if ((st = v6d_get(client, id, &data, &size, &err)) != V6D_OK) {
    fail("get", st, &err);
    v6d_disconnect(client, NULL);
    return 1;
  }
  if (size > 0 && fwrite(data, 1, (size_t)size, stdout) != (size_t)size) {
    perror("share: write");
  }
  printf("\n");
  fprintf(stderr, "share: got %" PRIu64 " bytes, fnv1a64 %016" PRIx64 "\n", size,
          fnv1a64(data, size));
  /* After the release the pointer must not be read any more. */
  if ((st = v6d_release(client, id, &err)) != V6D_OK) {
    fail("release", st, &err);
    v6d_disconnect(client, NULL);
    return 1;
  }
  if ((st = v6d_disconnect(client, &err)) != V6D_OK) {
    return fail("disconnect", st, &err);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && argc <= 4 && strcmp(argv[1], "put") == 0) {
    return put(argv[2], argc == 4 ? argv[3] : "Hello from vineyard!");
  }
  if (argc == 4 && strcmp(argv[1], "get") == 0) {
    uint64_t id = 0;
    if (parse_id(argv[3], &id) != 0) {
      fprintf(stderr, "share: not an object id: %s\n", argv[3]);
      return 2;
    }
    return get(argv[2], id);
  }
  fprintf(stderr,
          "usage: %s put SOCKET [TEXT]   store TEXT, print its object id\n"
          "       %s get SOCKET ID       print the bytes of object ID\n",
          argv[0], argv[0]);
  return 2;
}
