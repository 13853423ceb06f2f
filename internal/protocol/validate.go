package protocol

import (
	"encoding/json"
	"math"
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

// checkName bounds a name (or a name pattern).
func checkName(field, name string) error {
	if len(name) > MaxNameBytes {
		return status.Errorf(status.Invalid, "%s is %d bytes long, at most %d are allowed", field, len(name), MaxNameBytes)
	}
	return nil
}

// checkTree refuses a metadata tree that is not valid UTF-8 (the decoder
// already checked it is JSON): stored, it would be echoed in every listing.
func checkTree(field string, raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return status.Errorf(status.Invalid, "%s is not valid UTF-8", field)
	}
	return nil
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
