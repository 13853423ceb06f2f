/*
 * v6d.h - the C ABI of libv6d, the client library of the Go Vineyard daemon.
 *
 * This header is the contract. It is written by hand; the header cgo generates
 * while building libv6d.so is a by-product and is never installed.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *
 *  - Every fallible call returns a v6d_status. V6D_OK (0) is success.
 *  - Every fallible call takes an optional `v6d_error *err` as its last
 *    argument. When err is not NULL and the call fails, err->code is set to the
 *    returned status and err->message to a NUL-terminated, library-allocated
 *    message; release it with v6d_error_release(). On success err is untouched.
 *    There is no "last error" global: errors are per call and thread-safe.
 *  - A v6d_client is an opaque handle; 0 is never valid. A stale, closed or
 *    made-up handle returns V6D_INVALID_HANDLE, it never crashes.
 *  - All functions are safe to call from several threads at once, also on the
 *    same client (requests on one client are serialised).
 *  - Object ids are the 64-bit ObjectIDs of Vineyard; bit 63 marks a blob. The
 *    text form is "o%016x".
 *  - Memory returned through a `char **` or `void **` out-parameter is owned by
 *    the caller and released with v6d_free(), unless stated otherwise.
 *  - A `flags` argument takes only the V6D_* bits its function's comment
 *    names; any other bit is refused with V6D_INVALID and nothing happens
 *    (a newer caller's flag is never silently ignored).
 *  - If the library ever recovers from an internal fault (a Go panic inside
 *    a call, e.g. from an out-pointer into unmapped memory; its stack goes to
 *    stderr) that call returns V6D_INTERNAL and every later fallible call is
 *    refused with V6D_INTERNAL, doing nothing. Only v6d_disconnect still
 *    closes its handle, so a process can tidy up; the functions that cannot
 *    fail still answer. tests/c (mode "poison") checks this.
 *  - fork(): the Go runtime inside libv6d does not survive fork(). In a child
 *    forked from a process that loaded the library (connected or not), every
 *    fallible call, v6d_connect included, fails at once with V6D_FORKED and a
 *    message naming the fix, without entering Go (it would hang). There,
 *    v6d_connected and v6d_is_rpc return 0, the counters (v6d_open_handles,
 *    v6d_private_views, v6d_arrow_exports) return -1, and v6d_abi_version,
 *    v6d_version, v6d_status_name, v6d_error_release and v6d_free work. Load
 *    the library in a process that does not fork afterwards, or fork (or exec)
 *    before loading it; Python: the 'spawn' or 'forkserver' start method.
 *    tests/c (test_fork_c.py) checks this. The exception (ABI 8):
 *    v6d_forked_get and v6d_forked_release read, in such a child, objects
 *    the daemon published, through the mappings the child inherited,
 *    without Go (see "Reading in a forked child" below).
 *
 * ABI versioning (the policy; docs/c-api.md, "Versions"):
 *
 *  - V6D_ABI_VERSION numbers this header's contract; v6d_abi_version() is the
 *    loaded library's. It is raised by 1 for each release that adds to the
 *    contract: a function, a status code, a flag bit, a struct, a guarantee.
 *    Each addition carries `\since N`. A program built against version N runs
 *    with any library whose v6d_abi_version() is N or more; one that uses a
 *    function of version N against a library that may be older checks
 *    v6d_abi_version() >= N first.
 *  - Never changed once published: a function's name, parameters, return
 *    type or documented behaviour; the value of a status code or flag; the
 *    layout of a struct. Nothing is removed. Changing any of these would be
 *    a new library (a new soname and header name), not a new version.
 *  - A caller may rely on what is documented here, and on nothing else: not
 *    on error message texts, timings or which calls make a round trip
 *    (these are described to explain costs, and may improve), nor on codes
 *    staying absent: a newer library may return a status code added later
 *    (treat any nonzero status as failure; v6d_status_name names it, or
 *    says "Code(N)").
 *  - The library exports more v6d_* functions than this header declares:
 *    those of include/v6d_internal.h, the Python package's fast path. That
 *    header is not installed and has no stability promise: its functions may
 *    change or go in any release, whatever V6D_ABI_VERSION says.
 *  - ABI 7 moved six functions of ABI 4 to 6 that served only the Python
 *    package (v6d_get_object_into, v6d_get_object_shaped,
 *    v6d_get_object_args, v6d_release_queue, v6d_release_queue_flush,
 *    v6d_pretouch) to include/v6d_internal.h; the library still exports them
 *    with the same behaviour, so programs built against ABI 4 to 6 still run.
 *  - ABI 8 adds spilling (v6d_evict, v6d_load, v6d_unpin), streams
 *    (v6d_create_stream ... v6d_drop_stream), v6d_get_arrow_stream of a
 *    vineyard::RecordBatchStream, and gets in a forked child without Go
 *    (v6d_forked_get, v6d_forked_release, struct v6d_forked_blob).
 *
 * \since 1
 */
#ifndef V6D_H_
#define V6D_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this ABI; v6d_abi_version() returns the library's. Each
 *  version only adds to the one before (see the policy above); `\since N`
 *  names the version that added what it marks. */
#define V6D_ABI_VERSION 8

/** Status codes. 0..255 are upstream Vineyard's StatusCode values; 1000 and
 *  above are this library's own (they never appear on the wire). */
