/*
 * bench.c - the C figures of `make bench` (benchmarks/harness/cbench.py runs it).
 *
 *   bench echo-server PATH            listen on a UNIX socket at PATH, print "ready",
 *                                     echo 64-byte messages to one client until it closes
 *   bench echo-client PATH TRIALS N   time N round trips of a 64-byte message per trial
 *   bench v6d SOCKET TRIALS N SIZE..  time the v6d client on blobs of each SIZE (bytes)
 *
 * Every mode that measures prints one JSON object on stdout: per-operation seconds,
 * one number per trial (the mean of its N operations; a warm-up trial is dropped).
 *
 * v6d figures, per SIZE, with two connections (a producer and a consumer):
 *   put     producer: v6d_create_buffer + memcpy of SIZE bytes + v6d_seal
 *   get     consumer: v6d_get of a blob the producer made + v6d_release
 *   cycle   create_buffer + memcpy + seal (producer) + v6d_get (consumer)
 *   put1    producer: v6d_put_inline of SIZE bytes (create, write and seal in one call)
 *   cycle1  put_inline (producer) + v6d_get (consumer)
 * References and blobs are released and deleted outside the timed calls.
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude benchmarks/c/bench.c \
 *           -Lbuild -lv6d -Wl,-rpath,$PWD/build -o build/bench/bench_c
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <v6d.h>

#define MESSAGE 64

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what) {
  fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
  return 1;
}

static int unix_address(const char *path, struct sockaddr_un *addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(addr->sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(addr->sun_path, path);
  return 0;
}

/* Reads or writes exactly n bytes; returns 0, or -1 on error or end of file. */
static int io_exact(int fd, char *buf, size_t n, int writing) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return -1;
    }
    done += (size_t)r;
  }
  return 0;
}

