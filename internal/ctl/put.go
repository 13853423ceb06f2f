package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// putResult is put's output.
type putResult struct {
	ID       string `json:"id"`
	Typename string `json:"typename"`
	Nbytes   uint64 `json:"nbytes"`
	Name     string `json:"name,omitempty"`
}

func setupPut(fs *flag.FlagSet, e *env) func([]string) error {
	format := fs.String("format", "auto", "how to store FILE: npy (a vineyard::Tensor), raw (one blob), or auto (npy for a .npy file)")
	name := fs.String("name", "", "also give the object this name (implies --persist: only persisted objects have names)")
	persist := fs.Bool("persist", false, "persist the object (visible to every daemon of the cluster)")
	return func(args []string) error {
		if len(args) != 1 {
			return usagef("put takes one FILE, got %d arguments", len(args))
		}
		file := args[0]
		kind := *format
		switch kind {
		case "auto":
			kind = "raw"
			if strings.HasSuffix(strings.ToLower(file), ".npy") {
				kind = "npy"
			}
		case "raw", "npy":
		default:
			return usagef("--format %s: use npy, raw or auto", kind)
		}
		if kind == "raw" && (*persist || *name != "") {
			return usagef("a raw file is stored as one blob, and blobs are never persisted or named " +
				"(upstream's rule); name a .npy (--format npy) instead")
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return unsupportedf("%s is not a regular file", file)
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		var res putResult
		if kind == "npy" {
			res, err = putNpy(c, f, st.Size(), file)
		} else {
			res, err = putRaw(c, f, st.Size(), file)
		}
		if err != nil {
			return err
		}
		id, _ := ids.Parse(res.ID)
		if *persist || *name != "" {
			if err := c.Persist(id); err != nil {
				return fmt.Errorf("stored %s, but persisting it failed: %w", res.ID, err)
			}
		}
		if *name != "" {
			if err := c.PutName(id, *name); err != nil {
				return fmt.Errorf("stored %s, but naming it %q failed: %w", res.ID, *name, err)
			}
			res.Name = *name
		}
		if e.format == "json" {
			return writeJSON(e.stdout, res)
		}
		fmt.Fprintln(e.stdout, res.ID)
		return nil
	}
}

// putRaw stores the size bytes of r as one blob, read straight into the
// daemon's memory.
func putRaw(c *client.Client, r io.Reader, size int64, file string) (putResult, error) {
	if size == 0 {
		return putResult{}, unsupportedf("%s is empty: a blob holds at least one byte", file)
	}
	bid, buf, err := c.CreateBuffer(uint64(size))
	if err != nil {
		return putResult{}, err
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		_ = c.Abort(bid)
		return putResult{}, fmt.Errorf("reading %s: %w", file, err)
	}
	if err := c.Seal(bid); err != nil {
		return putResult{}, err
	}
	return putResult{ID: bid.String(), Typename: "vineyard::Blob", Nbytes: uint64(size)}, nil
}

// putNpy stores a .npy file as a vineyard::Tensor in upstream's layout (the
// one python/vineyard/data/tensor.py writes): one blob of the elements in C
// order; a Fortran-order array is rewritten into C order and marked order_
// "F", so that readers make it Fortran-ordered again.
func putNpy(c *client.Client, f io.Reader, size int64, file string) (putResult, error) {
	cr := &countingReader{r: f}
	h, err := readNpyHeader(cr)
	if err != nil {
		return putResult{}, fmt.Errorf("%s: %w", file, err)
	}
	dt, err := parseDtype(h.descr)
	if err != nil {
		return putResult{}, fmt.Errorf("%s: %w", file, err)
	}
	n, ok := count(h.shape)
	if !ok || n > uint64(size) {
		return putResult{}, unsupportedf("%s: shape %v does not fit in the file", file, h.shape)
	}
	need := n * uint64(dt.itemsize)
	if have := uint64(size - cr.n); have != need {
		return putResult{}, unsupportedf("%s: shape %v of %s needs %d bytes of data, the file has %d",
			file, h.shape, dt.str, need, have)
	}
	order := `"C"`
	if h.fortran && len(h.shape) > 1 {
		order = `"F"`
	}
	bid := ids.EmptyBlob
	var seal []ids.ObjectID
	if need > 0 {
		var buf []byte
		bid, buf, err = c.CreateBuffer(need)
		if err != nil {
			return putResult{}, err
		}
		if order == `"F"` {
			src := make([]byte, need)
			if _, err = io.ReadFull(f, src); err == nil {
				fortranToC(buf, src, h.shape, dt.itemsize)
			}
		} else {
			_, err = io.ReadFull(f, buf)
		}
		if err != nil {
			_ = c.Abort(bid)
			return putResult{}, fmt.Errorf("reading %s: %w", file, err)
		}
		seal = []ids.ObjectID{bid}
	}
	shape := make([]string, len(h.shape))
	for i, d := range h.shape {
		shape[i] = strconv.FormatUint(d, 10)
	}
	tree, err := json.Marshal(map[string]any{
		"typename":         dt.tensorTypename(),
		"shape_":           "[" + strings.Join(shape, ", ") + "]",
		"partition_index_": "[]",
		"order_":           order,
		"value_type_":      dt.name,
		"value_type_meta_": dt.str,
		"nbytes":           need,
		"buffer_":          map[string]any{"id": bid.String()},
	})
	if err != nil {
		return putResult{}, err
	}
	id, err := c.Create(tree, seal)
	if err != nil {
		if need > 0 {
			_ = c.Abort(bid)
		}
		return putResult{}, err
	}
	return putResult{ID: id.String(), Typename: dt.tensorTypename(), Nbytes: need}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
