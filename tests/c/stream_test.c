/* stream_test.c - streams through the C ABI against the real daemon: a
 * writer of buffer chunks and of pushed blobs, a reader that checks order
 * and content, the end (V6D_STREAM_DRAINED), a failed stream
 * (V6D_STREAM_FAILED), one writer and one reader (V6D_STREAM_OPENED), drop.
 * The writer is a UNIX-socket client, or a TCP one when ENDPOINT is given.
 *
 * usage: stream_test SOCKET [ENDPOINT]   (prints "ok" and exits 0)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "v6d.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    v6d_status st_ = (call);                                                   \
    if (st_ != V6D_OK) {                                                       \
      fprintf(stderr, "stream_test: %s: %s: %s\n", #call,                     \
              v6d_status_name(st_), err.message ? err.message : "");          \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "stream_test: line %d: %s\n", __LINE__, #cond);          \
      return 1;                                                                \
    }                                                                          \
  } while (0)

enum { CHUNKS = 10 };

static const char TREE[] = "{\"typename\":\"vineyard::ByteStream\",\"params_\":\"{}\"}";

static int new_stream(v6d_client c, int32_t readers, int32_t capacity, uint64_t *id) {
  v6d_error err = {0};
  CHECK(v6d_create_metadata(c, TREE, 0, NULL, 0, id, NULL, NULL, &err));
  CHECK(v6d_create_stream(c, *id, readers, capacity, &err));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: stream_test SOCKET [ENDPOINT]\n");
    return 2;
  }
  v6d_error err = {0};
  v6d_client w = 0, r = 0, other = 0;
  if (argc == 3) {
    CHECK(v6d_connect_rpc(argv[2], NULL, &w, &err));
  } else {
    CHECK(v6d_connect(argv[1], &w, &err));
  }
  CHECK(v6d_connect(argv[1], &r, &err));
  CHECK(v6d_connect(argv[1], &other, &err));

  /* buffer chunks, read back in order */
  uint64_t s = 0;
  if (new_stream(w, 0, 4, &s)) return 1;
  CHECK(v6d_open_stream(w, s, V6D_STREAM_WRITE, &err));
  EXPECT(v6d_open_stream(other, s, V6D_STREAM_WRITE, &err) == V6D_STREAM_OPENED);
  v6d_error_release(&err);
  CHECK(v6d_open_stream(r, s, V6D_STREAM_READ, &err));
  EXPECT(v6d_open_stream(other, s, V6D_STREAM_READ, &err) == V6D_STREAM_OPENED);
  v6d_error_release(&err);
  EXPECT(v6d_open_stream(other, s, 7, &err) == V6D_INVALID);
  v6d_error_release(&err);
  for (int i = 0; i < CHUNKS; i++) {
    uint64_t bid = 0;
    uint8_t *data = NULL;
    CHECK(v6d_new_buffer_chunk(w, s, (uint64_t)(100 + i), &bid, &data, &err));
    memset(data, i, (size_t)(100 + i));
    if (i > 0) { /* this call pushed chunk i-1: the reader takes it */
      uint64_t chunk = 0;
      const uint8_t *got = NULL;
      uint64_t size = 0;
      CHECK(v6d_pull_chunk(r, s, &chunk, &err));
      CHECK(v6d_get(r, chunk, &got, &size, &err));
      EXPECT(size == (uint64_t)(99 + i) && got[0] == i - 1 && got[size - 1] == i - 1);
      CHECK(v6d_release(r, chunk, &err));
    }
  }
  CHECK(v6d_stop_stream(w, s, 0, &err));
  int read = 0;
  for (;;) {
    uint64_t chunk = 0;
    v6d_status st = v6d_pull_chunk(r, s, &chunk, &err);
    if (st == V6D_STREAM_DRAINED) break;
    CHECK(st);
    read++;
  }
  v6d_error_release(&err);
  EXPECT(read == 1); /* the last chunk, pushed by the stop */
  EXPECT(v6d_stop_stream(w, s, 0, &err) == V6D_INVALID_STREAM_STATE);
  v6d_error_release(&err);
  CHECK(v6d_drop_stream(w, s, &err));
  uint64_t chunk = 0;
  EXPECT(v6d_pull_chunk(r, s, &chunk, &err) == V6D_OBJECT_NOT_EXISTS);
  v6d_error_release(&err);

  /* pushed blobs; a full stream; failure reaches the reader */
  if (new_stream(w, 0, 1, &s)) return 1;
  uint64_t b1 = 0, b2 = 0;
  uint8_t *p = NULL;
  CHECK(v6d_create_buffer(w, 8, &b1, &p, &err));
  memcpy(p, "chunk-01", 8);
  CHECK(v6d_seal(w, b1, &err));
  CHECK(v6d_push_chunk(w, s, b1, -1, &err));
  CHECK(v6d_create_buffer(w, 8, &b2, &p, &err));
  EXPECT(v6d_push_chunk(w, s, b2, 0, &err) == V6D_OBJECT_NOT_SEALED);
  v6d_error_release(&err);
  CHECK(v6d_seal(w, b2, &err));
  EXPECT(v6d_push_chunk(w, s, b2, 0, &err) == V6D_NOT_ENOUGH_MEMORY);
  v6d_error_release(&err);
  CHECK(v6d_stop_stream(w, s, 1, &err));
  CHECK(v6d_pull_chunk(r, s, &chunk, &err)); /* pulls without opening, as upstream */
  EXPECT(chunk == b1);
  EXPECT(v6d_pull_chunk(r, s, &chunk, &err) == V6D_STREAM_FAILED);
  v6d_error_release(&err);
  EXPECT(v6d_create_stream(w, s, 0, 0, &err) == V6D_OBJECT_EXISTS);
  v6d_error_release(&err);
  EXPECT(v6d_pull_chunk(r, s, NULL, &err) == V6D_INVALID);
  v6d_error_release(&err);
  CHECK(v6d_release(w, b1, &err));
  CHECK(v6d_release(w, b2, &err));

  CHECK(v6d_disconnect(w, &err));
  CHECK(v6d_disconnect(r, &err));
  CHECK(v6d_disconnect(other, &err));
  EXPECT(v6d_open_handles() == 0);
  puts("ok");
  return 0;
}
