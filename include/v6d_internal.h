/*
 * v6d_internal.h - functions libv6d exports for the Python package's fast
 * path, beyond the C ABI of v6d.h.
 *
 * NOT A PUBLIC INTERFACE. This header is not installed (`make install`
 * copies v6d.h only; v6d.pc names no other header) and carries no stability
 * promise: anything declared here may change or go in any release, without
 * V6D_ABI_VERSION changing. It exists because an FFI such as Python's ctypes
 * pays per call and per argument, and these calls trade a plain interface
 * for fewer of both. A C or C++ program uses v6d.h (v6d_get_object and
 * v6d_blob_pointer, v6d_release), which offers the same operations.
 *
 * V6D_INTERNAL_VERSION numbers this header's contents; it changes whenever
 * anything in it does. A user of these functions (the Python package, built
 * from the same tree) checks that v6d_internal_version() of the loaded
 * library equals the number it was written for, and refuses the library
 * otherwise. scripts/check-symbols.sh checks that the library exports
 * exactly the functions of v6d.h and of this header.
 *
 * The conventions of v6d.h hold here (statuses, v6d_error, handles,
 * threads, V6D_FORKED in a forked child).
 */
#ifndef V6D_INTERNAL_H_
#define V6D_INTERNAL_H_

#include "v6d.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this header's contents (changes with any change here). */
#define V6D_INTERNAL_VERSION 1

/** Returns V6D_INTERNAL_VERSION of the header the library was built from.
 *  Never fails. */
int32_t v6d_internal_version(void);

/* ---- puts --------------------------------------------------------------- */

/** Maps [data, data + size), bytes of blobs this process created (a writable
 *  pointer from v6d_create_buffer or v6d_create_buffers), into the process's
 *  page tables before a large copy writes them. Optional, and only about
 *  speed: a copy into pages the process never mapped takes a page fault per
 *  4 KiB page; this reads one word every 64 KiB, and Linux maps the pages
 *  around each read fault (up to 16) at once, about 4x cheaper. Pages already
 *  mapped cost one load per 64 KiB. Call it from the thread that copies,
 *  on each piece it is about to copy. A range not inside a writable arena
 *  mapping of this process fails with V6D_INVALID and reads nothing. It
 *  takes no client handle. Thread-safe. \since 5 */
v6d_status v6d_pretouch(void *data, uint64_t size, v6d_error *err);

/* ---- gets --------------------------------------------------------------- */

/** Gets an object as v6d_get_object does (the same tree, the same references,
 *  released with v6d_release(id) once), into memory the caller provides, and
 *  with the blobs it pinned: for callers that make many gets, it allocates
 *  nothing and saves a v6d_blob_pointer call per blob.
 *
 *  The tree's JSON (not NUL-terminated) is copied into json (cap bytes) and
 *  *len receives its length. For each blob the get pinned (each once, in no
 *  particular order; never the empty blob) blob_ids, datas and sizes receive
 *  its id, and its bytes as v6d_blob_pointer gives them, up to max_blobs of
 *  them; *n_blobs receives their count. When the tree is longer than cap or
 *  there are more than max_blobs blobs, the get is done all the same (release
 *  it as always) and *len and *n_blobs hold what it needs, but nothing is
 *  written to blob_ids, datas or sizes, nor to json unless the tree fits
 *  (since 6: the tree is copied before the blobs are counted): the caller
 *  may release and get again with more room. len and n_blobs must not be NULL; json, blob_ids,
 *  datas and sizes may be NULL when cap, resp. max_blobs, is 0. `flags` is
 *  v6d_get_object's (none defined: 0). On failure nothing is written and
 *  nothing is held. \since 4 */
v6d_status v6d_get_object_into(v6d_client client, uint64_t id, uint32_t flags,
                               char *json, size_t cap, size_t *len,
                               size_t max_blobs, uint64_t *blob_ids,
                               const uint8_t **datas, uint64_t *sizes,
                               size_t *n_blobs, v6d_error *err);

