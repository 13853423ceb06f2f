/*
 * cabi.h - the C half of package arrowc: release wrappers that count live
 * exports and never enter Go in a forked child, the schema exporter's
 * release, and the stream trampolines.
 */
#ifndef ARROWC_CABI_H_
#define ARROWC_CABI_H_

#include <stdint.h>
#include <stdlib.h>

/* The structs of the Arrow C data and stream interfaces, as the public
 * header defines them (under the standard guards). */
#include "../../include/v6d.h"

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
