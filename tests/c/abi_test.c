/* abi_test: drives include/v6d.h (and, for the Python package's fast path,
 * include/v6d_internal.h) from separate processes for tests/c/test_c_abi.py.
 * Usage: abi_test MODE SOCKET [ARGS]; prints results on stdout, exits non-zero on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "v6d.h"
#include "v6d_internal.h" /* the getinto and pretouch modes */

#define SIZE (1u << 20)

static int failed(const char *what, v6d_status st, v6d_error *err) {
  fprintf(stderr, "abi_test: %s: %s (%d): %s\n", what, v6d_status_name(st), (int)st,
          err->message ? err->message : "");
  v6d_error_release(err);
  return 1;
}

#define CHECK(call)                                  \
  do {                                               \
    v6d_status st_ = (call);                         \
    if (st_ != V6D_OK) return failed(#call, st_, &err); \
  } while (0)

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != (want)) {                                                       \
      fprintf(stderr, "abi_test: %s returned %s, want %s\n", #call,            \
              v6d_status_name(st_), v6d_status_name(want));                     \
      return 1;                                                                \
    }                                                                          \
    if (err.code != (int32_t)(want) || err.message == NULL) {                  \
      fprintf(stderr, "abi_test: %s: error not filled\n", #call);             \
      return 1;                                                                \
    }                                                                          \
    v6d_error_release(&err);                                                   \
  } while (0)

static uint8_t pattern(size_t i) { return (uint8_t)(i * 31 + 7); }

static uint64_t parse_id(const char *s) { return strtoull(s + 1, NULL, 16); }

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

