package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// getResult is get's JSON output (--json).
type getResult struct {
	ID       string `json:"id"`
	Typename string `json:"typename"`
	File     string `json:"file"`
	Format   string `json:"format"`
	Bytes    int64  `json:"bytes"`
	// FetchedFrom is the instance the object's blobs were on, when not
	// this one; LocalCopy is then the copy made here.
	FetchedFrom *uint64 `json:"fetched_from,omitempty"`
	LocalCopy   string  `json:"local_copy,omitempty"`
}

// remoteBlobs reports whether a blob of t is on an instance other than
// here, and which.
func remoteBlobs(t node, here uint64) (uint64, bool) {
	for _, b := range t.blobs() {
		if b.id() == ids.EmptyBlob {
			continue
		}
		if inst := b.uint("instance_id"); inst != here {
			return inst, true
		}
	}
	return 0, false
}

// blobsOf gives the bytes of the blobs a GetObject pinned.
type blobsOf struct{ c *client.Client }

// bytes returns the read-only view of the blob member key of t (nil for
// the empty blob); it is valid while the client holds the object.
func (b blobsOf) bytes(t node, key string) ([]byte, error) {
	m, ok := t[key].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("object %s (%s) has no blob member %s", t.str("id"), t.typename(), key)
	}
	id := node(m).id()
	if id == ids.EmptyBlob {
		return nil, nil
	}
	data, _, err := b.c.BlobPointer(id)
	return data, err
}

func setupGet(fs *flag.FlagSet, e *env) func([]string) error {
	var out string
	fs.StringVar(&out, "o", "", "file to write (- for standard output)")
	fs.StringVar(&out, "output", "", "file to write (- for standard output)")
	format := fs.String("format", "auto", "npy, parquet, raw, or auto (from the file's extension: .npy, .parquet, anything else raw)")
	asJSON := fs.Bool("json", false, "print what was written as JSON")
	force := fs.Bool("force", false, "overwrite FILE when it exists")
	return func(args []string) error {
		if len(args) != 1 {
			return usagef("get takes one ID or NAME, got %d arguments", len(args))
		}
		if out == "" {
			return usagef("get needs -o FILE (- for standard output)")
		}
		kind := *format
		switch kind {
		case "auto":
			switch strings.ToLower(filepath.Ext(out)) {
			case ".npy":
				kind = "npy"
			case ".parquet", ".pq":
				kind = "parquet"
			default:
				kind = "raw"
			}
		case "npy", "parquet", "raw":
		default:
			return usagef("--format %s: use npy, parquet, raw or auto", kind)
		}
		if out != "-" && !*force {
			if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
				return usagef("%s exists (--force overwrites it)", out)
			}
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		id, err := resolve(c, args[0])
		if err != nil {
			return err
		}
		// An object persisted by another daemon of the cluster is
		// copied here first (migrate; the daemon keeps the copy), as
		// the Python client's get does.
		asked := id
		var from *uint64
		meta, err := c.GetMetadata(id)
		if err != nil {
			return err
		}
		t0, err := decodeTree(meta)
		if err != nil {
			return err
		}
		if inst, remote := remoteBlobs(t0, c.InstanceID()); remote {
			if id, err = c.Migrate(asked); err != nil {
				return fmt.Errorf("%s is on instance %d; copying it to this one failed: %w", asked, inst, err)
			}
			from = &inst
		}
		raw, err := c.GetObject(id)
		if err != nil {
			return err
		}
		defer c.Release(id) //nolint:errcheck // the connection closes next
		t, err := decodeTree(raw)
		if err != nil {
			return err
		}
		write := map[string]func(io.Writer, node, blobsOf) error{
			"raw": writeRaw, "npy": writeNpy, "parquet": writeParquet,
		}[kind]
		n, err := writeOut(out, func(w io.Writer) error { return write(w, t, blobsOf{c}) })
		if err != nil {
			return err
		}
		res := getResult{ID: asked.String(), Typename: t.typename(), File: out, Format: kind, Bytes: n, FetchedFrom: from}
		if from != nil {
			res.LocalCopy = id.String()
			if !*asJSON {
				fmt.Fprintf(e.stderr, "%s is on instance %d: copied to this instance as %s\n", asked, *from, id)
			}
		}
		switch {
		case *asJSON:
			return writeJSON(e.stdout, res)
		case out == "-":
			return nil
		default:
			fmt.Fprintf(e.stderr, "wrote %s: %s %s as %s, %s\n", out, res.ID, res.Typename, kind, humanBytes(uint64(n)))
			return nil
		}
	}
}

