package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// readAheadSize is the client's read-ahead buffer: a reply frame up to this
// size (header included) is read with one recv, not two (its length, then
// its body); a put's reply is about 200 bytes.
const readAheadSize = 4 << 10

// noFdsFollow reports whether an exchange whose last reply is reply may be
// read ahead: no fd follows that reply or any acknowledgement before it.
// Reading ahead is allowed for these types only because a recv that reaches
// bytes carrying fds takes the fds with them, and one with no room for them
// (a plain read) closes them: the client would lose an arena it must map.
// The acknowledgements sent ahead of a request (releases, the flush of a
// lease's blobs) never carry fds.
func noFdsFollow(reply protocol.Reply) bool {
	switch reply.(type) {
	case *protocol.CreateDataReply, *protocol.AckReply:
		return true
	}
	return false
}

// readAhead reads the next reply frame through the read-ahead buffer
// and returns its body, valid until the next read. c.mu must be held.
func (w *wire) readAhead(limit int) ([]byte, error) {
	if w.ahead == nil {
		w.ahead = make([]byte, readAheadSize)
	}
	if err := w.fillAhead(8); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(w.ahead[w.apos:])
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", protocol.ErrFrameTooLarge, n, limit)
	}
	if n <= readAheadSize-8 {
		if err := w.fillAhead(8 + int(n)); err != nil {
			return nil, midFrame(err)
		}
		body := w.ahead[w.apos+8 : w.apos+8+int(n)]
		w.apos += 8 + int(n)
		return body, nil
	}
	// Larger: what is buffered, then the rest straight from the socket.
	body := w.rbuf
	if uint64(cap(body)) < n {
		body = make([]byte, n)
	}
	body = body[:n]
	k := copy(body, w.ahead[w.apos+8:w.aend])
	w.apos, w.aend = 0, 0
	if _, err := io.ReadFull(w.conn, body[k:]); err != nil {
		return nil, midFrame(err)
	}
	w.keepReadBuf(body)
	return body, nil
}

// fillAhead reads until need (≤ readAheadSize) bytes are buffered.
func (w *wire) fillAhead(need int) error {
	if w.aend-w.apos >= need {
		return nil
	}
	if w.apos > 0 {
		w.aend = copy(w.ahead, w.ahead[w.apos:w.aend])
		w.apos = 0
	}
	for w.aend < need {
		m, err := w.conn.Read(w.ahead[w.aend:])
		if err != nil {
			return err
		}
		w.aend += m
	}
	return nil
}

// midFrame turns the end of the stream inside a frame into
// io.ErrUnexpectedEOF.
func midFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