static int echo_server(const char *path) {
  struct sockaddr_un addr;
  char buf[MESSAGE];
  int srv = socket(AF_UNIX, SOCK_STREAM, 0);
  if (srv < 0 || unix_address(path, &addr) != 0 ||
      bind(srv, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(srv, 1) != 0) {
    return die("echo-server: listen");
  }
  printf("ready\n");
  fflush(stdout);
  int conn = accept(srv, NULL, NULL);
  if (conn < 0) {
    return die("echo-server: accept");
  }
  while (io_exact(conn, buf, MESSAGE, 0) == 0 && io_exact(conn, buf, MESSAGE, 1) == 0) {
  }
  close(conn);
  close(srv);
  unlink(path);
  return 0;
}

static void print_samples(const char *key, const double *xs, int n, int last) {
  printf("\"%s\": [", key);
  for (int i = 0; i < n; i++) {
    printf("%s%.9g", i ? ", " : "", xs[i]);
  }
  printf("]%s", last ? "" : ", ");
}

static int echo_client(const char *path, int trials, int n) {
  struct sockaddr_un addr;
  char buf[MESSAGE];
  double *out = calloc((size_t)trials, sizeof(double));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (out == NULL || fd < 0 || unix_address(path, &addr) != 0 ||
      connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
    return die("echo-client: connect");
  }
  memset(buf, 'x', sizeof(buf));
  for (int t = -1; t < trials; t++) {
    double t0 = now();
    for (int i = 0; i < n; i++) {
      if (io_exact(fd, buf, MESSAGE, 1) != 0 || io_exact(fd, buf, MESSAGE, 0) != 0) {
        return die("echo-client: round trip");
      }
    }
    if (t >= 0) {
      out[t] = (now() - t0) / n;
    }
  }
  close(fd);
  printf("{");
  print_samples("rtt", out, trials, 1);
  printf("}\n");
  free(out);
  return 0;
}

struct v6d_bench {
  v6d_client producer, consumer;
  uint64_t *ids;
  uint8_t *src;
  v6d_error err;
};

static int v6d_fail(struct v6d_bench *b, const char *what, v6d_status st) {
  fprintf(stderr, "bench: %s: %s: %s\n", what, v6d_status_name(st),
          b->err.message != NULL ? b->err.message : "");
  v6d_error_release(&b->err);
  return 1;
}

/* Creates, fills and seals one blob on the producer; *elapsed gets the time taken. */
static int put_one(struct v6d_bench *b, uint64_t size, uint64_t *id, double *elapsed) {
  uint8_t *data = NULL;
  v6d_status st;
  double t0 = now();
  if ((st = v6d_create_buffer(b->producer, size, id, &data, &b->err)) != V6D_OK) {
    return v6d_fail(b, "v6d_create_buffer", st);
  }
  memcpy(data, b->src, size);
  if ((st = v6d_seal(b->producer, *id, &b->err)) != V6D_OK) {
    return v6d_fail(b, "v6d_seal", st);
  }
  *elapsed = now() - t0;
  return 0;
}

/* Creates, fills and seals one blob in one call (v6d_put_inline); the
 * producer keeps no reference. */
static int put_inline_one(struct v6d_bench *b, uint64_t size, uint64_t *id, double *elapsed) {
  const void *data[1] = {b->src};
  v6d_status st;
  double t0 = now();
  if ((st = v6d_put_inline(b->producer, NULL, 0, 1, data, &size, id, NULL, &b->err)) != V6D_OK) {
    return v6d_fail(b, "v6d_put_inline", st);
  }
  *elapsed = now() - t0;
  return 0;
}

/* Releases the producer's references to ids[0..n) (if it holds them) and
 * deletes the blobs. */
static int drop_all(struct v6d_bench *b, int n, int held) {
  v6d_status st;
  for (int i = 0; held && i < n; i++) {
    if ((st = v6d_release(b->producer, b->ids[i], &b->err)) != V6D_OK) {
      return v6d_fail(b, "v6d_release", st);
    }
  }
  if ((st = v6d_delete(b->producer, (size_t)n, b->ids, 0, &b->err)) != V6D_OK) {
    return v6d_fail(b, "v6d_delete", st);
  }
  return 0;
}

/* One trial of the figure `what` ("put", "get", "cycle", "put1", "cycle1")
 * over n blobs of size bytes; *per_op gets the mean time per operation. */
static int trial(struct v6d_bench *b, const char *what, uint64_t size, int n, double *per_op) {
  double total = 0, dt;
  const uint8_t *view = NULL;
  uint64_t got = 0;
  v6d_status st;
  int inline_put = what[strlen(what) - 1] == '1';
  for (int i = 0; i < n; i++) {
    if ((inline_put ? put_inline_one : put_one)(b, size, &b->ids[i], &dt) != 0) {
      return 1;
    }
    if (strncmp(what, "put", 3) == 0) {
      total += dt;
      continue;
    }
    double t0 = now();
    if ((st = v6d_get(b->consumer, b->ids[i], &view, &got, &b->err)) != V6D_OK) {
      return v6d_fail(b, "v6d_get", st);
    }
    double t1 = now();
    if (got != size) {
      fprintf(stderr, "bench: v6d_get returned %llu bytes, expected %llu\n",
              (unsigned long long)got, (unsigned long long)size);
      return 1;
    }
    if (strncmp(what, "cycle", 5) == 0) {
      total += dt + (t1 - t0);
    }
    if ((st = v6d_release(b->consumer, b->ids[i], &b->err)) != V6D_OK) {
      return v6d_fail(b, "v6d_release", st);
    }
    if (strcmp(what, "get") == 0) {
      total += now() - t0;
    }
  }
  *per_op = total / n;
  return drop_all(b, n, !inline_put);
}

static int v6d_figures(const char *sock, int trials, int n, int nsizes, char **sizes) {
  static const char *const figures[] = {"put", "get", "cycle", "put1", "cycle1"};
  const int nfigures = (int)(sizeof(figures) / sizeof(figures[0]));
  struct v6d_bench b = {0, 0, NULL, NULL, {0, NULL}};
  uint64_t max = 0;
  v6d_status st;
  for (int s = 0; s < nsizes; s++) {
    uint64_t size = strtoull(sizes[s], NULL, 10);
    max = size > max ? size : max;
  }
  b.ids = calloc((size_t)n, sizeof(uint64_t));
  b.src = malloc(max ? max : 1);
  double *out = calloc((size_t)trials, sizeof(double));
  if (b.ids == NULL || b.src == NULL || out == NULL) {
    return die("malloc");
  }
  memset(b.src, 7, max);
  if ((st = v6d_connect(sock, &b.producer, &b.err)) != V6D_OK ||
      (st = v6d_connect(sock, &b.consumer, &b.err)) != V6D_OK) {
    return v6d_fail(&b, "v6d_connect", st);
  }
  printf("{\"sizes\": {");
  for (int s = 0; s < nsizes; s++) {
    uint64_t size = strtoull(sizes[s], NULL, 10);
    printf("%s\"%llu\": {", s ? ", " : "", (unsigned long long)size);
    for (int f = 0; f < nfigures; f++) {
      for (int t = -1; t < trials; t++) {
        double per_op;
        if (trial(&b, figures[f], size, n, &per_op) != 0) {
          return 1;
        }
        if (t >= 0) {
          out[t] = per_op;
        }
      }
      print_samples(figures[f], out, trials, f == nfigures - 1);
    }
    printf("}");
  }
  printf("}}\n");
  v6d_disconnect(b.consumer, NULL);
  v6d_disconnect(b.producer, NULL);
  free(out);
  free(b.src);
  free(b.ids);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "echo-server") == 0) {
    return echo_server(argv[2]);
  }
  if (argc == 5 && strcmp(argv[1], "echo-client") == 0) {
    return echo_client(argv[2], atoi(argv[3]), atoi(argv[4]));
  }
  if (argc >= 6 && strcmp(argv[1], "v6d") == 0) {
    int trials = atoi(argv[3]), n = atoi(argv[4]);
    if (trials > 0 && n > 0) {
      return v6d_figures(argv[2], trials, n, argc - 5, argv + 5);
    }
  }
  fprintf(stderr,
          "usage: bench echo-server PATH | echo-client PATH TRIALS N | "
          "v6d SOCKET TRIALS N SIZE...\n");
  return 2;
}