typedef enum v6d_status {
  V6D_OK = 0,
  V6D_INVALID = 1,
  V6D_KEY_ERROR = 2,
  V6D_TYPE_ERROR = 3,
  V6D_IO_ERROR = 4,
  V6D_END_OF_FILE = 5,
  V6D_NOT_IMPLEMENTED = 6,
  V6D_ASSERTION_FAILED = 7,
  V6D_USER_INPUT_ERROR = 8,
  V6D_OBJECT_EXISTS = 11,
  V6D_OBJECT_NOT_EXISTS = 12,
  V6D_OBJECT_SEALED = 13,
  V6D_OBJECT_NOT_SEALED = 14,
  V6D_OBJECT_IS_BLOB = 15,
  V6D_OBJECT_TYPE_ERROR = 16,
  V6D_OBJECT_SPILLED = 17,
  V6D_OBJECT_NOT_SPILLED = 18,
  V6D_META_TREE_INVALID = 21,
  V6D_META_TREE_TYPE_INVALID = 22,
  V6D_META_TREE_TYPE_NOT_EXISTS = 23,
  V6D_META_TREE_NAME_INVALID = 24,
  V6D_META_TREE_NAME_NOT_EXISTS = 25,
  V6D_META_TREE_LINK_INVALID = 26,
  V6D_META_TREE_SUBTREE_NOT_EXISTS = 27,
  V6D_SERVER_NOT_READY = 31,
  V6D_ARROW_ERROR = 32,
  V6D_CONNECTION_FAILED = 33,
  V6D_CONNECTION_ERROR = 34,
  V6D_ETCD_ERROR = 35,
  V6D_ALREADY_STOPPED = 36,
  V6D_REDIS_ERROR = 37,
  V6D_NOT_ENOUGH_MEMORY = 41,
  V6D_STREAM_DRAINED = 42,
  V6D_STREAM_FAILED = 43,
  V6D_INVALID_STREAM_STATE = 44,
  V6D_STREAM_OPENED = 45,
  V6D_GLOBAL_OBJECT_INVALID = 51,
  V6D_UNKNOWN_ERROR = 255,
  /** A handle argument is 0, closed, or was never returned by this library. */
  V6D_INVALID_HANDLE = 1000,
  /** A blocking call gave up after its timeout; nothing changed. */
  V6D_TIMEOUT = 1001,
  /** The library caught an internal fault; every later call fails too. */
  V6D_INTERNAL = 1002,
  /** Called in a child forked from a process that loaded the library: no
   *  call works there (see "fork()" above). \since 7 */
  V6D_FORKED = 1003
} v6d_status;

/** A per-call error. The caller owns the struct (zero-initialise it); the
 *  library allocates `message`, released by v6d_error_release(). */
typedef struct v6d_error {
  int32_t code;  /**< the v6d_status of the failure */
  char *message; /**< NUL-terminated, or NULL */
} v6d_error;

/** An opaque client handle (one connection to a daemon); 0 is never valid. */
typedef uint64_t v6d_client;

/** Flags of v6d_delete. */
enum {
  V6D_DELETE_FORCE = 1,       /**< also delete every object that uses these */
  V6D_DELETE_SHALLOW = 2,     /**< keep non-blob members (upstream deep=false) */
  V6D_DELETE_MEMORY_TRIM = 4  /**< return freed pages to the kernel */
};

/** Flags of v6d_get_buffers. */
enum {
  V6D_GET_UNSAFE = 1 /**< allow unsealed blobs */
};

/* ---- library ----------------------------------------------------------- */

/** Returns the ABI version the library implements (V6D_ABI_VERSION of the
 *  header it was built from). Never fails. \since 1 */
int32_t v6d_abi_version(void);

/** Returns the library version as a static string, e.g. "0.1.0". \since 1 */
const char *v6d_version(void);

/** Returns a static, NUL-terminated name for a status, e.g. "ObjectNotExists";
 *  "Code(N)" for a code this library does not know ("Unknown" in a forked
 *  child). \since 1 */
const char *v6d_status_name(int32_t status);

/** Frees the message of err (if any) and sets it to NULL. err may be NULL.
 *  \since 1 */
void v6d_error_release(v6d_error *err);

/** Frees memory this library returned through an out-parameter. NULL is a
 *  no-op. \since 1 */
void v6d_free(void *ptr);

/** Returns the number of live client handles (for leak checks in tests).
 *  \since 1 */
int64_t v6d_open_handles(void);

/* ---- connections ------------------------------------------------------- */

/** Connects to the daemon listening on the UNIX socket `socket`. If socket is
 *  NULL or "", the environment variable VINEYARD_IPC_SOCKET is used. On
 *  success *out holds a new handle, released by v6d_disconnect(). The
 *  connect and the registration are bounded by the default timeout (300 s;
 *  see v6d_set_timeout). Fails with V6D_CONNECTION_FAILED naming the path
 *  tried, also when the daemon does not answer in time. \since 1 */
v6d_status v6d_connect(const char *socket, v6d_client *out, v6d_error *err);

/** Connects to a daemon's TCP (RPC) listener at `endpoint`, "host:port" (a
 *  list "h1:p1,h2:p2" is tried in order; NULL or "": the environment variable
 *  VINEYARD_RPC_ENDPOINT), presenting `secret` (NULL: the environment
 *  variable VINEYARD_RPC_SECRET, if set) to a daemon that requires one. On
 *  success *out holds a new handle, released by v6d_disconnect(), with the
 *  API of any other: nothing is shared with the daemon, so buffers created
 *  lie in memory libv6d owns and are sent at seal or create, and every get
 *  (v6d_get, v6d_get_buffers, v6d_get_object) copies the blobs' bytes into
 *  memory libv6d owns, valid and releasable exactly as over IPC (until
 *  v6d_release or v6d_disconnect), and writable (a private copy).
 *  v6d_map_private is refused (V6D_INVALID): the copies are private already.
 *  Fails with V6D_CONNECTION_FAILED naming the endpoint, also for a refused
 *  secret. \since 3 */
v6d_status v6d_connect_rpc(const char *endpoint, const char *secret,
                           v6d_client *out, v6d_error *err);

/** Returns 1 if `client` was connected with v6d_connect_rpc, 0 otherwise (an
 *  invalid handle included). Never blocks. \since 3 */
