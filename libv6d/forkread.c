/*
 * forkread.c - gets in a forked child, without Go and without the daemon
 * (v6d_forked_get, v6d_forked_release; docs/design.md, "Reading in a forked
 * child").
 *
 * The Go runtime does not survive fork(), so a child of a process that
 * loaded libv6d cannot enter Go (v6d.c's fork guard). It inherits, though,
 * every mapping its parent's clients made: the arena (read-only), the
 * daemon's directory (read-only) and each connection's pin page (shared,
 * writable). That is all a get of a published object needs: the directory
 * gives the tree and the blob extents, the pin page protects them. So while
 * a client is connected, the Go side records here where its three mappings
 * lie (v6dshim_fork_attach, under libv6d's handle lock; detached before the
 * client closes), and a child reads that record, as it was at the fork.
 *
 * A child pins in the parent's pin page, in the slots reserved for forked
 * children (shm.ForkSlotFirst..ForkSlotLast, which the parent's client never
 * takes), so the daemon honours its pins exactly as the parent's: a delete
 * retires the entry, reads the page and turns each pin of a deleted id into a
 * hold of the parent's connection, dropped once the slot is cleared. Each
 * slot has an owner word (the child's process id), taken by compare-and-swap
 * from 0, or from a process that no longer exists (a child that ended
 * without releasing: multiprocessing's children end with _exit), so
 * children share the slots without a lock and a dead child's slots are
 * reused. The protocol is the parent's (shm/directory.go): load the entry's
 * seq (odd: retry), copy the record, load seq (moved: retry); raise the
 * hint, store the id in the slot, load seq again (moved: clear, retry). All
 * accesses are sequentially consistent atomics, as Go's.
 *
 * The guarantee has the parent's connection as its bound: its pins, and so
 * its children's, hold while it is connected. A child refuses new gets once
 * the daemon revoked the page (the parent's connection closed) or died;
 * values it got before lose their protection then, as the parent's own do.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "dirlayout.h"
#include "v6d_internal.h"

int v6dshim_forked(void); /* v6d.c: whether this is a forked child */

#define FORK_CONNS 64

/* The mappings of one connected client, for its children. handle is
 * written last when attached and first when detached. */
struct fork_conn {
  uint64_t handle; /* 0: unused */
  const uint64_t *dir;
  uint64_t dir_size;
  const uint8_t *arena;
  uint64_t arena_size;
  uint64_t *pins;
  uint64_t pin_words;
};

static struct fork_conn conns[FORK_CONNS];

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

/* v6dshim_fork_attach records the mappings of client handle (Go calls it
 * with libv6d's handle lock held, once the client is connected). A client
 * that finds no free record is simply not readable in a child. */
void v6dshim_fork_attach(uint64_t handle, uintptr_t dir, size_t dir_size, uintptr_t arena,
                         size_t arena_size, uintptr_t pins, size_t pin_size) {
  for (int i = 0; i < FORK_CONNS; i++) {
    struct fork_conn *c = &conns[i];
    if (LOAD(&c->handle) != 0) continue;
    c->dir = (const uint64_t *)dir;
    c->dir_size = dir_size;
    c->arena = (const uint8_t *)arena;
    c->arena_size = arena_size;
    c->pins = (uint64_t *)pins;
    c->pin_words = pin_size / 8;
    STORE(&c->handle, handle);
    return;
  }
}

/* v6dshim_fork_detach forgets client handle's record (before it closes). */
void v6dshim_fork_detach(uint64_t handle) {
  for (int i = 0; i < FORK_CONNS; i++) {
    if (LOAD(&conns[i].handle) == handle) STORE(&conns[i].handle, 0);
  }
}

/* fail fills err (if given) with code and a formatted message: malloc and
 * vsnprintf only. */
__attribute__((format(printf, 3, 4))) static v6d_status fail(v6d_error *err, v6d_status code,
                                                             const char *fmt, ...) {
  if (err != NULL) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(err->message);
    err->code = (int32_t)code;
    err->message = strdup(buf);
  }
  return code;
}

