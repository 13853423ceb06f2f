/* rpc_test.c - a C client over TCP (v6d_connect_rpc) against the real
 * daemon: put, get (copies libv6d owns), metadata, names, list, delete; the
 * bytes checked through an IPC client of the same daemon.
 *
 * usage: rpc_test ENDPOINT SOCKET   (prints "ok" and exits 0 on success)
 *        rpc_test refused ENDPOINT SECRET   (exits 0 if the secret is refused)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v6d.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != V6D_OK) {                                                       \
      fprintf(stderr, "rpc_test: %s: %s: %s\n", #call, v6d_status_name(st_),  \
              err.message ? err.message : "");                                 \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "rpc_test: line %d: %s\n", __LINE__, #cond);             \
      return 1;                                                                \
    }                                                                          \
  } while (0)

enum { N = 3 << 20 };

static int refused(const char *endpoint, const char *secret) {
  v6d_error err = {0};
  v6d_client c = 0;
  v6d_status st = v6d_connect_rpc(endpoint, secret, &c, &err);
  int ok = st == V6D_CONNECTION_FAILED && err.message != NULL &&
           strstr(err.message, "secret") != NULL && c == 0;
  v6d_error_release(&err);
  return ok && v6d_open_handles() == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "refused") == 0) return refused(argv[2], argv[3]);
  if (argc != 3) {
    fprintf(stderr, "usage: rpc_test ENDPOINT SOCKET\n");
    return 2;
  }
  v6d_error err = {0};
  v6d_client rc = 0, ic = 0;
  CHECK(v6d_connect_rpc(argv[1], NULL, &rc, &err));
  CHECK(v6d_connect(argv[2], &ic, &err));
  EXPECT(v6d_is_rpc(rc) == 1 && v6d_is_rpc(ic) == 0 && v6d_connected(rc) == 1);

  /* put: a buffer in memory libv6d owns, sent with the create */
  uint64_t bid = 0, oid = 0;
  uint8_t *w = NULL;
  CHECK(v6d_create_buffer(rc, N, &bid, &w, &err));
  for (size_t i = 0; i < N; i++) w[i] = (uint8_t)(i * 7 + 1);
  char tree[256];
  snprintf(tree, sizeof tree,
           "{\"typename\":\"vineyard::Tensor<uint8>\",\"shape_\":\"[%d]\","
           "\"buffer_\":{\"id\":\"o%016llx\"}}",
           N, (unsigned long long)bid);
  CHECK(v6d_create_metadata(rc, tree, strlen(tree), &bid, 1, &oid, NULL, NULL, &err));
  CHECK(v6d_release(rc, oid, &err));

  /* the daemon has the bytes: read them through shared memory */
  const uint8_t *ro = NULL;
  uint64_t size = 0;
  CHECK(v6d_get(ic, bid, &ro, &size, &err));
  EXPECT(size == N);
  for (size_t i = 0; i < N; i++) EXPECT(ro[i] == (uint8_t)(i * 7 + 1));
  CHECK(v6d_release(ic, bid, &err));

  /* get over TCP: a copy, released like any view */
  const uint8_t *got = NULL;
  CHECK(v6d_get(rc, bid, &got, &size, &err));
  EXPECT(size == N && memcmp(got, ro, N) == 0);
  ((uint8_t *)got)[0] ^= 0xff; /* a private, writable copy */
  CHECK(v6d_release(rc, bid, &err));

  char *json = NULL;
  size_t len = 0;
  CHECK(v6d_get_object(rc, oid, 0, &json, &len, &err));
  EXPECT(strstr(json, "vineyard::Tensor<uint8>") != NULL);
  v6d_free(json);
  int32_t writable = -1;
  CHECK(v6d_blob_pointer(rc, bid, &got, &size, &writable, &err));
  EXPECT(size == N && got[1] == (uint8_t)8 && writable == 0);
  CHECK(v6d_release(rc, oid, &err));

  /* metadata, names, list, delete */
  CHECK(v6d_get_metadata(rc, oid, &json, &len, &err));
  v6d_free(json);
  CHECK(v6d_persist(rc, oid, &err));
  CHECK(v6d_put_name(rc, oid, "c-rpc", &err));
  uint64_t named = 0;
  CHECK(v6d_get_name(rc, "c-rpc", 0, 0, &named, &err));
  EXPECT(named == oid);
  CHECK(v6d_list(rc, "vineyard::Tensor*", 0, 100, &json, &len, &err));
  EXPECT(len > 0);
  v6d_free(json);
  CHECK(v6d_delete(rc, 1, &oid, 0, &err));
  int32_t exists = 1;
  CHECK(v6d_exists(rc, oid, &exists, &err));
  EXPECT(exists == 0);

  /* shared memory only: refused with a clear error */
  uint8_t *priv = NULL;
  v6d_status st = v6d_map_private(rc, bid, &priv, &size, &err);
  EXPECT(st != V6D_OK && err.message != NULL);
  v6d_error_release(&err);

  CHECK(v6d_disconnect(rc, &err));
  CHECK(v6d_disconnect(ic, &err));
  EXPECT(v6d_open_handles() == 0);
  printf("ok\n");
  return 0;
}