int32_t v6d_is_rpc(v6d_client client);

/** Closes the connection and invalidates the handle. The daemon releases every
 *  reference the connection held and frees its unsealed buffers; pointers this
 *  client returned stay readable until the process unmaps the arena, which
 *  happens when the last client of the process disconnects. \since 1 */
v6d_status v6d_disconnect(v6d_client client, v6d_error *err);

/** Returns 1 if the connection of `client` to its daemon is alive, else 0:
 *  0 once the daemon died or hung up, a call lost the connection, or the
 *  handle is invalid or disconnected (and after an internal fault). It never
 *  blocks: it polls the socket without waiting, also while another thread's
 *  call is in flight on the client. A 1 may be stale at once; a 0 is final,
 *  and from then on gets the client would answer from its cache
 *  (v6d_get_object, v6d_get_metadata) go to the daemon and fail with
 *  V6D_CONNECTION_ERROR. The client still needs v6d_disconnect(). \since 3 */
int32_t v6d_connected(v6d_client client);

/** Fills *instance_id with the id of the daemon's instance. No round trip.
 *  \since 1 */
v6d_status v6d_instance_id(v6d_client client, uint64_t *instance_id,
                           v6d_error *err);

/** Returns the daemon's instance status as a JSON object (keys instance_id,
 *  deployment, memory_usage, memory_limit, deferred_requests,
 *  ipc_connections, rpc_connections, and version: the daemon's version from
 *  its register_reply, as upstream's client.version gives it) in *json,
 *  NUL-terminated, of length *len (len may be NULL). Free with v6d_free().
 *  \since 1 (the version key since 3) */
v6d_status v6d_instance_status(v6d_client client, char **json, size_t *len,
                               v6d_error *err);

/** Returns the cluster metadata as JSON ({"i<N>": {...}}), as
 *  v6d_instance_status does. \since 1 */
v6d_status v6d_cluster_meta(v6d_client client, char **json, size_t *len,
                            v6d_error *err);

/* ---- blobs ------------------------------------------------------------- */

/** Creates an unsealed blob of `size` bytes. *id receives its id and *data a
 *  writable pointer to its bytes, valid until the blob is sealed and
 *  released, aborted, or the client disconnects. size 0 gives the empty blob
 *  (id 0x8000000000000000) and a NULL pointer. \since 1 */
v6d_status v6d_create_buffer(v6d_client client, uint64_t size, uint64_t *id,
                             uint8_t **data, v6d_error *err);

/** Creates n unsealed blobs in one round trip (one per 65,536, the most a
 *  request carries); ids[i] and datas[i] as for v6d_create_buffer. On
 *  failure nothing is created. \since 1 */
v6d_status v6d_create_buffers(v6d_client client, size_t n,
                              const uint64_t *sizes, uint64_t *ids,
                              uint8_t **datas, v6d_error *err);

/** Seals a blob this client created: it becomes immutable and readable by
 *  others. The writable pointer must no longer be written. The client keeps a
 *  reference to the blob until v6d_release(). \since 1 */
v6d_status v6d_seal(v6d_client client, uint64_t id, v6d_error *err);

/** Drops an unsealed blob this client created; its memory is freed.
 *  Fails with V6D_OBJECT_SEALED for a sealed blob. \since 1 */
v6d_status v6d_abort(v6d_client client, uint64_t id, v6d_error *err);

/** Shrinks an unsealed blob this client created to `size` bytes (never
 *  grows). \since 1 */
v6d_status v6d_shrink(v6d_client client, uint64_t id, uint64_t size,
                      v6d_error *err);

/** Gets a sealed blob: *data receives a READ-ONLY pointer to its bytes and
 *  *size their count. The pointer lies in the shared arena, mapped PROT_READ
 *  (a write faults). The client holds a reference until v6d_release(id);
 *  while held, the bytes never change, even if the blob is deleted. Repeated
 *  gets of the same blob count up; each needs a release. A get of a blob the
 *  client already holds is answered without a round trip, and so is a get
 *  of any blob the daemon published in its directory (our daemon, over a
 *  UNIX socket: docs/design.md, "Gets without a round trip"); both first
 *  check that the daemon is still there (a word in shared memory the daemon
 *  holds while it lives, else a poll that never waits) and fail
 *  with V6D_CONNECTION_ERROR once it is gone. \since 1 */
v6d_status v6d_get(v6d_client client, uint64_t id, const uint8_t **data,
                   uint64_t *size, v6d_error *err);

/** Gets n blobs in one round trip (none when the directory has them all;
 *  one per 65,536, the most a request carries), as v6d_get does for each.
 *  With V6D_GET_UNSAFE in flags unsealed blobs are allowed. Fails as a
 *  whole if any id is missing. \since 1 */
v6d_status v6d_get_buffers(v6d_client client, size_t n, const uint64_t *ids,
                           uint32_t flags, const uint8_t **datas,
                           uint64_t *sizes, v6d_error *err);

/** Releases one reference taken by v6d_get, v6d_get_buffers, v6d_seal or
 *  v6d_get_object (for an object id, the blobs that get pinned). No round
 *  trip: when the client's count reaches 0 the daemon is told ahead of the
 *  client's next request (or within a few milliseconds), and memory of a
 *  deleted blob may then be reused: the pointer must not be read after this
 *  call. \since 1 */
v6d_status v6d_release(v6d_client client, uint64_t id, v6d_error *err);

/* ---- private copy-on-write views --------------------------------------- */

