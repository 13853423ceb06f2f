/*
 * v6d.c - the C face of libv6d.so: every public function of include/v6d.h
 * (and of the internal header, include/v6d_internal.h) is defined here,
 * against the header, and forwards to the Go export that does the work
 * (v6dgo_*, see exports.go; only v6d_* leaves the library, see v6d.map). The
 * header is thus the one source the exports are compiled against: a
 * definition that disagrees with its prototype is a "conflicting types"
 * error, and a Go export whose parameters disagree with the header is an
 * incompatible-pointer or conversion warning, an error under the package's
 * -Werror -Wconversion (exports.go's #cgo CFLAGS). scripts/check-abi-shim.sh
 * proves that a wrong signature fails the build. "v6d.h" is libv6d/v6d.h, a
 * symlink to include/v6d.h, so that a changed header rebuilds the library.
 *
 * Each forward is one direct call after the fork check below; the const
 * qualifiers of the header, which cgo cannot express, are the only casts.
 *
 * The fork guard. The Go runtime does not survive fork(): in a child forked
 * from a process that loaded this library only the forking thread exists,
 * and Go code (entering it included: the runtime's locks may have been held
 * by a thread the child does not have) can hang forever. So every entry
 * point checks, in C and before any Go, whether it runs in such a child, and
 * then fails at once with V6D_FORKED (the functions that cannot fail answer
 * without Go; see v6d.h, "fork()"). The check costs one or two loads: a word
 * in a page marked MADV_WIPEONFORK, which the kernel zeroes in every child
 * (also one made by a raw clone() or glibc's _Fork, which run no atfork
 * handlers), and a flag a pthread_atfork child handler sets. Where the
 * kernel cannot wipe a page (Linux before 4.14) it compares getpid() with
 * the loader's process id instead.
 */
#include "v6d_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "_cgo_export.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* Linux's value, for older C libraries */
#endif

/* st converts a Go export's int32_t status; taking int32_t (not a cast) keeps
 * the export's return type checked too. */
static inline v6d_status st(int32_t s) { return (v6d_status)s; }

/* ---- the fork guard ---------------------------------------------------- */

static const volatile uint64_t *alive; /* 1 in the loader, 0 in a child */
static int forked_flag;                /* set in a child by pthread_atfork */
static pid_t loader;                   /* the process that loaded us */

static void in_child(void) { __atomic_store_n(&forked_flag, 1, __ATOMIC_RELAXED); }

__attribute__((constructor)) static void fork_guard_init(void) {
  loader = getpid();
  long page = sysconf(_SC_PAGESIZE);
  if (page > 0) {
    void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      if (madvise(p, (size_t)page, MADV_WIPEONFORK) == 0) {
        *(volatile uint64_t *)p = 1;
        alive = (const volatile uint64_t *)p;
      } else {
        munmap(p, (size_t)page);
      }
    }
  }
  pthread_atfork(NULL, NULL, in_child);
}

/* forked reports whether this process is a child forked from the one that
 * loaded the library. */
static inline int forked(void) {
  if (__builtin_expect(__atomic_load_n(&forked_flag, __ATOMIC_RELAXED), 0)) return 1;
  const volatile uint64_t *w = alive;
  if (__builtin_expect(w != NULL, 1)) return *w != 1;
  return getpid() != loader;
}

/* v6dshim_forked is forked() for forkread.c, the reader for children. */
int v6dshim_forked(void) { return forked(); }

/* forked_error fails a call made in a forked child: V6D_FORKED, and in err
 * (if given) a message that names the fix. No Go: malloc and snprintf only
 * (glibc keeps malloc usable in a child of a threaded process). */
static v6d_status forked_error(v6d_error *err) {
  if (err != NULL) {
    static const char fmt[] =
        "libv6d used in process %ld, a fork() of process %ld that loaded "
        "libv6d: the Go runtime inside libv6d does not survive fork(), so no "
        "call works here (it would hang). Load libv6d only in a process that "
        "has not forked since: start workers with the 'spawn' or 'forkserver' "
        "start method (Python: multiprocessing.get_context('spawn')), fork() "
        "before loading libv6d, or exec() in the child";
    char buf[sizeof fmt + 64];
    snprintf(buf, sizeof buf, fmt, (long)getpid(), (long)loader);
    free(err->message);
    err->code = V6D_FORKED;
    err->message = strdup(buf);
  }
  return V6D_FORKED;
}