static int check_no_handles(void) {
  if (v6d_open_handles() != 0) {
    fprintf(stderr, "abi_test: %" PRId64 " handles leaked\n", v6d_open_handles());
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: abi_test MODE SOCKET [ARGS]\n");
    return 2;
  }
  const char *mode = argv[1];
  v6d_error err = {0};
  v6d_client c = 0;
  if (v6d_abi_version() != V6D_ABI_VERSION) return 1;
  CHECK(v6d_connect(argv[2], &c, &err));

  if (strcmp(mode, "put") == 0) {
    uint64_t bid = 0, id = 0;
    uint8_t *data = NULL;
    CHECK(v6d_create_buffer(c, SIZE, &bid, &data, &err));
    CHECK(v6d_pretouch(data, SIZE, &err)); /* maps the pages before the copy */
    uint8_t local[64];
    EXPECT(v6d_pretouch(local, sizeof local, &err), V6D_INVALID); /* not the arena */
    for (size_t i = 0; i < SIZE; i++) data[i] = pattern(i);
    char tree[256];
    snprintf(tree, sizeof tree,
             "{\"typename\":\"vineyard::Tensor<uint8>\",\"shape_\":\"[%u]\","
             "\"buffer_\":{\"id\":\"o%016" PRIx64 "\"}}", SIZE, bid);
    char *meta = NULL;
    CHECK(v6d_create_metadata(c, tree, 0, &bid, 1, &id, &meta, NULL, &err));
    if (!strstr(meta, "vineyard::Blob")) return 1;
    v6d_free(meta);
    EXPECT(v6d_put_name(c, id, "c-object", &err), V6D_INVALID); /* transient */
    CHECK(v6d_persist(c, id, &err));
    CHECK(v6d_put_name(c, id, "c-object", &err));
    printf("o%016" PRIx64 " o%016" PRIx64 "\n", id, bid);
  } else if (strcmp(mode, "get") == 0) {
    uint64_t id = 0;
    CHECK(v6d_get_name(c, "c-object", 0, 0, &id, &err));
    if (argc > 3 && id != parse_id(argv[3])) return 1;
    char *json = NULL;
    CHECK(v6d_get_object(c, id, 0, &json, NULL, &err));
    const char *b = strstr(json, "\"buffer_\":{\"id\":\"");
    if (!b) return 1;
    uint64_t bid = parse_id(b + strlen("\"buffer_\":{\"id\":\""));
    v6d_free(json);
    const uint8_t *data = NULL;
    uint64_t size = 0;
    int32_t writable = 1;
    CHECK(v6d_blob_pointer(c, bid, &data, &size, &writable, &err));
    if (size != SIZE || writable) return 1;
    for (size_t i = 0; i < size; i++)
      if (data[i] != pattern(i)) return 1;
    CHECK(v6d_release(c, id, &err));
    EXPECT(v6d_blob_pointer(c, bid, &data, &size, NULL, &err), V6D_OBJECT_NOT_EXISTS);
    printf("ok %" PRIu64 "\n", size);
  } else if (strcmp(mode, "getinto") == 0) {
    /* v6d_get_object_into: too little room still gets (and must be released),
       then the tree and the blob's view land in the caller's memory. */
    uint64_t id = 0;
    CHECK(v6d_get_name(c, "c-object", 0, 0, &id, &err));
    char small[8];
    size_t len = 0, n = 0;
    CHECK(v6d_get_object_into(c, id, 0, small, sizeof small, &len, 0, NULL, NULL, NULL, &n, &err));
    if (len <= sizeof small || n != 1) return 1;
    CHECK(v6d_release(c, id, &err));
    char json[4096];
    uint64_t bids[4] = {0};
    const uint8_t *datas[4] = {NULL};
    uint64_t sizes[4] = {0};
    CHECK(v6d_get_object_into(c, id, 0, json, sizeof json, &len, 4, bids, datas, sizes, &n, &err));
    if (len == 0 || len >= sizeof json || n != 1 || sizes[0] != SIZE) return 1;
    json[len] = 0;
    const char *b = strstr(json, "\"buffer_\":{\"id\":\"");
    if (!b || parse_id(b + strlen("\"buffer_\":{\"id\":\"")) != bids[0]) return 1;
    const uint8_t *data = NULL;
    uint64_t size = 0;
    CHECK(v6d_blob_pointer(c, bids[0], &data, &size, NULL, &err));
    if (data != datas[0] || size != SIZE) return 1;
    for (size_t i = 0; i < size; i++)
      if (datas[0][i] != pattern(i)) return 1;
    CHECK(v6d_release(c, id, &err));
    EXPECT(v6d_blob_pointer(c, bids[0], &data, &size, NULL, &err), V6D_OBJECT_NOT_EXISTS);
    EXPECT(v6d_get_object_into(c, id, 0, json, sizeof json, NULL, 4, bids, datas, sizes, &n, &err),
           V6D_INVALID);
    EXPECT(v6d_get_object_into(c, id, 0, json, sizeof json, &len, 4, NULL, datas, sizes, &n, &err),
           V6D_INVALID);
    EXPECT(v6d_get_object_into(c, id, 1, json, sizeof json, &len, 4, bids, datas, sizes, &n, &err),
           V6D_INVALID);
    EXPECT(v6d_get_object_into(c, 12345, 0, json, sizeof json, &len, 4, bids, datas, sizes, &n, &err),
           V6D_OBJECT_NOT_EXISTS);
    /* Nothing is held after the refusals. */
    EXPECT(v6d_release(c, id, &err), V6D_OBJECT_NOT_EXISTS);
    /* v6d_get_object_shaped: the same get, and a shape number that a second
       get of the same tree repeats. */
    uint64_t shape = 0, again = 0;
    CHECK(v6d_get_object_shaped(c, id, 0, json, sizeof json, &len, 4, bids, datas, sizes, &n, &shape, &err));
    CHECK(v6d_get_object_shaped(c, id, 0, json, sizeof json, &len, 4, bids, datas, sizes, &n, &again, &err));
    if (shape == 0 || again != shape || n != 1 || sizes[0] != SIZE) return 1;
    CHECK(v6d_release(c, id, &err));
    CHECK(v6d_release(c, id, &err));
    EXPECT(v6d_get_object_shaped(c, id, 0, json, sizeof json, &len, 4, bids, datas, sizes, &n, NULL, &err),
           V6D_INVALID);
    EXPECT(v6d_release(c, id, &err), V6D_OBJECT_NOT_EXISTS);
    printf("getinto ok\n");
  } else if (strcmp(mode, "fault") == 0) {
    const uint8_t *data = NULL;
    uint64_t size = 0;
    CHECK(v6d_get(c, parse_id(argv[3]), &data, &size, &err));
    printf("writing\n");
    fflush(stdout);
    ((volatile uint8_t *)data)[0] = 1; /* must fault: the mapping is PROT_READ */
    printf("no fault\n");
  } else if (strcmp(mode, "hold") == 0) {
    const uint8_t *data = NULL;
    uint64_t size = 0;
    CHECK(v6d_get(c, parse_id(argv[3]), &data, &size, &err));
    printf("held\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (size_t i = 0; i < size; i++)
      if (data[i] != pattern(i)) {
        printf("corrupted at %zu\n", i);
        return 1;
      }
    CHECK(v6d_release(c, parse_id(argv[3]), &err));
    printf("intact\n");
  } else if (strcmp(mode, "delete") == 0) {
    uint64_t id = parse_id(argv[3]);
    int32_t exists = 0;
    CHECK(v6d_delete(c, 1, &id, 0, &err));
    CHECK(v6d_exists(c, id, &exists, &err));
    if (exists) return 1;
    /* reuse the memory as hard as we can */
    for (int k = 0; k < 4; k++) {
      uint64_t bid;
      uint8_t *d;
      CHECK(v6d_create_buffer(c, SIZE, &bid, &d, &err));
      memset(d, 0xEE, SIZE);
      CHECK(v6d_seal(c, bid, &err));
    }
    printf("deleted\n");
  } else if (strcmp(mode, "leak") == 0) {
    uint64_t bid;
    uint8_t *d;
    CHECK(v6d_create_buffer(c, 8 * SIZE, &bid, &d, &err));
    memset(d, 1, 8 * SIZE);
    printf("created\n");
    fflush(stdout);
    pause();
  } else if (strcmp(mode, "usage") == 0) {
    printf("%" PRIu64 "\n", memory_usage(c));
  } else if (strcmp(mode, "errors") == 0) {
    uint64_t id = 0;
    uint8_t *d = NULL;
    const uint8_t *cd = NULL;
    uint64_t size = 0;
    EXPECT(v6d_seal(12345, 1, &err), V6D_INVALID_HANDLE);
    EXPECT(v6d_get(c, 0x8000000000000123ull, &cd, &size, &err), V6D_OBJECT_NOT_EXISTS);
    EXPECT(v6d_create_buffer(c, 1ull << 40, &id, &d, &err), V6D_NOT_ENOUGH_MEMORY);
    EXPECT(v6d_create_metadata(c, "{\"no\":1}", 0, NULL, 0, &id, NULL, NULL, &err), V6D_META_TREE_INVALID);
    EXPECT(v6d_create_metadata(c, "not json", 0, NULL, 0, &id, NULL, NULL, &err), V6D_META_TREE_INVALID);
    EXPECT(v6d_get_name(c, "nobody", 0, 0, &id, &err), V6D_OBJECT_NOT_EXISTS);
    EXPECT(v6d_get_name(c, "nobody", 1, 50, &id, &err), V6D_TIMEOUT);
    EXPECT(v6d_connect("/nonexistent/v6d.sock", &id, &err), V6D_CONNECTION_FAILED);
    CHECK(v6d_create_buffer(c, 64, &id, &d, &err));
    EXPECT(v6d_get(c, id, &cd, &size, &err), V6D_OBJECT_NOT_SEALED);
    CHECK(v6d_abort(c, id, &err));
    CHECK(v6d_create_buffer(c, 0, &id, &d, &err));
    if (id != 0x8000000000000000ull || d != NULL) return 1;
    v6d_error_release(NULL);
    v6d_error_release(&err);
    printf("errors ok\n");
  } else if (strcmp(mode, "flags") == 0) {
    /* Each flags argument takes its own V6D_* bits; any other bit is
     * V6D_INVALID and changes nothing. */
    uint64_t bid = 0, id = 0;
    uint8_t *d = NULL;
    const uint8_t *cd = NULL;
    uint64_t size = 0;
    int32_t exists = 0;
    char *json = NULL;
    CHECK(v6d_create_buffer(c, 64, &bid, &d, &err));
    memset(d, 7, 64);
    EXPECT(v6d_get_buffers(c, 1, &bid, 0, &cd, &size, &err), V6D_OBJECT_NOT_SEALED);
    EXPECT(v6d_get_buffers(c, 1, &bid, V6D_GET_UNSAFE << 1, &cd, &size, &err), V6D_INVALID);
    CHECK(v6d_get_buffers(c, 1, &bid, V6D_GET_UNSAFE, &cd, &size, &err));
    if (size != 64 || cd[63] != 7) return 1;
    CHECK(v6d_release(c, bid, &err));
    CHECK(v6d_seal(c, bid, &err));
    EXPECT(v6d_get_object(c, bid, 1, &json, NULL, &err), V6D_INVALID);
    if (json != NULL) return 1;
    uint32_t all = V6D_DELETE_FORCE | V6D_DELETE_SHALLOW | V6D_DELETE_MEMORY_TRIM;
    EXPECT(v6d_delete(c, 1, &bid, all + 1, &err), V6D_INVALID);
    EXPECT(v6d_delete(c, 1, &bid, 1u << 31, &err), V6D_INVALID);
    CHECK(v6d_exists(c, bid, &exists, &err));
    if (!exists) return 1; /* the refused delete deleted nothing */
    struct ArrowArray array = {0};
    struct ArrowSchema schema = {0};
    struct ArrowArrayStream stream = {0};
    EXPECT(v6d_put_arrow_array(c, &array, &schema, V6D_ARROW_CHUNKED, NULL, &id, &err), V6D_INVALID);
    EXPECT(v6d_put_arrow_stream(c, &stream, V6D_ARROW_RECORD_BATCH, NULL, &id, &err), V6D_INVALID);
    CHECK(v6d_release(c, bid, &err));
    CHECK(v6d_delete(c, 1, &bid, all, &err));
    CHECK(v6d_exists(c, bid, &exists, &err));
    if (exists) return 1;
    printf("flags ok\n");
  } else if (strcmp(mode, "death") == 0) {
    /* Caches an object's tree, waits until the test killed the daemon, then
     * checks that v6d_connected reports it and the cache answers nothing. */
    uint64_t bid = 0, id = 0;
    uint8_t *d = NULL;
    char *json = NULL;
    if (v6d_connected(c) != 1 || v6d_connected(0) != 0 || v6d_connected(c + 1000) != 0) return 1;
    CHECK(v6d_create_buffer(c, 64, &bid, &d, &err));
    memset(d, 3, 64);
    char tree[256];
    snprintf(tree, sizeof tree,
             "{\"typename\":\"vineyard::Tensor<uint8>\",\"shape_\":\"[64]\","
             "\"buffer_\":{\"id\":\"o%016" PRIx64 "\"}}", bid);
    CHECK(v6d_create_metadata(c, tree, 0, &bid, 1, &id, NULL, NULL, &err));
    CHECK(v6d_release(c, bid, &err));
    for (int i = 0; i < 2; i++) { /* the second get is answered from the cache */
      CHECK(v6d_get_object(c, id, 0, &json, NULL, &err));
      v6d_free(json);
      json = NULL;
      CHECK(v6d_release(c, id, &err));
    }
    if (v6d_connected(c) != 1) return 1;
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 1; /* the daemon is dead now */
    while (v6d_connected(c) != 0) {
      /* the daemon was reaped: its end of the socket is closed, so this ends
       * at once; the test bounds the wait */
    }
    EXPECT(v6d_get_object(c, id, 0, &json, NULL, &err), V6D_CONNECTION_ERROR);
    EXPECT(v6d_get_metadata(c, id, &json, NULL, &err), V6D_CONNECTION_ERROR);
    EXPECT(v6d_exists(c, id, &(int32_t){0}, &err), V6D_CONNECTION_ERROR);
    if (json != NULL || v6d_connected(c) != 0) return 1;
    printf("disconnected ok\n");
  } else if (strcmp(mode, "poison") == 0) {
    /* An out-pointer into the unmapped first page makes the export's Go
     * code fault: a Go panic inside the library, which must poison it. */
    uint64_t *bad = (uint64_t *)(uintptr_t)8;
    uint64_t id = 0;
    v6d_client other = 0;
    uint8_t *d = NULL;
    if (v6d_instance_id(c, bad, &err) != V6D_INTERNAL || err.code != V6D_INTERNAL ||
        err.message == NULL || strstr(err.message, "internal error") == NULL) {
      fprintf(stderr, "abi_test: the fault did not give V6D_INTERNAL\n");
      return 1;
    }
    v6d_error_release(&err);
    /* Every later call is refused, with the error filled, and nothing runs. */
    EXPECT(v6d_instance_id(c, &id, &err), V6D_INTERNAL);
    EXPECT(v6d_create_buffer(c, 64, &id, &d, &err), V6D_INTERNAL);
    EXPECT(v6d_connect(argv[2], &other, &err), V6D_INTERNAL);
    EXPECT(v6d_seal(12345, 1, &err), V6D_INTERNAL); /* before the handle check */
    EXPECT(v6d_unmap_private(d, &err), V6D_INTERNAL);
    if (other != 0 || d != NULL) return 1;
    if (v6d_instance_id(c, &id, NULL) != V6D_INTERNAL) return 1; /* err is optional */
    /* What cannot fail still answers. */
    if (strcmp(v6d_status_name(V6D_INTERNAL), "Internal") != 0) return 1;
    if (v6d_open_handles() != 1) return 1;
    printf("poisoned ok\n");
    fflush(stdout);
    /* v6d_disconnect still closes the handle (below), so a process can tidy up. */
  } else {
    fprintf(stderr, "abi_test: unknown mode %s\n", mode);
    return 2;
  }
  CHECK(v6d_disconnect(c, &err));
  EXPECT(v6d_disconnect(c, &err), V6D_INVALID_HANDLE);
  return check_no_handles();
}