/** Maps a private, copy-on-write view of a blob this client holds (from
 *  v6d_get, v6d_get_buffers, v6d_get_object or v6d_seal). *data receives a
 *  WRITABLE pointer to the blob's bytes, *size their count (size may be NULL).
 *  Reads share the physical pages of the store: nothing is copied or faulted
 *  in up front, so the cost does not depend on the size. The first write to a
 *  4 KiB page copies that page into this process (the kernel does it); writes
 *  never reach the store or any other reader, and never fault.
 *
 *  Ownership: the view holds a reference to the blob of its own (taken
 *  locally, no round trip), so it stays valid, and the blob's memory is never
 *  reused, until v6d_unmap_private(*data), even after v6d_release of the
 *  caller's reference or v6d_disconnect: a disconnected client keeps its
 *  connection open until its last view is unmapped. Each call makes a new
 *  mapping. The empty blob fails with V6D_INVALID, an unsealed blob with
 *  V6D_OBJECT_NOT_SEALED, a blob not held with V6D_OBJECT_NOT_EXISTS.
 *  Thread-safe; it never waits behind another thread's request. \since 2 */
v6d_status v6d_map_private(v6d_client client, uint64_t blob_id, uint8_t **data,
                           uint64_t *size, v6d_error *err);

/** Unmaps a view v6d_map_private returned (`data` exactly as returned) and
 *  drops the view's reference to the blob; when it was the client's last, the
 *  daemon is told (a round trip) and a deleted blob's memory is freed. The
 *  view must not be touched afterwards. It takes no client handle: it works
 *  after v6d_disconnect. An address that is not a live view (never mapped,
 *  or unmapped already) fails with V6D_INVALID and changes nothing.
 *  Thread-safe. \since 2 */
v6d_status v6d_unmap_private(uint8_t *data, v6d_error *err);

/** Returns the number of live private views in the process (for leak checks
 *  in tests). \since 2 */
int64_t v6d_private_views(void);

/* ---- metadata ---------------------------------------------------------- */

/** Creates an object from a metadata tree given as JSON (`json`, `len` bytes;
 *  len 0 means NUL-terminated). The tree needs "typename"; members are nested
 *  trees carrying at least "id" and must exist. Blobs this client created
 *  that are listed in seal_ids (n_seal of them, may be 0) are sealed first in
 *  the same round trip. *id receives the new object id. If meta_out is not
 *  NULL it receives the stored tree as JSON (free with v6d_free()) and
 *  *meta_out_len its length (may be NULL). \since 1 */
v6d_status v6d_create_metadata(v6d_client client, const char *json, size_t len,
                               const uint64_t *seal_ids, size_t n_seal,
                               uint64_t *id, char **meta_out,
                               size_t *meta_out_len, v6d_error *err);

/** The most bytes one v6d_put_inline may carry. */
#define V6D_INLINE_MAX (64u << 20)

/** Puts small data in ONE round trip: each of the n buffers datas[i]
 *  (sizes[i] bytes, copied through the socket) becomes a new sealed blob,
 *  and, if json is not NULL, the object of the metadata tree json (len bytes,
 *  0: NUL-terminated) is created with them, a member {"inline": i} standing
 *  for the i-th blob. blob_ids (may be NULL) receives the n blob ids, *id
 *  (may be NULL) the object's id (0 without json). The client keeps no
 *  reference to what it created. The bytes cross the socket, so this pays
 *  for small data (up to a few hundred KiB); larger data is faster written
 *  in place with v6d_create_buffer. More than V6D_INLINE_MAX bytes in all is
 *  V6D_INVALID. Nothing is created on failure.
 *  With our daemon over its UNIX socket, a put with a tree of up to 16 KiB
 *  whose members are its own blobs or new objects (none linking an existing
 *  object by id) makes NO round trip: the bytes go into memory the daemon
 *  leased to this client, the id comes from the lease, and the request is
 *  sent without waiting for the reply. Every later request of any client
 *  finds the object. Should the daemon still refuse it, the next
 *  v6d_put_inline of this client returns that error (naming the object) and
 *  puts nothing. \since 2 */
v6d_status v6d_put_inline(v6d_client client, const char *json, size_t len,
                          size_t n, const void *const *datas,
                          const uint64_t *sizes, uint64_t *blob_ids,
                          uint64_t *id, v6d_error *err);

/** Returns the metadata tree of an object as JSON in *json (free with
 *  v6d_free()), *len its length (may be NULL). Blobs included as members are
 *  not pinned. Served from the client's cache as v6d_get_object. \since 1 */
v6d_status v6d_get_metadata(v6d_client client, uint64_t id, char **json,
                            size_t *len, v6d_error *err);

/** Gets an object in one round trip, or none when the daemon published it in
 *  its directory (the same result, the same references and release; see
 *  v6d_get): its metadata tree as v6d_get_metadata
 *  returns it, and a reference to every blob in the tree, so that
 *  v6d_blob_pointer() answers for them without a round trip. For a blob id
 *  the tree is the blob's own. Release with v6d_release(id) once.
 *  A get of an object this client got recently is answered from the client's
 *  cache, without a round trip, unless any client deleted or changed an
 *  object since (the daemon's meta epoch, docs/protocol.md), or the daemon
 *  is gone (every answer without a round trip first polls the socket, as
 *  v6d_connected does): the result is the same as from the daemon. `flags` is reserved and must be 0: no flag
 *  is defined yet (upstream's sync_remote would be one, once objects live on
 *  several instances), and a set bit is V6D_INVALID. \since 1 */
v6d_status v6d_get_object(v6d_client client, uint64_t id, uint32_t flags,
                          char **json, size_t *len, v6d_error *err);

/** Looks up a blob this client holds a reference to (from v6d_get,
 *  v6d_get_object, v6d_create_buffer or v6d_seal): *data and *size as
 *  v6d_get would give, without a round trip and without a new reference.
 *  *writable is set to 1 for an unsealed blob this client created (writable
 *  may be NULL). Fails with V6D_OBJECT_NOT_EXISTS if not held. \since 1 */
