/*
 * v6d.c - the C face of libv6d.so: every public function of include/v6d.h is
 * defined here, against the header, and forwards to the Go export that does
 * the work (v6dgo_*, see exports.go; only v6d_* leaves the library, see
 * v6d.map). The header is thus the one source the exports are compiled
 * against: a definition that disagrees with its prototype is a "conflicting
 * types" error, and a Go export whose parameters disagree with the header is
 * an incompatible-pointer or conversion warning, an error under the package's
 * -Werror -Wconversion (exports.go's #cgo CFLAGS). scripts/check-abi-shim.sh
 * proves that a wrong signature fails the build. "v6d.h" is libv6d/v6d.h, a
 * symlink to include/v6d.h, so that a changed header rebuilds the library.
 *
 * Each forward is one direct call (a tail call at -O2); the const qualifiers
 * of the header, which cgo cannot express, are the only casts.
 */
#include "v6d.h"

#include "_cgo_export.h"

/* st converts a Go export's int32_t status; taking int32_t (not a cast) keeps
 * the export's return type checked too. */
static inline v6d_status st(int32_t s) { return (v6d_status)s; }

/* ---- library ----------------------------------------------------------- */

int32_t v6d_abi_version(void) { return V6D_ABI_VERSION; }

const char *v6d_version(void) { return v6dgo_version(); }

const char *v6d_status_name(int32_t status) {
  return v6dgo_status_name(status);
}

void v6d_error_release(v6d_error *err) { v6dgo_error_release(err); }

void v6d_free(void *ptr) { v6dgo_free(ptr); }

int64_t v6d_open_handles(void) { return v6dgo_open_handles(); }

/* ---- connections ------------------------------------------------------- */

v6d_status v6d_connect(const char *socket, v6d_client *out, v6d_error *err) {
  return st(v6dgo_connect((char *)socket, out, err));
}

v6d_status v6d_connect_rpc(const char *endpoint, const char *secret,
                           v6d_client *out, v6d_error *err) {
  return st(v6dgo_connect_rpc((char *)endpoint, (char *)secret, out, err));
}

int32_t v6d_is_rpc(v6d_client client) { return v6dgo_is_rpc(client); }

v6d_status v6d_disconnect(v6d_client client, v6d_error *err) {
  return st(v6dgo_disconnect(client, err));
}

int32_t v6d_connected(v6d_client client) { return v6dgo_connected(client); }

v6d_status v6d_instance_id(v6d_client client, uint64_t *instance_id,
                           v6d_error *err) {
  return st(v6dgo_instance_id(client, instance_id, err));
}

v6d_status v6d_instance_status(v6d_client client, char **json, size_t *len,
                               v6d_error *err) {
  return st(v6dgo_instance_status(client, json, len, err));
}

v6d_status v6d_cluster_meta(v6d_client client, char **json, size_t *len,
                            v6d_error *err) {
  return st(v6dgo_cluster_meta(client, json, len, err));
}

/* ---- blobs ------------------------------------------------------------- */

v6d_status v6d_create_buffer(v6d_client client, uint64_t size, uint64_t *id,
                             uint8_t **data, v6d_error *err) {
  return st(v6dgo_create_buffer(client, size, id, data, err));
}

v6d_status v6d_create_buffers(v6d_client client, size_t n,
                              const uint64_t *sizes, uint64_t *ids,
                              uint8_t **datas, v6d_error *err) {
  return st(v6dgo_create_buffers(client, n, (uint64_t *)sizes, ids, datas, err));
}

v6d_status v6d_seal(v6d_client client, uint64_t id, v6d_error *err) {
  return st(v6dgo_seal(client, id, err));
}

v6d_status v6d_abort(v6d_client client, uint64_t id, v6d_error *err) {
  return st(v6dgo_abort(client, id, err));
}

v6d_status v6d_shrink(v6d_client client, uint64_t id, uint64_t size,
                      v6d_error *err) {
  return st(v6dgo_shrink(client, id, size, err));
}

v6d_status v6d_get(v6d_client client, uint64_t id, const uint8_t **data,
                   uint64_t *size, v6d_error *err) {
  return st(v6dgo_get(client, id, (uint8_t **)data, size, err));
}

v6d_status v6d_get_buffers(v6d_client client, size_t n, const uint64_t *ids,
                           uint32_t flags, const uint8_t **datas,
                           uint64_t *sizes, v6d_error *err) {
  return st(v6dgo_get_buffers(client, n, (uint64_t *)ids, flags,
                              (uint8_t **)datas, sizes, err));
}

