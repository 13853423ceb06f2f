/*
 * cabi.h - the Arrow C data interface structs, and the C half of package
 * arrowc: release wrappers that count live exports and never enter Go in a
 * forked child, the schema exporter's release, and the stream trampolines.
 */
#ifndef ARROWC_CABI_H_
#define ARROWC_CABI_H_

#include <stdint.h>
#include <stdlib.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char *format;
  const char *name;
  const char *metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema **children;
  struct ArrowSchema *dictionary;
  void (*release)(struct ArrowSchema *);
  void *private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void **buffers;
  struct ArrowArray **children;
  struct ArrowArray *dictionary;
  void (*release)(struct ArrowArray *);
  void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
  int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
  const char *(*get_last_error)(struct ArrowArrayStream *);
  void (*release)(struct ArrowArrayStream *);
  void *private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

/* Live exported structs (top-level arrays, schemas, streams). */
int64_t arrowc_live(void);

/* Wraps the release callbacks of an array arrow-go exported, recursively:
 * the top one counts as a live export. */
void arrowc_wrap_array(struct ArrowArray *a, int top);

/* The release callback of schemas this package exports (all C memory). */
void arrowc_release_schema(struct ArrowSchema *s);
void arrowc_count_schema(struct ArrowSchema *s);

/* Streams this package exports: private_data is a struct arrowc_stream. */
struct arrowc_stream {
  uintptr_t handle; /* cgo.Handle of the Go stream */
  char *error;      /* last error, malloc'ed */
};
void arrowc_init_stream(struct ArrowArrayStream *s, uintptr_t handle);
void arrowc_set_stream_error(struct ArrowArrayStream *s, const char *msg, size_t n);

/* Calls into foreign structs (function pointers cannot be called from Go). */
void arrowc_release_array(struct ArrowArray *a);
void arrowc_release_foreign_schema(struct ArrowSchema *s);
int arrowc_stream_get_schema(struct ArrowArrayStream *s, struct ArrowSchema *out);
int arrowc_stream_get_next(struct ArrowArrayStream *s, struct ArrowArray *out);
const char *arrowc_stream_last_error(struct ArrowArrayStream *s);
void arrowc_stream_release(struct ArrowArrayStream *s);

#endif /* ARROWC_CABI_H_ */