static const char spawn_hint[] =
    "get it in the parent before forking (the child inherits the value), or "
    "start workers with the 'spawn' or 'forkserver' start method and connect "
    "there";

static uint64_t dir_hash(uint64_t id) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return id;
}

/* find returns the record of client, or NULL. */
static struct fork_conn *find(v6d_client client) {
  if (client == 0) return NULL;
  for (int i = 0; i < FORK_CONNS; i++) {
    if (LOAD(&conns[i].handle) == client) return &conns[i];
  }
  return NULL;
}

/* check_forked fails a call made outside a forked child, or of a client
 * that was not readable at the fork. */
static v6d_status check_forked(v6d_client client, struct fork_conn **out, v6d_error *err,
                               const char *fn) {
  if (!v6dshim_forked()) {
    return fail(err, V6D_INVALID,
                "%s: this process is not a fork() of the process that loaded "
                "libv6d: use the client itself (v6d_get_object)",
                fn);
  }
  *out = find(client);
  if (*out == NULL) {
    return fail(err, V6D_INVALID_HANDLE,
                "%s: client %llu was not connected with the daemon's directory "
                "when this process forked (a client over TCP, or one that asked "
                "for no directory, cannot be read in a child): %s",
                fn, (unsigned long long)client, spawn_hint);
  }
  return V6D_OK;
}

/* Outcomes of one lookup. */
enum { FOUND, ABSENT, BUSY };

/* lookup finds id's entry and copies its record into *rec (malloc'd,
 * *rec_words words), with the entry's slot and seq. */
static int lookup(const struct fork_conn *c, uint64_t id, uint64_t entries, uint64_t rec_lo,
                  uint64_t rec_hi, uint64_t **rec, uint64_t *rec_words, uint64_t *slot,
                  uint64_t *seq) {
  uint64_t h = dir_hash(id);
  for (uint64_t p = 0; p < V6D_DIR_MAX_PROBE; p++) {
    uint64_t i = (h + p) & (entries - 1);
    const uint64_t *e = c->dir + (V6D_DIR_HEADER_SIZE + i * V6D_DIR_ENTRY_SIZE) / 8;
    uint64_t s = LOAD(&e[0]);
    if (s == 0) return ABSENT; /* never used: the probe ends */
    if (s & 1) return BUSY;    /* being written */
    if (LOAD(&e[1]) != id) continue;
    uint64_t off = LOAD(&e[2]), size = LOAD(&e[3]);
    if (size == 0 || size > V6D_DIR_MAX_RECORD || size % 8 != 0 || off % 8 != 0 ||
        off < rec_lo || off > rec_hi || size > rec_hi - off) {
      return LOAD(&e[0]) == s ? ABSENT : BUSY;
    }
    uint64_t n = size / 8;
    uint64_t *buf = malloc(size);
    if (buf == NULL) return ABSENT;
    const uint64_t *src = c->dir + off / 8;
    for (uint64_t k = 0; k < n; k++) buf[k] = LOAD(&src[k]);
    if (LOAD(&e[0]) != s) {
      free(buf);
      return BUSY;
    }
    *rec = buf;
    *rec_words = n;
    *slot = i;
    *seq = s;
    return FOUND;
  }
  return ABSENT;
}

