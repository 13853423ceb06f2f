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

// readAheadLocked reads the next reply frame through the read-ahead buffer
// and returns its body, valid until the next read. c.mu must be held.
func (c *Client) readAheadLocked(limit int) ([]byte, error) {
	if c.ahead == nil {
		c.ahead = make([]byte, readAheadSize)
	}
	if err := c.fillAheadLocked(8); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(c.ahead[c.apos:])
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", protocol.ErrFrameTooLarge, n, limit)
	}
	if n <= readAheadSize-8 {
		if err := c.fillAheadLocked(8 + int(n)); err != nil {
			return nil, midFrame(err)
		}
		body := c.ahead[c.apos+8 : c.apos+8+int(n)]
		c.apos += 8 + int(n)
		return body, nil
	}
	// Larger: what is buffered, then the rest straight from the socket.
	body := c.rbuf
	if uint64(cap(body)) < n {
		body = make([]byte, n)
	}
	body = body[:n]
	k := copy(body, c.ahead[c.apos+8:c.aend])
	c.apos, c.aend = 0, 0
	if _, err := io.ReadFull(c.conn, body[k:]); err != nil {
		return nil, midFrame(err)
	}
	c.keepReadBufLocked(body)
	return body, nil
}

// fillAheadLocked reads until need (≤ readAheadSize) bytes are buffered.
func (c *Client) fillAheadLocked(need int) error {
	if c.aend-c.apos >= need {
		return nil
	}
	if c.apos > 0 {
		c.aend = copy(c.ahead, c.ahead[c.apos:c.aend])
		c.apos = 0
	}
	for c.aend < need {
		m, err := c.conn.Read(c.ahead[c.aend:])
		if err != nil {
			return err
		}
		c.aend += m
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
