package protocol

import (
	"encoding/json"
	"errors"
	"math"
)

// ErrUnframed is returned (wrapped) by DecodeRequest when a request's
// trailing byte count cannot be read: the stream cannot be kept in step and
// the connection must be closed.
var ErrUnframed = errors.New("protocol: request with an unknown trailing byte count")

// Trailer is implemented by requests whose frame may be followed by bytes on
// the stream that belong to them (an inline create_data's blob bytes).
type Trailer interface {
	// TrailingBytes returns how many bytes follow the frame; ok is false
	// when the count does not fit in 63 bits or cannot be known (compressed
	// remote buffers).
	TrailingBytes() (n uint64, ok bool)
	// decodeTrailing decodes from body only the fields that give the count.
	decodeTrailing(body []byte) error
}

// TrailingBytes returns the sum of the inline blob sizes.
func (r *CreateDataRequest) TrailingBytes() (uint64, bool) {
	var total uint64
	for _, n := range r.Inline {
		if n > math.MaxInt64-total {
			return 0, false
		}
		total += n
	}
	return total, true
}

func (r *CreateDataRequest) decodeTrailing(body []byte) error {
	var only struct {
		Inline []uint64 `json:"inline"`
	}
	err := json.Unmarshal(body, &only)
	r.Inline = only.Inline
	return err
}