/* The version string, set by the Go package's init (version.go), so that a
 * forked child can answer v6d_version without Go. */
static const char *version_cached;

void v6dshim_set_version(const char *v) {
  __atomic_store_n(&version_cached, v, __ATOMIC_RELEASE);
}

/* Names of the known statuses: v6d_status_name never enters Go for them
 * (also in a forked child). tests/python/test_abi_contract.py checks them
 * against internal/status. */
static const char *known_status_name(int32_t status) {
  switch (status) {
    case V6D_OK: return "OK";
    case V6D_INVALID: return "Invalid";
    case V6D_KEY_ERROR: return "KeyError";
    case V6D_TYPE_ERROR: return "TypeError";
    case V6D_IO_ERROR: return "IOError";
    case V6D_END_OF_FILE: return "EndOfFile";
    case V6D_NOT_IMPLEMENTED: return "NotImplemented";
    case V6D_ASSERTION_FAILED: return "AssertionFailed";
    case V6D_USER_INPUT_ERROR: return "UserInputError";
    case V6D_OBJECT_EXISTS: return "ObjectExists";
    case V6D_OBJECT_NOT_EXISTS: return "ObjectNotExists";
    case V6D_OBJECT_SEALED: return "ObjectSealed";
    case V6D_OBJECT_NOT_SEALED: return "ObjectNotSealed";
    case V6D_OBJECT_IS_BLOB: return "ObjectIsBlob";
    case V6D_OBJECT_TYPE_ERROR: return "ObjectTypeError";
    case V6D_OBJECT_SPILLED: return "ObjectSpilled";
    case V6D_OBJECT_NOT_SPILLED: return "ObjectNotSpilled";
    case V6D_META_TREE_INVALID: return "MetaTreeInvalid";
    case V6D_META_TREE_TYPE_INVALID: return "MetaTreeTypeInvalid";
    case V6D_META_TREE_TYPE_NOT_EXISTS: return "MetaTreeTypeNotExists";
    case V6D_META_TREE_NAME_INVALID: return "MetaTreeNameInvalid";
    case V6D_META_TREE_NAME_NOT_EXISTS: return "MetaTreeNameNotExists";
    case V6D_META_TREE_LINK_INVALID: return "MetaTreeLinkInvalid";
    case V6D_META_TREE_SUBTREE_NOT_EXISTS: return "MetaTreeSubtreeNotExists";
    case V6D_SERVER_NOT_READY: return "VineyardServerNotReady";
    case V6D_ARROW_ERROR: return "ArrowError";
    case V6D_CONNECTION_FAILED: return "ConnectionFailed";
    case V6D_CONNECTION_ERROR: return "ConnectionError";
    case V6D_ETCD_ERROR: return "EtcdError";
    case V6D_ALREADY_STOPPED: return "AlreadyStopped";
    case V6D_REDIS_ERROR: return "RedisError";
    case V6D_NOT_ENOUGH_MEMORY: return "NotEnoughMemory";
    case V6D_STREAM_DRAINED: return "StreamDrained";
    case V6D_STREAM_FAILED: return "StreamFailed";
    case V6D_INVALID_STREAM_STATE: return "InvalidStreamState";
    case V6D_STREAM_OPENED: return "StreamOpened";
    case V6D_GLOBAL_OBJECT_INVALID: return "GlobalObjectInvalid";
    case V6D_UNKNOWN_ERROR: return "UnknownError";
    case V6D_INVALID_HANDLE: return "InvalidHandle";
    case V6D_TIMEOUT: return "Timeout";
    case V6D_INTERNAL: return "Internal";
    case V6D_FORKED: return "Forked";
    default: return NULL;
  }
}

/* ---- library ----------------------------------------------------------- */

int32_t v6d_abi_version(void) { return V6D_ABI_VERSION; }

int32_t v6d_internal_version(void) { return V6D_INTERNAL_VERSION; }

const char *v6d_version(void) {
  if (forked()) {
    const char *v = __atomic_load_n(&version_cached, __ATOMIC_ACQUIRE);
    return v != NULL ? v : "unknown";
  }
  return v6dgo_version();
}

const char *v6d_status_name(int32_t status) {
  const char *name = known_status_name(status);
  if (name != NULL) return name;
  if (forked()) return "Unknown";
  return v6dgo_status_name(status); /* "Code(N)", kept for the process */
}