v6d_status v6d_blob_pointer(v6d_client client, uint64_t id,
                            const uint8_t **data, uint64_t *size,
                            int32_t *writable, v6d_error *err);

/** Lists objects whose typename matches `pattern` (a glob, or an ECMAScript
 *  style full-match regex when regex != 0), at most `limit` of them (0 means
 *  no limit). *json receives a JSON object {"o…": tree, ...}. \since 1 */
v6d_status v6d_list(v6d_client client, const char *pattern, int32_t regex,
                    uint64_t limit, char **json, size_t *len, v6d_error *err);

/** Deletes n objects. flags: V6D_DELETE_*. Missing ids are ignored, as
 *  upstream does. Objects still referenced by another object are kept unless
 *  V6D_DELETE_FORCE. Blobs another client still holds stay readable for it
 *  until its release. Any n: a list longer than a request takes (65,536
 *  ids) goes in several, with the outcome of one, but atomic only per
 *  65,536. \since 1 */
v6d_status v6d_delete(v6d_client client, size_t n, const uint64_t *ids,
                      uint32_t flags, v6d_error *err);

/** *exists receives 1 if the object (or blob) exists, else 0. \since 1 */
v6d_status v6d_exists(v6d_client client, uint64_t id, int32_t *exists,
                      v6d_error *err);

/** Persists an object: its metadata becomes visible to every instance of the
 *  cluster, and names may point to it. \since 1 */
v6d_status v6d_persist(v6d_client client, uint64_t id, v6d_error *err);

/** *persisted receives 1 if the object is persisted. \since 1 */
v6d_status v6d_if_persist(v6d_client client, uint64_t id, int32_t *persisted,
                          v6d_error *err);

/** Makes a new object with the same metadata and members as `id`, plus the
 *  keys of extra_json (a JSON object of scalars; NULL for none). \since 1 */
v6d_status v6d_shallow_copy(v6d_client client, uint64_t id,
                            const char *extra_json, uint64_t *target,
                            v6d_error *err);

/** Sets label key=value on an object (upstream "__labels"). \since 1 */
v6d_status v6d_label(v6d_client client, uint64_t id, const char *key,
                     const char *value, v6d_error *err);

/* ---- names ------------------------------------------------------------- */

/** Associates `name` with a persisted object; an existing name is moved.
 *  \since 1 */
v6d_status v6d_put_name(v6d_client client, uint64_t id, const char *name,
                        v6d_error *err);

/** Resolves a name. With wait != 0, blocks until the name appears, for at
 *  most timeout_ms milliseconds (negative: no limit; above 2^31-1:
 *  V6D_INVALID), then fails with V6D_TIMEOUT. The client's timeout
 *  (v6d_set_timeout) is extended by the wait for this call. Callers that
 *  must stay interruptible loop over short timeouts. Without wait a missing
 *  name is V6D_OBJECT_NOT_EXISTS. \since 1 */
v6d_status v6d_get_name(v6d_client client, const char *name, int32_t wait,
                        int64_t timeout_ms, uint64_t *id, v6d_error *err);

/** Removes a name; an unknown name is not an error. \since 1 */
v6d_status v6d_drop_name(v6d_client client, const char *name, v6d_error *err);

/** Lists names matching pattern (glob, or regex when regex != 0), at most
 *  limit (0: all), as a JSON object {"name": id-number, ...}. \since 1 */
v6d_status v6d_list_names(v6d_client client, const char *pattern,
                          int32_t regex, uint64_t limit, char **json,
                          size_t *len, v6d_error *err);

/* ---- housekeeping ------------------------------------------------------ */

/** Deletes every object the daemon holds (force, deep). \since 1 */
v6d_status v6d_clear(v6d_client client, v6d_error *err);

/** Returns unused arena pages to the kernel; *trimmed (may be NULL) receives
 *  1 if anything was released. \since 1 */
v6d_status v6d_memory_trim(v6d_client client, int32_t *trimmed,
                           v6d_error *err);

/* ---- spilling (a daemon started with --spill-path) --------------------- */

/** Spills now, to the daemon's spill directory, the blobs of n objects (or
 *  blobs) that no client holds; the others stay in memory. A later get loads
 *  them back. V6D_INVALID when the daemon does not spill;
 *  V6D_OBJECT_NOT_EXISTS for a missing id (nothing spilled); V6D_IO_ERROR when
 *  a write fails (a full disk). At most 65,536 ids. \since 8 */
v6d_status v6d_evict(v6d_client client, size_t n, const uint64_t *ids,
                     v6d_error *err);

/** Loads the spilled blobs of n objects back into memory. With pin != 0 this
 *  client also holds each of their blobs, so none spills, until v6d_unpin or
 *  v6d_close. V6D_IO_ERROR when a spill file is missing or corrupt (nothing
 *  wrong is loaded); V6D_NOT_ENOUGH_MEMORY when held data fills the arena.
 *  At most 65,536 ids. \since 8 */
v6d_status v6d_load(v6d_client client, size_t n, const uint64_t *ids,
                    int32_t pin, v6d_error *err);

/** Drops this client's holds of the blobs of n objects (taken by v6d_load
 *  with pin, or by gets). At most 65,536 ids. \since 8 */
v6d_status v6d_unpin(v6d_client client, size_t n, const uint64_t *ids,
                     v6d_error *err);


/* ---- Arrow C data interface ------------------------------------------- */