v6d_status v6d_release(v6d_client client, uint64_t id, v6d_error *err) {
  return st(v6dgo_release(client, id, err));
}

v6d_status v6d_release_queue(v6d_client client, uint64_t *words, size_t n_words,
                             v6d_error *err) {
  return st(v6dgo_release_queue(client, words, n_words, err));
}

v6d_status v6d_release_queue_flush(v6d_client client, v6d_error *err) {
  return st(v6dgo_release_queue_flush(client, err));
}

/* ---- private copy-on-write views --------------------------------------- */

v6d_status v6d_map_private(v6d_client client, uint64_t blob_id, uint8_t **data,
                           uint64_t *size, v6d_error *err) {
  return st(v6dgo_map_private(client, blob_id, data, size, err));
}

v6d_status v6d_pretouch(void *data, uint64_t size, v6d_error *err) {
  return st(v6dgo_pretouch(data, size, err));
}

v6d_status v6d_unmap_private(uint8_t *data, v6d_error *err) {
  return st(v6dgo_unmap_private(data, err));
}

int64_t v6d_private_views(void) { return v6dgo_private_views(); }

/* ---- metadata ---------------------------------------------------------- */

v6d_status v6d_create_metadata(v6d_client client, const char *json, size_t len,
                               const uint64_t *seal_ids, size_t n_seal,
                               uint64_t *id, char **meta_out,
                               size_t *meta_out_len, v6d_error *err) {
  return st(v6dgo_create_metadata(client, (char *)json, len,
                                  (uint64_t *)seal_ids, n_seal, id, meta_out,
                                  meta_out_len, err));
}

v6d_status v6d_put_inline(v6d_client client, const char *json, size_t len,
                          size_t n, const void *const *datas,
                          const uint64_t *sizes, uint64_t *blob_ids,
                          uint64_t *id, v6d_error *err) {
  return st(v6dgo_put_inline(client, (char *)json, len, n, (void **)datas,
                             (uint64_t *)sizes, blob_ids, id, err));
}

v6d_status v6d_get_metadata(v6d_client client, uint64_t id, char **json,
                            size_t *len, v6d_error *err) {
  return st(v6dgo_get_metadata(client, id, json, len, err));
}

v6d_status v6d_get_object(v6d_client client, uint64_t id, uint32_t flags,
                          char **json, size_t *len, v6d_error *err) {
  return st(v6dgo_get_object(client, id, flags, json, len, err));
}

v6d_status v6d_blob_pointer(v6d_client client, uint64_t id,
                            const uint8_t **data, uint64_t *size,
                            int32_t *writable, v6d_error *err) {
  return st(v6dgo_blob_pointer(client, id, (uint8_t **)data, size, writable,
                               err));
}

v6d_status v6d_get_object_into(v6d_client client, uint64_t id, uint32_t flags,
                               char *json, size_t cap, size_t *len,
                               size_t max_blobs, uint64_t *blob_ids,
                               const uint8_t **datas, uint64_t *sizes,
                               size_t *n_blobs, v6d_error *err) {
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
  return st(v6dgo_get_object_shaped(client, id, flags, json, cap, len,
                                    max_blobs, blob_ids, (uint8_t **)datas,
                                    sizes, n_blobs, shape, err));
}

v6d_status v6d_get_object_args(v6d_client client, v6d_get_args *args) {
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
  return st(v6dgo_list(client, (char *)pattern, regex, limit, json, len, err));
}

v6d_status v6d_delete(v6d_client client, size_t n, const uint64_t *ids,
                      uint32_t flags, v6d_error *err) {
  return st(v6dgo_delete(client, n, (uint64_t *)ids, flags, err));
}

v6d_status v6d_exists(v6d_client client, uint64_t id, int32_t *exists,
                      v6d_error *err) {
  return st(v6dgo_exists(client, id, exists, err));
}

v6d_status v6d_persist(v6d_client client, uint64_t id, v6d_error *err) {
  return st(v6dgo_persist(client, id, err));
}

v6d_status v6d_if_persist(v6d_client client, uint64_t id, int32_t *persisted,
                          v6d_error *err) {
  return st(v6dgo_if_persist(client, id, persisted, err));
}

v6d_status v6d_shallow_copy(v6d_client client, uint64_t id,
                            const char *extra_json, uint64_t *target,
                            v6d_error *err) {
  return st(v6dgo_shallow_copy(client, id, (char *)extra_json, target, err));
}

