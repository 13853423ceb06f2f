package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/v6d-io/v6d-go/internal/status"
)

// Limits on what one request may carry (issue 14, "Input"). Anything over
// them is refused when the request is decoded, with a status.Invalid error
// naming the field and the limit, before the daemon acts on it.
const (
	// MaxItems bounds the entries of any list in a request (sizes, ids,
	// contents, labels, inline blobs).
	MaxItems = 65536
	// MaxNameBytes bounds an object name.
	MaxNameBytes = 1024
	// MaxTimeoutMs bounds a timeout in milliseconds (2^31-1, about 24 days).
	MaxTimeoutMs = math.MaxInt32
)

// validator is implemented by requests with limits beyond their JSON types.
type validator interface{ validate() error }

func tooMany(field string, n int) error {
	if n > MaxItems {
		return status.Errorf(status.Invalid, "%s has %d entries, at most %d are allowed", field, n, MaxItems)
	}
	return nil
}

// checkName bounds a name (or a name pattern) and refuses a NUL byte in it
// (C's strings end there, etcd's keys would carry it).
func checkName(field, name string) error {
	if len(name) > MaxNameBytes {
		return status.Errorf(status.Invalid, "%s is %d bytes long, at most %d are allowed", field, len(name), MaxNameBytes)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return status.Errorf(status.Invalid, "%s %q contains a NUL byte", field, name)
	}
	return nil
}

// checkTree refuses a metadata tree that is not valid UTF-8 (the decoder
// already checked it is JSON): stored, it would be echoed in every listing;
// and one with a NUL character in a key or a typename (checkTreeNUL).
func checkTree(field string, raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return status.Errorf(status.Invalid, "%s is not valid UTF-8", field)
	}
	return checkTreeNUL(field, raw)
}

// nulEscape is how JSON writes a NUL character (a raw NUL byte is not
// valid JSON in the first place).
var nulEscape = []byte(`\u0000`)

// checkTreeNUL refuses a tree whose keys or typenames (at any depth)
// contain a NUL character: C readers of the tree (v6d.h, upstream's
// client) would see them cut short, and two different keys would read
// alike. Values may hold one. A tree without the escape costs one search.
func checkTreeNUL(field string, raw json.RawMessage) error {
	if !bytes.Contains(raw, nulEscape) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct{ object, wantKey bool }
	var stack []frame
	key := "" // the key of the value being read, in an object
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return nil // the request decoder checked it is JSON
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				if top >= 0 && stack[top].object {
					stack[top].wantKey = true // this container is the value
				}
				stack = append(stack, frame{object: d == '{', wantKey: true})
			} else {
				stack = stack[:top]
			}
			key = ""
			continue
		}
		str, isString := tok.(string)
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if strings.IndexByte(str, 0) >= 0 {
				return status.Errorf(status.Invalid, "%s has a key with a NUL character: %q", field, str)
			}
			stack[top].wantKey = false
			key = str
			continue
		}
		if isString && key == "typename" && strings.IndexByte(str, 0) >= 0 {
			return status.Errorf(status.Invalid, "%s has a typename with a NUL character: %q", field, str)
		}
		if top >= 0 && stack[top].object {
			stack[top].wantKey = true
		}
		key = ""
	}
}

func (r *CreateBuffersRequest) validate() error {
	if err := checkLeaseBlobs(r.LeaseBlobs); err != nil {
		return err
	}
	return tooMany("sizes", len(r.Sizes))
}

func (r *GetBuffersRequest) validate() error { return tooMany("ids", len(r.IDs)) }

func (r *ReleaseRequest) validate() error { return tooMany("ids", len(r.IDs)) }

func (r *IncreaseReferenceCountRequest) validate() error { return tooMany("ids", len(r.IDs)) }

func (r *CreateDataRequest) validate() error {
	if err := tooMany("seal", len(r.Seal)); err != nil {
		return err
	}
	if err := tooMany("inline", len(r.Inline)); err != nil {
		return err
	}
	if err := checkLeaseBlobs(r.LeaseBlobs); err != nil {
		return err
	}
	switch {
	case r.Pipelined && r.ID == 0:
		return status.Errorf(status.Invalid, "a pipelined create_data needs an id")
	case r.ID != 0 && (len(r.Seal) > 0 || len(r.Inline) > 0 || r.LeaseSize > 0 || r.WithContent || len(r.LeaseBlobs) == 0):
		return status.Errorf(status.Invalid, "create_data with an id takes lease_blobs only (no seal, inline, lease_size or with_content)")
	}
	return checkTree("content", r.Content)
}

func (r *CreateDatasRequest) validate() error {
	if err := tooMany("contents", len(r.Contents)); err != nil {
		return err
	}
	if err := tooMany("seal", len(r.Seal)); err != nil {
		return err
	}
	for _, c := range r.Contents {
		if err := checkTree("contents", c); err != nil {
			return err
		}
	}
	return nil
}

func (r *GetDataRequest) validate() error { return tooMany("id", len(r.ID)) }

func (r *DelDataRequest) validate() error { return tooMany("id", len(r.ID)) }

func (r *LabelRequest) validate() error {
	if err := tooMany("keys", len(r.Keys)); err != nil {
		return err
	}
	for _, k := range r.Keys {
		if strings.IndexByte(k, 0) >= 0 {
			return status.Errorf(status.Invalid, "label key %q contains a NUL byte", k)
		}
	}
	return tooMany("values", len(r.Values))
}

func (r *ShallowCopyRequest) validate() error { return checkTree("extra", r.Extra) }

func (r *PutNameRequest) validate() error { return checkName("name", r.Name) }

func (r *DropNameRequest) validate() error { return checkName("name", r.Name) }

func (r *GetNameRequest) validate() error {
	if err := checkName("name", r.Name); err != nil {
		return err
	}
	if r.TimeoutMs != nil && (*r.TimeoutMs < 0 || *r.TimeoutMs > MaxTimeoutMs) {
		return status.Errorf(status.Invalid, "timeout_ms %d is out of range [0, %d]; leave it out to wait without limit",
			*r.TimeoutMs, MaxTimeoutMs)
	}
	return nil
}

func (r *ListDataRequest) validate() error { return checkName("pattern", r.Pattern) }

func (r *ListNameRequest) validate() error { return checkName("pattern", r.Pattern) }

// checkLeaseBlobs checks the shape of a lease_blobs list: (id, offset, size)
// triples, at most MaxItems of them.
func checkLeaseBlobs(v []uint64) error {
	if len(v)%3 != 0 {
		return status.Errorf(status.Invalid, "lease_blobs has %d numbers, not (id, offset, size) triples", len(v))
	}
	return tooMany("lease_blobs", len(v)/3)
}

func (r *EvictRequest) validate() error { return tooMany("ids", len(r.IDs)) }
func (r *LoadRequest) validate() error  { return tooMany("ids", len(r.IDs)) }
func (r *UnpinRequest) validate() error { return tooMany("ids", len(r.IDs)) }