/* Both are free(): the library allocates with malloc. No Go, so they work
 * in a forked child too. */
void v6d_error_release(v6d_error *err) {
  if (err != NULL) {
    free(err->message);
    err->message = NULL;
  }
}

void v6d_free(void *ptr) { free(ptr); }

int64_t v6d_open_handles(void) { return forked() ? -1 : v6dgo_open_handles(); }

/* ---- connections ------------------------------------------------------- */

v6d_status v6d_connect(const char *socket, v6d_client *out, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_connect((char *)socket, out, err));
}

v6d_status v6d_connect_rpc(const char *endpoint, const char *secret,
                           v6d_client *out, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_connect_rpc((char *)endpoint, (char *)secret, out, err));
}

int32_t v6d_is_rpc(v6d_client client) {
  return forked() ? 0 : v6dgo_is_rpc(client);
}

v6d_status v6d_disconnect(v6d_client client, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_disconnect(client, err));
}

int32_t v6d_connected(v6d_client client) {
  return forked() ? 0 : v6dgo_connected(client);
}

v6d_status v6d_instance_id(v6d_client client, uint64_t *instance_id,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_instance_id(client, instance_id, err));
}

v6d_status v6d_instance_status(v6d_client client, char **json, size_t *len,
                               v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_instance_status(client, json, len, err));
}

v6d_status v6d_cluster_meta(v6d_client client, char **json, size_t *len,
                            v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_cluster_meta(client, json, len, err));
}

/* ---- blobs ------------------------------------------------------------- */

v6d_status v6d_create_buffer(v6d_client client, uint64_t size, uint64_t *id,
                             uint8_t **data, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_create_buffer(client, size, id, data, err));
}

v6d_status v6d_create_buffers(v6d_client client, size_t n,
                              const uint64_t *sizes, uint64_t *ids,
                              uint8_t **datas, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_create_buffers(client, n, (uint64_t *)sizes, ids, datas, err));
}

v6d_status v6d_seal(v6d_client client, uint64_t id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_seal(client, id, err));
}

v6d_status v6d_abort(v6d_client client, uint64_t id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_abort(client, id, err));
}

v6d_status v6d_shrink(v6d_client client, uint64_t id, uint64_t size,
                      v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_shrink(client, id, size, err));
}

v6d_status v6d_get(v6d_client client, uint64_t id, const uint8_t **data,
                   uint64_t *size, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get(client, id, (uint8_t **)data, size, err));
}

v6d_status v6d_get_buffers(v6d_client client, size_t n, const uint64_t *ids,
                           uint32_t flags, const uint8_t **datas,
                           uint64_t *sizes, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_buffers(client, n, (uint64_t *)ids, flags,
                              (uint8_t **)datas, sizes, err));
}

v6d_status v6d_release(v6d_client client, uint64_t id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_release(client, id, err));
}

v6d_status v6d_release_queue(v6d_client client, uint64_t *words, size_t n_words,
                             v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_release_queue(client, words, n_words, err));
}

v6d_status v6d_release_queue_flush(v6d_client client, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_release_queue_flush(client, err));
}

/* ---- private copy-on-write views --------------------------------------- */

v6d_status v6d_map_private(v6d_client client, uint64_t blob_id, uint8_t **data,
                           uint64_t *size, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_map_private(client, blob_id, data, size, err));
}

v6d_status v6d_pretouch(void *data, uint64_t size, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_pretouch(data, size, err));
}

v6d_status v6d_unmap_private(uint8_t *data, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_unmap_private(data, err));
}

int64_t v6d_private_views(void) { return forked() ? -1 : v6dgo_private_views(); }

/* ---- metadata ---------------------------------------------------------- */

v6d_status v6d_create_metadata(v6d_client client, const char *json, size_t len,
                               const uint64_t *seal_ids, size_t n_seal,
                               uint64_t *id, char **meta_out,
                               size_t *meta_out_len, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_create_metadata(client, (char *)json, len,
                                  (uint64_t *)seal_ids, n_seal, id, meta_out,
                                  meta_out_len, err));
}

v6d_status v6d_put_inline(v6d_client client, const char *json, size_t len,
                          size_t n, const void *const *datas,
                          const uint64_t *sizes, uint64_t *blob_ids,
                          uint64_t *id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_put_inline(client, (char *)json, len, n, (void **)datas,
                             (uint64_t *)sizes, blob_ids, id, err));
}

