/* fork_test: libv6d in a child forked from a process that loaded it, for
 * tests/c/test_fork_c.py. Every call must fail at once with V6D_FORKED (never
 * hang, never succeed); the parent goes on.
 *
 * Usage: fork_test MODE SOCKET, MODE one of
 *   connected  the parent connects and puts before fork()
 *   loaded     the parent only loaded the library (it is linked: loaded at
 *              start) and called nothing that connects
 *   raw        as connected, but the child is made by a raw clone() system
 *              call, which runs no pthread_atfork handlers
 * The exception: v6d_forked_get and v6d_forked_release read the parent's
 * object without Go.
 * Prints "ok" and exits 0 when the child (its exit status is checked)
 * and the parent behaved. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "v6d.h"

/* The child reports with write(2) only. */
static void say(const char *s) {
  ssize_t n = write(2, s, strlen(s));
  (void)n;
}

#define CHILD_EXPECT_FORKED(call)                                            \
  do {                                                                       \
    v6d_error err = {0, NULL};                                               \
    v6d_status st_ = (call);                                                 \
    if (st_ != V6D_FORKED || err.code != V6D_FORKED || err.message == NULL || \
        strstr(err.message, "spawn") == NULL ||                              \
        strstr(err.message, "fork") == NULL) {                               \
      say("fork_test: child: " #call " did not fail with V6D_FORKED\n");    \
      _exit(10);                                                             \
    }                                                                        \
    v6d_error_release(&err);                                                 \
    if (err.message != NULL) _exit(11);                                      \
  } while (0)

/* forked_reads: the child gets the parent's object without Go
 * (v6d_forked_get), many times, and releases each; a client the parent
 * never connected is refused. */
static int forked_reads(v6d_client parent, uint64_t obj) {
  char *tree = NULL;
  size_t tree_len = 0, n = 0;
  v6d_forked_blob *blobs = NULL;
  uint64_t pin = 0;
  v6d_error err = {0, NULL};
  if (parent == 0) {
    if (v6d_forked_get(1, obj, &tree, &tree_len, &blobs, &n, &pin, &err) != V6D_INVALID_HANDLE ||
        err.message == NULL || strstr(err.message, "spawn") == NULL) {
      return 40;
    }
    v6d_error_release(&err);
    return 0;
  }
  for (int i = 0; i < 5000; i++) {
    if (v6d_forked_get(parent, obj, &tree, &tree_len, &blobs, &n, &pin, &err) != V6D_OK) {
      say("fork_test: child: v6d_forked_get: ");
      say(err.message ? err.message : "?");
      say("\n");
      return 41;
    }
    if (n != 1 || blobs[0].size != sizeof "bytes of the parent" ||
        memcmp(blobs[0].data, "bytes of the parent", blobs[0].size) != 0 || tree_len == 0 ||
        strlen(tree) != tree_len) {
      return 42;
    }
    v6d_free(tree);
    v6d_free(blobs);
    if (v6d_forked_release(parent, obj, pin, &err) != V6D_OK) return 43;
    if (v6d_forked_release(parent, obj, pin, &err) != V6D_INVALID) return 44; /* once */
    v6d_error_release(&err);
  }
  if (v6d_forked_get(parent, obj + 2, &tree, &tree_len, &blobs, &n, &pin, &err) != V6D_OBJECT_NOT_EXISTS) {
    return 45;
  }
  v6d_error_release(&err);
  return 0;
}

static int child(const char *sock, v6d_client parent, uint64_t obj) {
  /* The calls that cannot fail answer without Go. */
  if (v6d_abi_version() != V6D_ABI_VERSION) return 20;
  if (strcmp(v6d_status_name(V6D_FORKED), "Forked") != 0) return 21;
  if (strcmp(v6d_status_name(V6D_OBJECT_NOT_EXISTS), "ObjectNotExists") != 0) return 22;
  if (v6d_version() == NULL || v6d_version()[0] == '\0') return 23;
  if (v6d_connected(parent) != 0) return 24;
  if (v6d_is_rpc(parent) != 0) return 25;
  if (v6d_open_handles() != -1 || v6d_private_views() != -1 || v6d_arrow_exports() != -1) return 26;
  v6d_free(NULL);
  v6d_error_release(NULL);

  v6d_client c = 0;
  /* Before the fix the child's connect succeeded and ~1,000 calls later
   * one hung forever: make many. */
  for (int i = 0; i < 5000; i++) {
    CHILD_EXPECT_FORKED(v6d_connect(sock, &c, &err));
    if (c != 0) return 27;
  }
  CHILD_EXPECT_FORKED(v6d_connect_rpc("127.0.0.1:1", NULL, &c, &err));
  uint64_t iid = 0, id = 0;
  const uint8_t *data = NULL;
  uint64_t size = 0;
  uint8_t *wdata = NULL;
  int32_t exists = 0;
  char *json = NULL;
  size_t len = 0;
  for (int i = 0; i < 2000; i++) {
    CHILD_EXPECT_FORKED(v6d_instance_id(parent, &iid, &err));
    CHILD_EXPECT_FORKED(v6d_get(parent, obj, &data, &size, &err));
    CHILD_EXPECT_FORKED(v6d_exists(parent, obj, &exists, &err));
  }
  CHILD_EXPECT_FORKED(v6d_get_object(parent, obj, 0, &json, &len, &err));
  CHILD_EXPECT_FORKED(v6d_get_metadata(parent, obj, &json, &len, &err));
  CHILD_EXPECT_FORKED(v6d_create_buffer(parent, 64, &id, &wdata, &err));
  CHILD_EXPECT_FORKED(v6d_put_inline(parent, "{\"typename\":\"x\"}", 0, 0, NULL, NULL, NULL, &id, &err));
  CHILD_EXPECT_FORKED(v6d_release(parent, obj, &err));
  CHILD_EXPECT_FORKED(v6d_list(parent, "*", 0, 1, &json, &len, &err));
  CHILD_EXPECT_FORKED(v6d_set_timeout(parent, 1000, &err));
  CHILD_EXPECT_FORKED(v6d_unmap_private((uint8_t *)&id, &err));
  CHILD_EXPECT_FORKED(v6d_delete(parent, 1, &obj, 0, &err));
  CHILD_EXPECT_FORKED(v6d_disconnect(parent, &err));
  if (data != NULL || wdata != NULL || json != NULL) return 28;
  /* A call without an error out-parameter fails the same way. */
  if (v6d_exists(parent, obj, &exists, NULL) != V6D_FORKED) return 29;
  return forked_reads(parent, obj);
}

static pid_t spawn_child(const char *mode) {
  if (strcmp(mode, "raw") == 0) {
    /* fork's effect without glibc's fork(): no atfork handler runs. */
    return (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
  }
  return fork();
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: fork_test connected|loaded|raw SOCKET\n");
    return 2;
  }
  const char *mode = argv[1], *sock = argv[2];
  v6d_error err = {0, NULL};
  v6d_client c = 0;
  uint64_t obj = 0x8000000000000001u;
  int connected = strcmp(mode, "loaded") != 0;
  if (connected) {
    if (v6d_connect(sock, &c, &err) != V6D_OK) {
      fprintf(stderr, "fork_test: connect: %s\n", err.message);
      return 1;
    }
    const char data[] = "bytes of the parent";
    const void *datas[] = {data};
    uint64_t sizes[] = {sizeof data};
    if (v6d_put_inline(c, NULL, 0, 1, datas, sizes, &obj, NULL, &err) != V6D_OK) {
      fprintf(stderr, "fork_test: put: %s\n", err.message);
      return 1;
    }
  }
  fflush(NULL);
  pid_t pid = spawn_child(mode);
  if (pid < 0) {
    perror("fork_test: fork");
    return 1;
  }
  if (pid == 0) _exit(child(sock, c, obj));
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    perror("fork_test: waitpid");
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "fork_test: the child failed: status 0x%x (exit %d)\n", status,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  /* The parent goes on; the reader for children refuses it. */
  {
    char *tree = NULL;
    size_t tree_len = 0, n = 0;
    v6d_forked_blob *blobs = NULL;
    uint64_t pin = 0;
    if (v6d_forked_get(c, obj, &tree, &tree_len, &blobs, &n, &pin, &err) != V6D_INVALID ||
        strstr(err.message, "not a fork") == NULL) {
      fprintf(stderr, "fork_test: v6d_forked_get worked in the parent\n");
      return 1;
    }
    v6d_error_release(&err);
  }
  if (connected) {
    const uint8_t *data = NULL;
    uint64_t size = 0;
    if (v6d_get(c, obj, &data, &size, &err) != V6D_OK || size != sizeof "bytes of the parent" ||
        memcmp(data, "bytes of the parent", size) != 0) {
      fprintf(stderr, "fork_test: parent get after fork: %s\n", err.message ? err.message : "wrong bytes");
      return 1;
    }
    if (v6d_release(c, obj, &err) != V6D_OK || v6d_disconnect(c, &err) != V6D_OK) {
      fprintf(stderr, "fork_test: parent: %s\n", err.message);
      return 1;
    }
  } else if (v6d_connect(sock, &c, &err) != V6D_OK || v6d_disconnect(c, &err) != V6D_OK) {
    fprintf(stderr, "fork_test: parent connect after fork: %s\n", err.message);
    return 1;
  }
  printf("ok\n");
  return 0;
}