/*
 * Arrow data crosses this ABI as the structs of the Arrow C data interface
 * (https://arrow.apache.org/docs/format/CDataInterface.html) and C stream
 * interface. They are defined here under the standard guards, so this header
 * coexists with arrow/c/abi.h, nanoarrow and others.
 *
 * Objects (docs/protocol.md, "Arrow objects"): an array is one object per
 * array node (children and dictionary are member objects, every buffer a
 * blob); a record batch (vineyard::RecordBatch) holds its columns, a table
 * (vineyard::Table) its record batches, a chunked array
 * (vineyard::ChunkedArray) its chunks.
 *
 * Get: the buffers of what a get returns point into the shared arena, mapped
 * PROT_READ (no copy; a write faults). Each get holds references to the
 * blobs it points into until the consumer has released every struct it got
 * (the top-level struct, and any child or dictionary struct it moved out of
 * it), on whatever thread, at whatever time: also after v6d_disconnect of the
 * client, which then keeps the connection (and the daemon's references) and
 * the mapping alive until the last of them is released. While held, the
 * bytes never change, even if the object is deleted. Release callbacks are
 * thread-safe; in a child forked after the get they only mark the struct
 * released (leaking it), since the library's Go runtime does not survive
 * fork(). Streams follow the C stream interface: one consumer thread at a
 * time.
 *
 * Output structs (out, out_schema) must be zero-initialised, or released:
 * a call refuses to overwrite a struct whose release callback is set.
 */

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  /* Array type description */
  const char *format;
  const char *name;
  const char *metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema **children;
  struct ArrowSchema *dictionary;

  /* Release callback */
  void (*release)(struct ArrowSchema *);
  /* Opaque producer-specific data */
  void *private_data;
};

struct ArrowArray {
  /* Array data description */
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void **buffers;
  struct ArrowArray **children;
  struct ArrowArray *dictionary;

  /* Release callback */
  void (*release)(struct ArrowArray *);
  /* Opaque producer-specific data */
  void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  /* Callbacks providing stream functionality */
  int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
  int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
  const char *(*get_last_error)(struct ArrowArrayStream *);

  /* Release callback */
  void (*release)(struct ArrowArrayStream *);

