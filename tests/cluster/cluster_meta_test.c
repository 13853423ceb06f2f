/* cluster_meta_test: the instance list of a cluster from C, for
 * tests/cluster/test_cluster_c.py.
 * Usage: cluster_meta_test SOCKET...   (one daemon of the cluster per socket)
 * Connects to each daemon, reads its instance id (v6d_instance_id), and checks
 * that v6d_cluster_meta of every daemon lists every instance ("i<N>" with its
 * socket). Prints "ok" on stdout, exits non-zero on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "v6d.h"

#define MAX_DAEMONS 8

int main(int argc, char **argv) {
  int n = argc - 1;
  if (n < 1 || n > MAX_DAEMONS) {
    fprintf(stderr, "usage: cluster_meta_test SOCKET... (1 to %d)\n", MAX_DAEMONS);
    return 2;
  }
  v6d_client clients[MAX_DAEMONS];
  uint64_t idl[MAX_DAEMONS];
  v6d_error err = {0, NULL};
  for (int i = 0; i < n; i++) {
    if (v6d_connect(argv[i + 1], &clients[i], &err) != V6D_OK ||
        v6d_instance_id(clients[i], &idl[i], &err) != V6D_OK) {
      fprintf(stderr, "cluster_meta_test: %s: %s\n", argv[i + 1], err.message ? err.message : "");
      return 1;
    }
  }
  int status = 0;
  for (int i = 0; i < n && status == 0; i++) {
    char *json = NULL;
    size_t len = 0;
    if (v6d_cluster_meta(clients[i], &json, &len, &err) != V6D_OK) {
      fprintf(stderr, "cluster_meta_test: cluster_meta: %s\n", err.message ? err.message : "");
      return 1;
    }
    for (int j = 0; j < n; j++) {
      char key[32];
      snprintf(key, sizeof key, "\"i%" PRIu64 "\"", idl[j]);
      if (strstr(json, key) == NULL || strstr(json, argv[j + 1]) == NULL) {
        fprintf(stderr, "cluster_meta_test: daemon %d's cluster_meta lacks %s at %s: %s\n", i, key,
                argv[j + 1], json);
        status = 1;
      }
      if (j != i && idl[j] == idl[i]) {
        fprintf(stderr, "cluster_meta_test: daemons %d and %d share instance id %" PRIu64 "\n", i, j, idl[i]);
        status = 1;
      }
    }
    v6d_free(json);
  }
  for (int i = 0; i < n; i++) {
    v6d_disconnect(clients[i], NULL);
  }
  if (status == 0) {
    printf("ok\n");
  }
  return status;
}
