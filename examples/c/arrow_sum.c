/*
 * arrow_sum.c - sum a column of an Arrow table stored in vineyardd, reading
 * the shared memory directly through the Arrow C stream interface: no Arrow
 * library, no copy.
 *
 *   arrow_sum SOCKET ID COLUMN
 *
 * gets table ID (a vineyard::Table, e.g. put from Python with
 * client.put(pyarrow_table)) as an ArrowArrayStream, and prints the sum of its
 * int64 (format "l") or float64 ("g") column COLUMN over every record batch,
 * skipping nulls: "sum <value> rows <n> nulls <n>". SOCKET may be "" to use
 * $VINEYARD_IPC_SOCKET; ID is "o%016x" or decimal.
 *
 * Build:  cc -std=c11 -Wall -Wextra -Iinclude examples/c/arrow_sum.c \
 *            -Lbuild -lv6d -Wl,-rpath,"$PWD/build" -o build/examples/arrow_sum
 *    or:  cc arrow_sum.c $(pkg-config --cflags --libs v6d)   (after make install)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <v6d.h>

/* Parses "o%016x" (the text form of an ObjectID) or a decimal number. */
static int parse_id(const char *s, uint64_t *id) {
  char *end = NULL;
  int base = 10;
  if (s[0] == 'o') {
    s++;
    base = 16;
  }
  if (*s == '\0') {
    return -1;
  }
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno != 0 || *end != '\0') {
    return -1;
  }
  *id = (uint64_t)v;
  return 0;
}

/* Reports a failed stream callback with the stream's own message. */
static int stream_fail(struct ArrowArrayStream *stream, const char *what, int rc) {
  const char *msg = stream->get_last_error(stream);
  fprintf(stderr, "arrow_sum: %s failed (%d): %s\n", what, rc, msg != NULL ? msg : "(no message)");
  return 1;
}

/* Is element i of an array valid? (No validity buffer: every element is.) */
static int is_valid(const struct ArrowArray *a, int64_t i) {
  const uint8_t *bits = (const uint8_t *)a->buffers[0];
  return bits == NULL || ((bits[i / 8] >> (i % 8)) & 1) != 0;
}

struct totals {
  int64_t isum;
  double dsum;
  int64_t rows, nulls;
};

/* Adds the rows of one batch. The column's element for row r lies at index
 * batch->offset + col->offset + r: a struct's (the batch's) offset applies to
 * its children. */
static void add_batch(const struct ArrowArray *batch, const struct ArrowArray *col, int is_double,
                      struct totals *t) {
  for (int64_t r = 0; r < batch->length; r++) {
    int64_t i = batch->offset + col->offset + r;
    if (col->null_count != 0 && !is_valid(col, i)) {
      t->nulls++;
      continue;
    }
    if (is_double) {
      t->dsum += ((const double *)col->buffers[1])[i];
    } else {
      t->isum += ((const int64_t *)col->buffers[1])[i];
    }
  }
  t->rows += batch->length;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: arrow_sum SOCKET ID COLUMN\n");
    return 2;
  }
  uint64_t id = 0;
  if (parse_id(argv[2], &id) != 0) {
    fprintf(stderr, "arrow_sum: bad object id %s\n", argv[2]);
    return 2;
  }
  const char *column = argv[3];

  v6d_error err = {0, NULL};
  v6d_client client = 0;
  struct ArrowArrayStream stream;
  struct ArrowSchema schema;
  memset(&stream, 0, sizeof stream); /* output structs must be zeroed */
  memset(&schema, 0, sizeof schema);
  int status = 1;
  v6d_status st = v6d_connect(argv[1], &client, &err);
  if (st == V6D_OK) {
    st = v6d_get_arrow_stream(client, id, &stream, &err); /* one round trip */
  }
  if (st != V6D_OK) {
    fprintf(stderr, "arrow_sum: %s: %s\n", v6d_status_name(st), err.message != NULL ? err.message : "");
    v6d_error_release(&err);
    goto out;
  }

  int rc = stream.get_schema(&stream, &schema);
  if (rc != 0) {
    status = stream_fail(&stream, "get_schema", rc);
    goto out;
  }
  int64_t index = -1;
  for (int64_t i = 0; i < schema.n_children; i++) {
    if (strcmp(schema.children[i]->name, column) == 0) {
      index = i;
    }
  }
  if (index < 0) {
    fprintf(stderr, "arrow_sum: no column %s\n", column);
    goto out;
  }
  const char *format = schema.children[index]->format;
  if (strcmp(format, "l") != 0 && strcmp(format, "g") != 0) {
    fprintf(stderr, "arrow_sum: column %s has format %s, want l (int64) or g (float64)\n", column, format);
    goto out;
  }
  int is_double = format[0] == 'g';

  struct totals t = {0, 0.0, 0, 0};
  for (;;) {
    struct ArrowArray batch;
    memset(&batch, 0, sizeof batch);
    rc = stream.get_next(&stream, &batch);
    if (rc != 0) {
      status = stream_fail(&stream, "get_next", rc);
      goto out;
    }
    if (batch.release == NULL) {
      break; /* the end of the stream */
    }
    add_batch(&batch, batch.children[index], is_double, &t);
    batch.release(&batch); /* the batch's references to the store go here */
  }
  if (is_double) {
    printf("sum %.17g rows %" PRId64 " nulls %" PRId64 "\n", t.dsum, t.rows, t.nulls);
  } else {
    printf("sum %" PRId64 " rows %" PRId64 " nulls %" PRId64 "\n", t.isum, t.rows, t.nulls);
  }
  status = 0;

out:
  if (schema.release != NULL) {
    schema.release(&schema);
  }
  if (stream.release != NULL) {
    stream.release(&stream);
  }
  if (client != 0) {
    v6d_disconnect(client, NULL);
  }
  return status;
}