  /* Opaque producer-specific data */
  void *private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

/** Flags of v6d_put_arrow_array and v6d_put_arrow_stream. */
enum {
  /** v6d_put_arrow_array: store a struct array as a vineyard::RecordBatch
   *  (its children are the columns, its schema metadata is kept) rather than
   *  as a vineyard::StructArray. */
  V6D_ARROW_RECORD_BATCH = 1,
  /** v6d_put_arrow_stream: store the stream as a vineyard::ChunkedArray also
   *  when its items are struct arrays (by default such a stream is a table). */
  V6D_ARROW_CHUNKED = 2
};

/** Stores an Arrow array: `array` of the type `schema` describes, every
 *  buffer copied once into the shared arena, in two round trips whatever the
 *  number of buffers. *id receives the new object's id.
 *
 *  Ownership: the array is MOVED: when the call returns, on success and on
 *  every failure, it has been released (array->release is NULL). The schema
 *  is only read; the caller keeps it and releases it.
 *
 *  A struct array is stored as a vineyard::StructArray, or as a
 *  vineyard::RecordBatch with V6D_ARROW_RECORD_BATCH (then it may not have
 *  top-level nulls). extra_json (NULL for none) is a JSON object of scalar
 *  fields added to the root of the stored tree, e.g. {"producer_": "x"};
 *  the layout's own keys are refused. An Arrow type the layout does not know
 *  fails with V6D_NOT_IMPLEMENTED naming it; malformed Arrow data with
 *  V6D_ARROW_ERROR. The client keeps no reference to what it stored (no
 *  v6d_release is needed). Thread-safe. \since 2 */
v6d_status v6d_put_arrow_array(v6d_client client, struct ArrowArray *array,
                               const struct ArrowSchema *schema,
                               uint32_t flags, const char *extra_json,
                               uint64_t *id, v6d_error *err);

/** Stores an Arrow stream: it is read to its end and its items stored in two
 *  round trips in all. A stream of struct arrays becomes a vineyard::Table of
 *  record batches (the stream schema's metadata is kept), unless
 *  V6D_ARROW_CHUNKED; a stream of any other type a vineyard::ChunkedArray
 *  (as pyarrow's ChunkedArray.__arrow_c_stream__ yields). A stream without
 *  items is stored with its schema.
 *
 *  Ownership: the stream is consumed and released when the call returns, on
 *  success and on every failure (also when one of its callbacks fails: the
 *  error carries get_last_error's message, V6D_ARROW_ERROR). extra_json is
 *  as for v6d_put_arrow_array. Thread-safe; the stream's callbacks run on the
 *  calling thread. \since 2 */
v6d_status v6d_put_arrow_stream(v6d_client client,
                                struct ArrowArrayStream *stream,
                                uint32_t flags, const char *extra_json,
                                uint64_t *id, v6d_error *err);

/** Gets an Arrow object as one array, in one round trip: an array; a record
 *  batch as a struct array whose children are the columns (out_schema holds
 *  the schema metadata); a table or chunked array of exactly one chunk as
 *  that chunk. Other objects fail with V6D_OBJECT_TYPE_ERROR (a table of
 *  several batches names v6d_get_arrow_stream).
 *
 *  Ownership: *out and *out_schema (zero-initialised) are filled with
 *  structs the caller owns and releases with their release callbacks. The
 *  buffers of *out point into the shared arena and stay valid, unchanged,
 *  until *out and everything moved out of it are released (see the section
 *  comment above); out_schema owns only C memory. Thread-safe. \since 2 */
v6d_status v6d_get_arrow_array(v6d_client client, uint64_t id,
                               struct ArrowArray *out,
                               struct ArrowSchema *out_schema, v6d_error *err);

/** Gets an Arrow object as a stream, in one round trip: the record batches
 *  of a table (schema: a struct of the columns, with the schema metadata),
 *  the chunks of a chunked array (schema: their type), or a single array or
 *  record batch as a stream of one item. Since ABI 8, of a
 *  vineyard::RecordBatchStream (see "streams"): the stream is opened for
 *  reading on this client (one already reading it goes on), its first chunk
 *  pulled for the schema, and each get_next hands out the batches of its
 *  chunks (record batches or tables) as they come, waiting for the writer;
 *  the end of the stream ends it, a failed stream is an error of get_next
 *  (EIO, get_last_error says why). Such a stream holds the client's
 *  connection while it waits, and must be used by one thread at a time.
 *
 *  Ownership: *out (zero-initialised) is a stream the caller owns and
 *  releases with out->release. Each array get_next returns is the caller's
 *  too; its buffers stay valid until it is released, also after the stream
 *  is. Thread-safe to make; the stream itself is used by one thread at a
 *  time. \since 2 */
v6d_status v6d_get_arrow_stream(v6d_client client, uint64_t id,
                                struct ArrowArrayStream *out, v6d_error *err);

/** As v6d_get_arrow_array, but from a metadata tree (`json`, `len` bytes; len
 *  0 means NUL-terminated) the client already holds the blobs of: the tree
 *  v6d_get_object returned, or any Arrow member subtree of it (a column of a
 *  data frame, a batch of a table). No round trip. The export takes its own
 *  references: the caller may release the v6d_get_object reference at once.
 *  A blob of the tree the client does not hold fails with
 *  V6D_OBJECT_NOT_EXISTS; a tree that is not a valid Arrow object with
 *  V6D_META_TREE_INVALID (buffers shorter than the shape needs are caught;
 *  offsets are checked at their ends only). Thread-safe. \since 2 */
v6d_status v6d_arrow_array_from_meta(v6d_client client, const char *json,
                                     size_t len, struct ArrowArray *out,
                                     struct ArrowSchema *out_schema,
                                     v6d_error *err);

/** As v6d_get_arrow_stream, but from a metadata (sub)tree whose blobs the
 *  client holds, as v6d_arrow_array_from_meta. No round trip.
 *  Thread-safe. \since 2 */
v6d_status v6d_arrow_stream_from_meta(v6d_client client, const char *json,
                                      size_t len,
                                      struct ArrowArrayStream *out,
                                      v6d_error *err);

/** *out receives 1 if `address` lies in a shared arena this process maps
 *  (through any client), else 0: how a caller checks that data it got is a
 *  view of the store, not a copy. No round trip. Thread-safe. \since 2 */
v6d_status v6d_is_shared_memory(v6d_client client, const void *address,
                                int32_t *out, v6d_error *err);

/** Returns the number of Arrow structs this library exported (top-level
 *  arrays, schemas and streams, and the schemas and arrays streams
 *  returned) whose release callback has not run yet: for leak checks in
 *  tests. Never fails. \since 2 */
int64_t v6d_arrow_exports(void);

/* ---- timeouts ---------------------------------------------------------- */

/** Sets how long every later call of `client` may wait for the daemon, in
 *  milliseconds: each blocking read or write of a call (and v6d_get_name's
 *  wait, added on top) is bounded by it. The default is 300000 (300 s, as
 *  upstream). timeout_ms must lie in [1, 2^31-1] (about 24.8 days), else
 *  V6D_INVALID and nothing changes. A call that times out fails with
 *  V6D_TIMEOUT; the connection is unusable from then on (a late reply would
 *  be taken for the next call's): every later call fails at once with
 *  V6D_CONNECTION_ERROR, while pointers the client returned stay valid until
 *  v6d_disconnect. Thread-safe; waits for a call in progress on another
 *  thread to end. \since 3 */
v6d_status v6d_set_timeout(v6d_client client, int64_t timeout_ms,
                           v6d_error *err);

/** *timeout_ms receives the client's timeout in milliseconds (300000 unless
 *  v6d_set_timeout changed it). No round trip; never waits behind another
 *  thread's call. \since 3 */
v6d_status v6d_get_timeout(v6d_client client, int64_t *timeout_ms,
                           v6d_error *err);

/** *copy receives the id of a local copy of object `id`: `id` itself when the
 *  object is local to the daemon; else the daemon fetches the blobs of the
 *  remote persisted object from the instances that own them (over its peer
 *  service) and stores a copy of the tree with new ids and the same
 *  signature, or returns the copy it made before. Fails with
 *  V6D_OBJECT_NOT_EXISTS when the object or a blob is gone,
 *  V6D_CONNECTION_ERROR when an owner cannot be reached, V6D_NOT_ENOUGH_MEMORY
 *  when the copy does not fit; after a failure nothing of the copy remains.
 *  May take as long as the transfer (bounded by the daemon). \since 3 */
v6d_status v6d_migrate(v6d_client client, uint64_t id, uint64_t *copy,
                       v6d_error *err);

/* ---- streams (ABI 8) ---------------------------------------------------
 *
 * A stream is an object (its metadata created first, typename one of
 * upstream's: vineyard::ByteStream, vineyard::RecordBatchStream,
 * vineyard::DataframeStream) whose chunks, ordinary sealed objects or blobs,
 * one writer pushes and its readers pull in order (docs/protocol.md,
 * "Streams"). A chunk a reader pulled stays valid for it while it holds a
 * reference (v6d_get_object / v6d_get then v6d_release); the daemon deletes
 * it once every reader pulled the next. Each call is one round trip; a
 * client waiting in one blocks its other calls until it returns. */

/** Modes of v6d_open_stream, as upstream numbers them. \since 8 */
#define V6D_STREAM_READ 1
#define V6D_STREAM_WRITE 2

/** Makes the object `id` a stream. `readers` (0 or 1: upstream's single
 *  reader; at most 64) readers each see every chunk; `capacity` (0: the
 *  daemon's default, 16; at most 65536) is how many chunks it buffers before
 *  its writer waits. Values other than 0/1 and 0 need our daemon
 *  (V6D_NOT_IMPLEMENTED against upstream's). A missing object is
 *  V6D_OBJECT_NOT_EXISTS, a blob V6D_OBJECT_IS_BLOB, a second create
 *  V6D_OBJECT_EXISTS. Thread-safe. \since 8 */
v6d_status v6d_create_stream(v6d_client client, uint64_t id, int32_t readers,
                             int32_t capacity, v6d_error *err);

/** Opens stream `id` on this client for reading (V6D_STREAM_READ: takes a
 *  reader slot) or writing (V6D_STREAM_WRITE: becomes its one writer);
 *  V6D_STREAM_OPENED when taken. Pushing or pulling without opening is
 *  allowed (as upstream). Thread-safe. \since 8 */
v6d_status v6d_open_stream(v6d_client client, uint64_t id, int32_t mode,
                           v6d_error *err);

/** Appends the sealed object or blob `chunk` to `stream`. When the stream
 *  holds its capacity of chunks not yet read by every reader, waits at most
 *  timeout_ms (negative: the daemon's default, 60 s) for room, then fails
 *  with V6D_NOT_ENOUGH_MEMORY, having pushed nothing. A stopped stream is
 *  V6D_INVALID_STREAM_STATE. Thread-safe. \since 8 */
v6d_status v6d_push_chunk(v6d_client client, uint64_t stream, uint64_t chunk,
                          int64_t timeout_ms, v6d_error *err);

/** *chunk receives the id of the stream's next chunk, waiting without limit
 *  until there is one (the writer going away ends the wait). At the end:
 *  V6D_STREAM_DRAINED after the writer stopped, V6D_STREAM_FAILED when it
 *  failed, went away, or the stream was dropped. Pulling gives back the
 *  chunk pulled before (its references this client holds stay valid until
 *  released). Thread-safe. \since 8 */
v6d_status v6d_pull_chunk(v6d_client client, uint64_t stream, uint64_t *chunk,
                          v6d_error *err);

/** *id and *data receive a new writable blob of `size` bytes that becomes the
 *  stream's next chunk: the next v6d_new_buffer_chunk or v6d_stop_stream of
 *  this stream on this client seals and pushes it (as upstream's
 *  new_buffer_chunk); *data is valid and writable until then. Thread-safe.
 *  \since 8 */
v6d_status v6d_new_buffer_chunk(v6d_client client, uint64_t stream,
                                uint64_t size, uint64_t *id, uint8_t **data,
                                v6d_error *err);

/** Ends the stream: its readers get V6D_STREAM_DRAINED after the last chunk,
 *  or V6D_STREAM_FAILED when `failed` is nonzero. A buffer chunk not yet
 *  pushed is pushed first (dropped when failed). Stopping twice is
 *  V6D_INVALID_STREAM_STATE. Thread-safe. \since 8 */
v6d_status v6d_stop_stream(v6d_client client, uint64_t stream, int32_t failed,
                           v6d_error *err);

/** Removes the stream (not its metadata): waiting readers and writers get
 *  V6D_STREAM_FAILED, chunks not yet read are deleted, later calls about it
 *  V6D_OBJECT_NOT_EXISTS. Thread-safe. \since 8 */
v6d_status v6d_drop_stream(v6d_client client, uint64_t stream, v6d_error *err);

/* ---- reading in a forked child ---------------------------------------- */

/** One blob of an object v6d_forked_get returned: its id, its bytes
 *  (read-only memory of the daemon's arena, as the child inherited the
 *  mapping; NULL for the empty blob) and its size. \since 8 */
typedef struct v6d_forked_blob {
  uint64_t id;
  const void *data;
  uint64_t size;
} v6d_forked_blob;

/** Gets object `id` in a child forked (without exec) from a process in which
 *  `client` was connected over its UNIX socket, with no Go and no request to
 *  the daemon: the child reads the daemon's directory and arena through the
 *  mappings it inherited, and pins the object in its parent's pin page
 *  (docs/design.md, "Reading in a forked child"). *tree receives the
 *  NUL-terminated JSON metadata tree (as v6d_get_metadata returns it) and
 *  *tree_len (may be NULL) its length, *blobs an array of the *n_blobs blobs
 *  of the tree (free both with v6d_free), *pin the token that releases them.
 *  The blobs' bytes stay valid until v6d_forked_release(client, id, *pin),
 *  or until the parent's connection closes: the parent's connection bounds
 *  its children's pins. A child that ends without releasing leaves its pins
 *  until another child reuses their slots or the parent disconnects.
 *  Thread-safe; children share 256 pin slots per parent connection.
 *  Fails with V6D_INVALID outside such a child (use v6d_get_object) or when
 *  the daemon's directory has another layout version than this library's
 *  (the message names both), V6D_INVALID_HANDLE when `client` was not
 *  connected with the daemon's directory at the fork (a client over TCP, or
 *  one without the directory), V6D_OBJECT_NOT_EXISTS when the directory has
 *  no entry for `id` (also an object it does not publish: one of another
 *  instance, a tree over 64 KiB, a blob stored with its object's tree),
 *  V6D_CONNECTION_ERROR once the daemon exited or the parent's connection
 *  closed, V6D_NOT_ENOUGH_MEMORY when live processes hold every slot for
 *  children. Every other call of this library still fails with V6D_FORKED
 *  in such a child. \since 8 */
v6d_status v6d_forked_get(v6d_client client, uint64_t id, char **tree,
                          size_t *tree_len, v6d_forked_blob **blobs,
                          size_t *n_blobs, uint64_t *pin, v6d_error *err);

/** Releases what v6d_forked_get(client, id) pinned with `pin`, once. Fails
 *  with V6D_INVALID outside a forked child, or when `pin` does not hold `id`
 *  for this process (released already). \since 8 */
v6d_status v6d_forked_release(v6d_client client, uint64_t id, uint64_t pin,
                              v6d_error *err);

#ifdef __cplusplus
}
#endif

#endif /* V6D_H_ */