v6d_status v6d_get_metadata(v6d_client client, uint64_t id, char **json,
                            size_t *len, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_metadata(client, id, json, len, err));
}

v6d_status v6d_get_object(v6d_client client, uint64_t id, uint32_t flags,
                          char **json, size_t *len, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_object(client, id, flags, json, len, err));
}

v6d_status v6d_blob_pointer(v6d_client client, uint64_t id,
                            const uint8_t **data, uint64_t *size,
                            int32_t *writable, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_blob_pointer(client, id, (uint8_t **)data, size, writable,
                               err));
}

v6d_status v6d_get_object_into(v6d_client client, uint64_t id, uint32_t flags,
                               char *json, size_t cap, size_t *len,
                               size_t max_blobs, uint64_t *blob_ids,
                               const uint8_t **datas, uint64_t *sizes,
                               size_t *n_blobs, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_object_into(client, id, flags, json, cap, len, max_blobs,
                                  blob_ids, (uint8_t **)datas, sizes, n_blobs,
                                  err));
}

v6d_status v6d_get_object_shaped(v6d_client client, uint64_t id,
                                 uint32_t flags, char *json, size_t cap,
                                 size_t *len, size_t max_blobs,
                                 uint64_t *blob_ids, const uint8_t **datas,
                                 uint64_t *sizes, size_t *n_blobs,
                                 uint64_t *shape, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_object_shaped(client, id, flags, json, cap, len,
                                    max_blobs, blob_ids, (uint8_t **)datas,
                                    sizes, n_blobs, shape, err));
}

v6d_status v6d_get_object_args(v6d_client client, v6d_get_args *args) {
  if (forked()) return forked_error(args == NULL ? NULL : &args->err);
  if (args == NULL) {
    /* every out-parameter NULL: the export reports which it needed */
    return st(v6dgo_get_object_shaped(client, 0, 0, NULL, 0, NULL, 0, NULL,
                                      NULL, NULL, NULL, NULL, NULL));
  }
  return st(v6dgo_get_object_shaped(
      client, args->id, args->flags, args->json, args->cap, &args->len,
      args->max_blobs, args->blob_ids, (uint8_t **)args->datas, args->sizes,
      &args->n_blobs, &args->shape, &args->err));
}

v6d_status v6d_list(v6d_client client, const char *pattern, int32_t regex,
                    uint64_t limit, char **json, size_t *len, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_list(client, (char *)pattern, regex, limit, json, len, err));
}

v6d_status v6d_delete(v6d_client client, size_t n, const uint64_t *ids,
                      uint32_t flags, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_delete(client, n, (uint64_t *)ids, flags, err));
}

v6d_status v6d_exists(v6d_client client, uint64_t id, int32_t *exists,
                      v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_exists(client, id, exists, err));
}

v6d_status v6d_persist(v6d_client client, uint64_t id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_persist(client, id, err));
}

v6d_status v6d_if_persist(v6d_client client, uint64_t id, int32_t *persisted,
                          v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_if_persist(client, id, persisted, err));
}

v6d_status v6d_shallow_copy(v6d_client client, uint64_t id,
                            const char *extra_json, uint64_t *target,
                            v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_shallow_copy(client, id, (char *)extra_json, target, err));
}

v6d_status v6d_label(v6d_client client, uint64_t id, const char *key,
                     const char *value, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_label(client, id, (char *)key, (char *)value, err));
}

/* ---- names ------------------------------------------------------------- */

v6d_status v6d_put_name(v6d_client client, uint64_t id, const char *name,
                        v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_put_name(client, id, (char *)name, err));
}

v6d_status v6d_get_name(v6d_client client, const char *name, int32_t wait,
                        int64_t timeout_ms, uint64_t *id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_name(client, (char *)name, wait, timeout_ms, id, err));
}

v6d_status v6d_drop_name(v6d_client client, const char *name, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_drop_name(client, (char *)name, err));
}

v6d_status v6d_list_names(v6d_client client, const char *pattern,
                          int32_t regex, uint64_t limit, char **json,
                          size_t *len, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_list_names(client, (char *)pattern, regex, limit, json, len,
                             err));
}

/* ---- housekeeping ------------------------------------------------------ */