v6d_status v6d_label(v6d_client client, uint64_t id, const char *key,
                     const char *value, v6d_error *err) {
  return st(v6dgo_label(client, id, (char *)key, (char *)value, err));
}

/* ---- names ------------------------------------------------------------- */

v6d_status v6d_put_name(v6d_client client, uint64_t id, const char *name,
                        v6d_error *err) {
  return st(v6dgo_put_name(client, id, (char *)name, err));
}

v6d_status v6d_get_name(v6d_client client, const char *name, int32_t wait,
                        int64_t timeout_ms, uint64_t *id, v6d_error *err) {
  return st(v6dgo_get_name(client, (char *)name, wait, timeout_ms, id, err));
}

v6d_status v6d_drop_name(v6d_client client, const char *name, v6d_error *err) {
  return st(v6dgo_drop_name(client, (char *)name, err));
}

v6d_status v6d_list_names(v6d_client client, const char *pattern,
                          int32_t regex, uint64_t limit, char **json,
                          size_t *len, v6d_error *err) {
  return st(v6dgo_list_names(client, (char *)pattern, regex, limit, json, len,
                             err));
}

/* ---- housekeeping ------------------------------------------------------ */

v6d_status v6d_clear(v6d_client client, v6d_error *err) {
  return st(v6dgo_clear(client, err));
}

v6d_status v6d_memory_trim(v6d_client client, int32_t *trimmed,
                           v6d_error *err) {
  return st(v6dgo_memory_trim(client, trimmed, err));
}

/* ---- Arrow C data interface ------------------------------------------- */

v6d_status v6d_put_arrow_array(v6d_client client, struct ArrowArray *array,
                               const struct ArrowSchema *schema,
                               uint32_t flags, const char *extra_json,
                               uint64_t *id, v6d_error *err) {
  return st(v6dgo_put_arrow_array(client, array, (struct ArrowSchema *)schema,
                                  flags, (char *)extra_json, id, err));
}

v6d_status v6d_put_arrow_stream(v6d_client client,
                                struct ArrowArrayStream *stream,
                                uint32_t flags, const char *extra_json,
                                uint64_t *id, v6d_error *err) {
  return st(v6dgo_put_arrow_stream(client, stream, flags, (char *)extra_json,
                                   id, err));
}

v6d_status v6d_get_arrow_array(v6d_client client, uint64_t id,
                               struct ArrowArray *out,
                               struct ArrowSchema *out_schema, v6d_error *err) {
  return st(v6dgo_get_arrow_array(client, id, out, out_schema, err));
}

v6d_status v6d_get_arrow_stream(v6d_client client, uint64_t id,
                                struct ArrowArrayStream *out, v6d_error *err) {
  return st(v6dgo_get_arrow_stream(client, id, out, err));
}

v6d_status v6d_arrow_array_from_meta(v6d_client client, const char *json,
                                     size_t len, struct ArrowArray *out,
                                     struct ArrowSchema *out_schema,
                                     v6d_error *err) {
  return st(v6dgo_arrow_array_from_meta(client, (char *)json, len, out,
                                        out_schema, err));
}

v6d_status v6d_arrow_stream_from_meta(v6d_client client, const char *json,
                                      size_t len,
                                      struct ArrowArrayStream *out,
                                      v6d_error *err) {
  return st(v6dgo_arrow_stream_from_meta(client, (char *)json, len, out, err));
}

v6d_status v6d_is_shared_memory(v6d_client client, const void *address,
                                int32_t *out, v6d_error *err) {
  return st(v6dgo_is_shared_memory(client, (void *)address, out, err));
}

int64_t v6d_arrow_exports(void) { return v6dgo_arrow_exports(); }

/* ---- timeouts ---------------------------------------------------------- */

v6d_status v6d_set_timeout(v6d_client client, int64_t timeout_ms,
                           v6d_error *err) {
  return st(v6dgo_set_timeout(client, timeout_ms, err));
}

v6d_status v6d_get_timeout(v6d_client client, int64_t *timeout_ms,
                           v6d_error *err) {
  return st(v6dgo_get_timeout(client, timeout_ms, err));
}

v6d_status v6d_migrate(v6d_client client, uint64_t id, uint64_t *copy,
                       v6d_error *err) {
  return st(v6dgo_migrate(client, id, copy, err));
}
