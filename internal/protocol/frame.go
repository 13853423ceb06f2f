// Package protocol is Vineyard's client protocol: frames of an 8-byte
// little-endian length followed by a JSON object with a "type", typed messages
// for every request and reply, status codes, and fd passing over UNIX sockets.
package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrame is the largest frame accepted unless configured otherwise.
// Upstream rejects frames over 256 MiB; metadata never needs that much.
const DefaultMaxFrame = 64 << 20

// MaxReplyFrame is the largest reply frame a client reads, and so the most
// a daemon may be configured to build (its default is 256 MiB): the tree of
// one object of 140,000 members is 80 MB. A client that met a larger one
// would have to drop the connection, the stream being out of step.
const MaxReplyFrame = 1 << 30

// headerSize is the size of the length prefix of every frame.
const headerSize = 8

// ErrFrameTooLarge is returned when a frame's length exceeds the limit; the
// stream cannot be resynchronised and the connection must be closed.
var ErrFrameTooLarge = errors.New("protocol: frame too large")

// ReadFrame reads one frame from r and returns its body. It reads exactly the
// frame's bytes, never ahead, so that fds sent after a frame stay attached to
// the following byte. buf is reused when large enough; the returned slice is
// valid until the next call with the same buf.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, limit)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// AppendFrame appends a frame holding body to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(body)))
	return append(dst, body...)
}

// BeginFrame appends a placeholder length prefix to dst; append the body and
// call EndFrame with the offset BeginFrame returned. It lets encoders write the
// JSON straight into the frame buffer.
func BeginFrame(dst []byte) ([]byte, int) {
	at := len(dst)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), at
}

// EndFrame fills in the length prefix written by BeginFrame at offset at.
func EndFrame(frame []byte, at int) {
	binary.LittleEndian.PutUint64(frame[at:], uint64(len(frame)-at-headerSize))
}
