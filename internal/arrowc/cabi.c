/*
 * The C half of package arrowc (see cabi.h). Release callbacks of what we
 * export may run on any thread, at any time, also in a child forked after
 * the export; the Go runtime does not survive fork(), so in a child they
 * mark the struct released and leak it instead of entering Go.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "cabi.h"

static int64_t live;           /* live top-level exports */
static pid_t owner;            /* the process that loaded the library */
static void (*go_release)(struct ArrowArray *); /* arrow-go's array release */

static const char forked_error[] =
    "libv6d: Arrow stream used in a child forked after it was made; the Go "
    "runtime does not survive fork()";

__attribute__((constructor)) static void arrowc_init(void) { owner = getpid(); }

static int forked(void) { return getpid() != owner; }

int64_t arrowc_live(void) { return __atomic_load_n(&live, __ATOMIC_SEQ_CST); }

static void count(int64_t d) { __atomic_add_fetch(&live, d, __ATOMIC_SEQ_CST); }

static void release_child(struct ArrowArray *a) {
  if (a->release == NULL) return;
  if (forked()) {
    a->release = NULL;
    return;
  }
  go_release(a);
}

static void release_top(struct ArrowArray *a) {
  int counted = a->release != NULL && !forked(); /* a forked child leaks it: no count */
  release_child(a);
  if (counted) count(-1);
}

void arrowc_wrap_array(struct ArrowArray *a, int top) {
  if (a == NULL || a->release == NULL) return;
  if (a->release != release_top && a->release != release_child) {
    /* Every array arrow-go exports has the same release function. */
    go_release = a->release;
  }
  a->release = top ? release_top : release_child;
  if (top) count(1);
  for (int64_t i = 0; i < a->n_children; i++) arrowc_wrap_array(a->children[i], 0);
  if (a->dictionary != NULL) arrowc_wrap_array(a->dictionary, 0);
}

static void free_schema(struct ArrowSchema *s) {
  free((void *)s->format);
  free((void *)s->name);
  free((void *)s->metadata);
  for (int64_t i = 0; i < s->n_children; i++) {
    struct ArrowSchema *c = s->children[i];
    if (c->release != NULL) c->release(c);
    free(c);
  }
  free(s->children);
  if (s->dictionary != NULL) {
    if (s->dictionary->release != NULL) s->dictionary->release(s->dictionary);
    free(s->dictionary);
  }
  s->release = NULL;
}

void arrowc_release_schema(struct ArrowSchema *s) {
  if (s->release == NULL) return;
  free_schema(s);
}

static void release_schema_top(struct ArrowSchema *s) {
  if (s->release == NULL) return;
  free_schema(s);
  count(-1);
}

void arrowc_count_schema(struct ArrowSchema *s) {
  s->release = release_schema_top;
  count(1);
}

/* ---- streams we export ---------------------------------------------------- */

static struct arrowc_stream *priv(struct ArrowArrayStream *s) {
  return (struct arrowc_stream *)s->private_data;
}

static int stream_get_schema(struct ArrowArrayStream *s, struct ArrowSchema *out) {
  memset(out, 0, sizeof *out);
  if (s->release == NULL) return EINVAL;
  if (forked()) return ECHILD;
  return v6dArrowStreamGetSchema(s, out);
}

static int stream_get_next(struct ArrowArrayStream *s, struct ArrowArray *out) {
  memset(out, 0, sizeof *out);
  if (s->release == NULL) return EINVAL;
  if (forked()) return ECHILD;
  return v6dArrowStreamGetNext(s, out);
}

static const char *stream_get_last_error(struct ArrowArrayStream *s) {
  if (forked()) return forked_error;
  if (s->release == NULL) return NULL;
  return priv(s)->error;
}

static void stream_release(struct ArrowArrayStream *s) {
  if (s->release == NULL) return;
  if (forked()) {
    s->release = NULL;
    return;
  }
  v6dArrowStreamRelease(s);
  free(priv(s)->error);
  free(priv(s));
  s->private_data = NULL;
  s->release = NULL;
  count(-1);
}

void arrowc_init_stream(struct ArrowArrayStream *s, uintptr_t handle) {
  struct arrowc_stream *p = calloc(1, sizeof *p);
  p->handle = handle;
  s->get_schema = stream_get_schema;
  s->get_next = stream_get_next;
  s->get_last_error = stream_get_last_error;
  s->release = stream_release;
  s->private_data = p;
  count(1);
}

void arrowc_set_stream_error(struct ArrowArrayStream *s, const char *msg, size_t n) {
  struct arrowc_stream *p = priv(s);
  char *e = malloc(n + 1);
  if (e == NULL) return;
  memcpy(e, msg, n);
  e[n] = 0;
  free(p->error);
  p->error = e;
}

/* ---- foreign structs ------------------------------------------------------ */

void arrowc_release_array(struct ArrowArray *a) {
  if (a != NULL && a->release != NULL) a->release(a);
}

void arrowc_release_foreign_schema(struct ArrowSchema *s) {
  if (s != NULL && s->release != NULL) s->release(s);
}

int arrowc_stream_get_schema(struct ArrowArrayStream *s, struct ArrowSchema *out) {
  memset(out, 0, sizeof *out);
  if (s->get_schema == NULL) return EINVAL;
  return s->get_schema(s, out);
}

int arrowc_stream_get_next(struct ArrowArrayStream *s, struct ArrowArray *out) {
  memset(out, 0, sizeof *out);
  if (s->get_next == NULL) return EINVAL;
  return s->get_next(s, out);
}

const char *arrowc_stream_last_error(struct ArrowArrayStream *s) {
  return s->get_last_error != NULL ? s->get_last_error(s) : NULL;
}

void arrowc_stream_release(struct ArrowArrayStream *s) {
  if (s != NULL && s->release != NULL) s->release(s);
}