// writeOut runs write into path (a regular file through a temporary file
// renamed into place, so a failed get leaves no partial file; a device or
// pipe in place) or standard output ("-").
func writeOut(path string, write func(io.Writer) error) (int64, error) {
	if path == "-" {
		cw := &countingWriter{w: os.Stdout}
		err := write(cw)
		return cw.n, err
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() { // a device or a pipe: written in place
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		cw := &countingWriter{w: f}
		err = write(cw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return cw.n, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: tmp}
	err = write(cw)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return 0, err
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeRaw writes the bytes of a blob, or of the one blob of an object
// (a tensor's elements, in C order).
func writeRaw(w io.Writer, t node, b blobsOf) error {
	var data []byte
	if t.isBlob() {
		if t.id() != ids.EmptyBlob {
			v, _, err := b.c.BlobPointer(t.id())
			if err != nil {
				return err
			}
			data = v
		}
	} else {
		blobs := t.blobs()
		if len(blobs) != 1 {
			return unsupportedf("%s (%s) has %d blobs; raw writes the bytes of one (try .npy or .parquet, "+
				"or get each blob of 'vineyardctl inspect')", t.str("id"), t.typename(), len(blobs))
		}
		if id := blobs[0].id(); id != ids.EmptyBlob {
			v, _, err := b.c.BlobPointer(id)
			if err != nil {
				return err
			}
			data = v
		}
	}
	_, err := w.Write(data)
	return err
}

// tensorOf returns the dtype, shape, order_ and bytes of a numeric
// vineyard::Tensor tree.
func tensorOf(t node, b blobsOf) (dtype, []uint64, string, []byte, error) {
	tn := t.typename()
	if !strings.HasPrefix(tn, "vineyard::Tensor<") {
		return dtype{}, nil, "", nil, unsupportedf("%s is a %s, not a vineyard::Tensor", t.str("id"), tn)
	}
	dt, err := parseDtype(t.str("value_type_meta_"))
	if err != nil {
		return dtype{}, nil, "", nil, fmt.Errorf("%s (%s): %w", t.str("id"), tn, err)
	}
	var shape []uint64
	if err := json.Unmarshal([]byte(t.str("shape_")), &shape); err != nil {
		return dtype{}, nil, "", nil, fmt.Errorf("%s (%s): shape_ %q: %w", t.str("id"), tn, t.str("shape_"), err)
	}
	order := t.str("order_")
	if order == "" {
		order = `"C"`
	}
	if order != `"C"` && order != `"F"` && order != "C" && order != "F" {
		return dtype{}, nil, "", nil, unsupportedf("%s (%s): unknown order_ %q", t.str("id"), tn, order)
	}
	data, err := b.bytes(t, "buffer_")
	if err != nil {
		return dtype{}, nil, "", nil, err
	}
	n, ok := count(shape)
	if !ok || n*uint64(dt.itemsize) > uint64(len(data)) {
		return dtype{}, nil, "", nil, fmt.Errorf("%s (%s): shape %v of %s needs more than its blob's %d bytes",
			t.str("id"), tn, shape, dt.str, len(data))
	}
	return dt, shape, order, data[:n*uint64(dt.itemsize)], nil
}

// writeNpy writes a tensor as a .npy file. Upstream's layout (order_ the
// JSON text "F") holds C-order bytes of a Fortran array: written as a C
// array of the same values. Our earlier layout (a bare F) holds the
// Fortran-order bytes: written with fortran_order True.
func writeNpy(w io.Writer, t node, b blobsOf) error {
	dt, shape, order, data, err := tensorOf(t, b)
	if err != nil {
		return err
	}
	if err := writeNpyHeader(w, dt.str, order == "F" && len(shape) > 1, shape); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