/** v6d_get_object_into, and *shape receives the tree's shape number: two
 *  trees with the same number differ only in the member values that are
 *  object ids (JSON strings "o" and 16 lowercase hex digits) and the integers
 *  of their "signature" members, so a caller that makes many gets of values of one kind may keep
 *  what it made of the first tree (dtype, shape, which blob holds the data)
 *  by shape number and skip parsing the next. Numbers are interned, not
 *  hashed: equal numbers mean equal shapes, compared byte for byte. They are
 *  1 or more, valid within this process, and never reused for another shape;
 *  a tree longer than 64 KiB gets 0 (no shape). shape must not be NULL; it is
 *  set whenever *len is. \since 5 */
v6d_status v6d_get_object_shaped(v6d_client client, uint64_t id,
                                 uint32_t flags, char *json, size_t cap,
                                 size_t *len, size_t max_blobs,
                                 uint64_t *blob_ids, const uint8_t **datas,
                                 uint64_t *sizes, size_t *n_blobs,
                                 uint64_t *shape, v6d_error *err);

/** The arguments of v6d_get_object_shaped in one struct, for callers to
 *  whom each argument of a call costs (Python's ctypes: about 0.04 us an
 *  argument, 0.5 us of that call's 13): fill it once, then change `id` per
 *  get. Fields marked out are written as v6d_get_object_shaped writes
 *  them; err as an error out-parameter (release its message with
 *  v6d_error_release). \since 6 */
typedef struct v6d_get_args {
  uint64_t id;           /**< in: the object */
  uint32_t flags;        /**< in: v6d_get_object's (none defined: 0) */
  uint32_t reserved;     /**< in: 0 */
  char *json;            /**< in: room for the tree's JSON */
  size_t cap;            /**< in: its bytes */
  size_t len;            /**< out: the tree's length */
  size_t max_blobs;      /**< in: room in blob_ids, datas and sizes */
  uint64_t *blob_ids;    /**< in: room for the blobs' ids */
  const uint8_t **datas; /**< in: room for their addresses */
  uint64_t *sizes;       /**< in: room for their sizes */
  size_t n_blobs;        /**< out: the blobs the get pinned */
  uint64_t shape;        /**< out: the tree's shape number */
  v6d_error err;         /**< out: on failure */
} v6d_get_args;

/** v6d_get_object_shaped with its arguments in *args (see v6d_get_args).
 *  args must not be NULL. \since 6 */
v6d_status v6d_get_object_args(v6d_client client, v6d_get_args *args);

/* ---- releases ----------------------------------------------------------- */

/** Makes words[0..n_words) the client's release queue: releases written to
 *  memory, with no call, for callers to whom a call costs more than the
 *  release (Python's ctypes: about 0.6 us a call). n_words is 5 to 2^20 + 4;
 *  the words must be zero, 8-byte aligned, and stay valid until
 *  v6d_disconnect returns or another queue replaces this one (whose ids are
 *  released first). Layout: words[0] the ids written (the caller's count),
 *  words[1] the ids taken (the library's), words[2] nonzero while the
 *  library looks at the queue on its own, words[3] reserved, then a ring
 *  of R = n_words - 4 ids.
 *
 *  To release id (never 0) as v6d_release would: when words[0] - words[1]
 *  < R, store id at words[4 + words[0] % R], then words[0] + 1 at
 *  words[0], then read words[2]: if it is 0, call
 *  v6d_release_queue_flush(). When the ring is full, call v6d_release
 *  instead. One writer at a time (the caller serialises its threads). The
 *  library takes the written ids at the start of the client's next call,
 *  before it does anything else, and within a few milliseconds without
 *  one; an id the client does not hold is ignored. \since 6 */
v6d_status v6d_release_queue(v6d_client client, uint64_t *words,
                             size_t n_words, v6d_error *err);

/** Takes the ids written to the client's release queue now, and has the
 *  library look at the queue on its own from then on, while it is in use
 *  (words[2] becomes nonzero). V6D_INVALID when the client has no queue.
 *  \since 6 */
v6d_status v6d_release_queue_flush(v6d_client client, v6d_error *err);

#ifdef __cplusplus
}
#endif

#endif /* V6D_INTERNAL_H_ */