v6d_status v6d_clear(v6d_client client, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_clear(client, err));
}

v6d_status v6d_memory_trim(v6d_client client, int32_t *trimmed,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_memory_trim(client, trimmed, err));
}

v6d_status v6d_evict(v6d_client client, size_t n, const uint64_t *ids,
                     v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_evict(client, n, (uint64_t *)ids, err));
}

v6d_status v6d_load(v6d_client client, size_t n, const uint64_t *ids,
                    int32_t pin, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_load(client, n, (uint64_t *)ids, pin, err));
}

v6d_status v6d_unpin(v6d_client client, size_t n, const uint64_t *ids,
                     v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_unpin(client, n, (uint64_t *)ids, err));
}

/* ---- Arrow C data interface ------------------------------------------- */

v6d_status v6d_put_arrow_array(v6d_client client, struct ArrowArray *array,
                               const struct ArrowSchema *schema,
                               uint32_t flags, const char *extra_json,
                               uint64_t *id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_put_arrow_array(client, array, (struct ArrowSchema *)schema,
                                  flags, (char *)extra_json, id, err));
}

v6d_status v6d_put_arrow_stream(v6d_client client,
                                struct ArrowArrayStream *stream,
                                uint32_t flags, const char *extra_json,
                                uint64_t *id, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_put_arrow_stream(client, stream, flags, (char *)extra_json,
                                   id, err));
}

v6d_status v6d_get_arrow_array(v6d_client client, uint64_t id,
                               struct ArrowArray *out,
                               struct ArrowSchema *out_schema, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_arrow_array(client, id, out, out_schema, err));
}

v6d_status v6d_get_arrow_stream(v6d_client client, uint64_t id,
                                struct ArrowArrayStream *out, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_arrow_stream(client, id, out, err));
}

v6d_status v6d_arrow_array_from_meta(v6d_client client, const char *json,
                                     size_t len, struct ArrowArray *out,
                                     struct ArrowSchema *out_schema,
                                     v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_arrow_array_from_meta(client, (char *)json, len, out,
                                        out_schema, err));
}

v6d_status v6d_arrow_stream_from_meta(v6d_client client, const char *json,
                                      size_t len,
                                      struct ArrowArrayStream *out,
                                      v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_arrow_stream_from_meta(client, (char *)json, len, out, err));
}

v6d_status v6d_is_shared_memory(v6d_client client, const void *address,
                                int32_t *out, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_is_shared_memory(client, (void *)address, out, err));
}

int64_t v6d_arrow_exports(void) { return forked() ? -1 : v6dgo_arrow_exports(); }

/* ---- timeouts ---------------------------------------------------------- */

v6d_status v6d_set_timeout(v6d_client client, int64_t timeout_ms,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_set_timeout(client, timeout_ms, err));
}

v6d_status v6d_get_timeout(v6d_client client, int64_t *timeout_ms,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_get_timeout(client, timeout_ms, err));
}

v6d_status v6d_migrate(v6d_client client, uint64_t id, uint64_t *copy,
                       v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_migrate(client, id, copy, err));
}

v6d_status v6d_create_stream(v6d_client client, uint64_t id, int32_t readers,
                             int32_t capacity, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_create_stream(client, id, readers, capacity, err));
}

v6d_status v6d_open_stream(v6d_client client, uint64_t id, int32_t mode,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_open_stream(client, id, mode, err));
}

v6d_status v6d_push_chunk(v6d_client client, uint64_t stream, uint64_t chunk,
                          int64_t timeout_ms, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_push_chunk(client, stream, chunk, timeout_ms, err));
}

v6d_status v6d_pull_chunk(v6d_client client, uint64_t stream, uint64_t *chunk,
                          v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_pull_chunk(client, stream, chunk, err));
}

v6d_status v6d_new_buffer_chunk(v6d_client client, uint64_t stream,
                                uint64_t size, uint64_t *id, uint8_t **data,
                                v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_new_buffer_chunk(client, stream, size, id, data, err));
}

v6d_status v6d_stop_stream(v6d_client client, uint64_t stream, int32_t failed,
                           v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_stop_stream(client, stream, failed, err));
}

v6d_status v6d_drop_stream(v6d_client client, uint64_t stream, v6d_error *err) {
  if (forked()) return forked_error(err);
  return st(v6dgo_drop_stream(client, stream, err));
}