/* owner_dead reports whether the process that owns a slot has ended. */
static int owner_dead(uint64_t pid) {
  if (pid == 0 || pid > 0x7fffffff) return 1;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* pin_take stores id in a free slot of the children's and returns it, or 0
 * when every slot is owned by a live process. */
static uint64_t pin_take(struct fork_conn *c, uint64_t id) {
  uint64_t *w = c->pins;
  uint64_t me = (uint64_t)getpid();
  const uint64_t n = V6D_FORK_SLOT_LAST - V6D_FORK_SLOT_FIRST + 1;
  uint64_t start = (me * 37) % n;
  for (int pass = 0; pass < 2; pass++) {
    for (uint64_t j = 0; j < n; j++) {
      uint64_t k = V6D_FORK_SLOT_FIRST + (start + j) % n;
      uint64_t *owner = &w[k + V6D_FORK_PID_OFFSET];
      uint64_t was = LOAD(owner);
      /* the first pass takes free slots, the second those of dead owners */
      if (pass == 0 ? was != 0 : (was == 0 || was == me || !owner_dead(was))) continue;
      if (!__atomic_compare_exchange_n(owner, &was, me, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        continue;
      }
      /* raise the hint before the slot: the daemon reads the hint first */
      uint64_t hint = LOAD(&w[0]);
      while (hint < k + 1 &&
             !__atomic_compare_exchange_n(&w[0], &hint, k + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      }
      STORE(&w[k], id);
      return k;
    }
  }
  return 0;
}

static void pin_clear(struct fork_conn *c, uint64_t k) {
  STORE(&c->pins[k], 0);
  STORE(&c->pins[k + V6D_FORK_PID_OFFSET], 0);
}

v6d_status v6d_forked_get(v6d_client client, uint64_t id, char **tree, size_t *tree_len,
                          v6d_forked_blob **blobs, size_t *n_blobs, uint64_t *pin,
                          v6d_error *err) {
  struct fork_conn *c;
  v6d_status st = check_forked(client, &c, err, "v6d_forked_get");
  if (st != V6D_OK) return st;
  if (tree == NULL || blobs == NULL || n_blobs == NULL || pin == NULL) {
    return fail(err, V6D_INVALID, "v6d_forked_get: a NULL out-parameter");
  }
  const uint64_t *d = c->dir;
  uint64_t magic;
  memcpy(&magic, d, 8); /* the directory is never written there after it is made */
  if (c->dir_size < V6D_DIR_HEADER_SIZE || magic != V6D_DIR_MAGIC_WORD) {
    return fail(err, V6D_INVALID,
                "v6d_forked_get: the daemon's directory has layout version %u "
                "(magic %#llx), this libv6d reads version %u only: use a libv6d "
                "and a vineyardd of one release, or %s",
                V6D_DIR_VERSION(magic), (unsigned long long)magic,
                V6D_DIR_VERSION(V6D_DIR_MAGIC_WORD), spawn_hint);
  }
  uint64_t entries = LOAD(&d[1]), rec_lo = LOAD(&d[2]), rec_size = LOAD(&d[3]);
  if (entries == 0 || (entries & (entries - 1)) != 0 ||
      entries > (c->dir_size - V6D_DIR_HEADER_SIZE) / V6D_DIR_ENTRY_SIZE ||
      rec_lo < V6D_DIR_HEADER_SIZE + entries * V6D_DIR_ENTRY_SIZE || rec_lo > c->dir_size ||
      rec_size > c->dir_size - rec_lo) {
    return fail(err, V6D_INVALID, "v6d_forked_get: the daemon's directory header is out of bounds");
  }
  uint32_t life = __atomic_load_n((const uint32_t *)&d[V6D_DIR_LIFE_WORD], __ATOMIC_SEQ_CST);
  if (life == 0 || (life & V6D_FUTEX_OWNER_DIED) != 0) {
    return fail(err, V6D_CONNECTION_ERROR,
                "v6d_forked_get: %s", life == 0 ? "the daemon keeps no life word, so a child cannot "
                "tell whether it runs" : "the daemon has exited");
  }
  if (c->pin_words < V6D_FORK_WORDS_END + V6D_PIN_TAIL) {
    return fail(err, V6D_NOT_IMPLEMENTED,
                "v6d_forked_get: the daemon's pin pages (%llu words) have no slots "
                "for forked children: %s", (unsigned long long)c->pin_words, spawn_hint);
  }
  for (int attempt = 0; attempt < 1000; attempt++) {
    if (LOAD(&c->pins[c->pin_words - V6D_PIN_END_REVOKED]) != 0) {
      return fail(err, V6D_CONNECTION_ERROR,
                  "v6d_forked_get: the parent's connection to the daemon has "
                  "closed, and with it the pins of its children");
    }
    uint64_t *rec = NULL, words = 0, slot = 0, seq = 0;
    int r = lookup(c, id, entries, rec_lo, rec_lo + rec_size, &rec, &words, &slot, &seq);
    if (r == BUSY) {
      sched_yield();
      continue;
    }
    if (r == ABSENT) {
      return fail(err, V6D_OBJECT_NOT_EXISTS,
                  "v6d_forked_get: object o%016llx is not in the daemon's directory "
                  "(it does not exist, or is not published there: an object of "
                  "another instance, a tree over 64 KiB, a blob stored with its "
                  "object), and a forked child cannot ask the daemon: %s",
                  (unsigned long long)id, spawn_hint);
    }
    uint64_t n = rec[1], tlen = rec[2];
    int ok = words >= V6D_DIR_RECORD_HEADER / 8 && rec[0] == id &&
             n <= (words * 8 - V6D_DIR_RECORD_HEADER) / V6D_DIR_BLOB_SIZE &&
             V6D_DIR_RECORD_HEADER + n * V6D_DIR_BLOB_SIZE + ((tlen + 7) & ~7ULL) == words * 8;
    v6d_forked_blob *out = NULL;
    char *text = NULL;
    if (ok) {
      out = malloc((n ? n : 1) * sizeof *out);
      text = malloc(tlen + 1);
      ok = out != NULL && text != NULL;
    }
    for (uint64_t j = 0; ok && j < n; j++) {
      uint64_t bid = rec[4 + 3 * j], off = rec[5 + 3 * j], size = rec[6 + 3 * j];
      out[j].id = bid;
      out[j].size = size;
      out[j].data = NULL;
      if (bid == (1ULL << 63) || size == 0) continue; /* the empty blob: no bytes */
      ok = (bid >> 63) != 0 && off < c->arena_size && size <= c->arena_size - off;
      if (ok) out[j].data = c->arena + off;
    }
    if (!ok) { /* torn (the seq check below would fail) or not ours to read */
      free(out);
      free(text);
      free(rec);
      sched_yield();
      continue;
    }
    memcpy(text, (const char *)rec + V6D_DIR_RECORD_HEADER + n * V6D_DIR_BLOB_SIZE, tlen);
    text[tlen] = 0;
    free(rec);
    uint64_t k = pin_take(c, id);
    if (k == 0) {
      free(out);
      free(text);
      return fail(err, V6D_NOT_ENOUGH_MEMORY,
                  "v6d_forked_get: all %d pin slots for forked children are held "
                  "by live processes: release values got in children (each holds "
                  "its object pinned while it lives)",
                  V6D_FORK_SLOT_LAST - V6D_FORK_SLOT_FIRST + 1);
    }
    const uint64_t *e = c->dir + (V6D_DIR_HEADER_SIZE + slot * V6D_DIR_ENTRY_SIZE) / 8;
    if (LOAD(&e[0]) != seq) { /* retired meanwhile: the daemon may not have seen the pin */
      pin_clear(c, k);
      free(out);
      free(text);
      continue;
    }
    *tree = text;
    if (tree_len != NULL) *tree_len = tlen;
    *blobs = out;
    *n_blobs = n;
    *pin = k;
    return V6D_OK;
  }
  return fail(err, V6D_OBJECT_NOT_EXISTS,
              "v6d_forked_get: object o%016llx changed in the daemon's directory "
              "on every one of 1000 tries", (unsigned long long)id);
}

v6d_status v6d_forked_release(v6d_client client, uint64_t id, uint64_t pin, v6d_error *err) {
  struct fork_conn *c;
  v6d_status st = check_forked(client, &c, err, "v6d_forked_release");
  if (st != V6D_OK) return st;
  uint64_t me = (uint64_t)getpid();
  if (pin < V6D_FORK_SLOT_FIRST || pin > V6D_FORK_SLOT_LAST || id == 0 ||
      c->pin_words < V6D_FORK_WORDS_END + V6D_PIN_TAIL || LOAD(&c->pins[pin]) != id ||
      LOAD(&c->pins[pin + V6D_FORK_PID_OFFSET]) != me) {
    return fail(err, V6D_INVALID,
                "v6d_forked_release: pin %llu does not hold o%016llx for this "
                "process (released already?)",
                (unsigned long long)pin, (unsigned long long)id);
  }
  pin_clear(c, pin);
  return V6D_OK;
}
