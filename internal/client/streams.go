package client

import (
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Stream open modes, as upstream numbers them.
const (
	StreamRead  = 1
	StreamWrite = 2
)

// StreamOptions are a new stream's settings (docs/protocol.md, "Streams").
// Zero values are upstream's: one reader, the daemon's capacity.
type StreamOptions struct {
	// Readers is the number of readers that each see every chunk.
	Readers int
	// Capacity is how many chunks the stream buffers before its writer waits.
	Capacity int
}

// CreateStream makes the object id (its metadata created first, with one
// of upstream's stream typenames) a stream. Options other than the zero
// value need the daemon's stream extension (NotImplemented against
// upstream's daemon).
func (c *Client) CreateStream(id ids.ObjectID, opt StreamOptions) error {
	if (opt.Readers > 1 || opt.Capacity > 0) && !c.ext.streams {
		return status.Errorf(status.NotImplemented,
			"the daemon has no stream extension: a stream with %d readers and capacity %d needs ours", opt.Readers, opt.Capacity)
	}
	var reply protocol.AckReply
	return c.call(&protocol.CreateStreamRequest{ObjectID: id, Readers: opt.Readers, Capacity: opt.Capacity}, &reply)
}

// OpenStream opens a stream for reading (StreamRead) or writing
// (StreamWrite) on this connection: one writer, and as many readers as the
// stream has slots (StreamOpened beyond).
func (c *Client) OpenStream(id ids.ObjectID, mode int) error {
	var reply protocol.AckReply
	return c.call(&protocol.OpenStreamRequest{ObjectID: id, Mode: int64(mode)}, &reply)
}

// PushChunk appends the sealed object or blob chunk to the stream. When
// the stream is full it waits for its readers, at most timeout (negative:
// the daemon's default bound), then fails with NotEnoughMemory having
// pushed nothing. A timeout needs the daemon's stream extension.
func (c *Client) PushChunk(stream, chunk ids.ObjectID, timeout time.Duration) error {
	req := &protocol.PushNextStreamChunkRequest{ID: stream, Chunk: chunk}
	stretch := time.Duration(-1)
	if timeout >= 0 && c.ext.streams {
		if timeout > MaxTimeout {
			return status.Errorf(status.Invalid, "push timeout %v out of range: at most %v, or negative for the daemon's", timeout, MaxTimeout)
		}
		ms := timeout.Milliseconds()
		req.TimeoutMs = &ms
		stretch = timeout
	}
	var reply protocol.AckReply
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.callStretchedLocked(req, &reply, stretch)
}

// PullChunk returns the id of the stream's next chunk, waiting without
// limit until there is one (the client's timeout is lifted for the wait:
// a writer that goes away fails the stream, so the wait ends). The chunk
// pulled before is given back: the daemon deletes it once every reader
// has (views of it already got stay valid while held). At the end it
// fails with StreamDrained, or StreamFailed when the writer failed or went
// away or the stream was dropped.
func (c *Client) PullChunk(stream ids.ObjectID) (ids.ObjectID, error) {
	var reply protocol.PullNextStreamChunkReply
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callStretchedLocked(&protocol.PullNextStreamChunkRequest{ID: stream}, &reply, -1); err != nil {
		return 0, err
	}
	return reply.Chunk, nil
}

// NewBufferChunk returns a new writable blob of size bytes that becomes
// the stream's next chunk: it is sealed and pushed by the next
// NewBufferChunk or StopStream of this stream on this client (upstream's
// new_buffer_chunk). The slice is valid until then.
func (c *Client) NewBufferChunk(stream ids.ObjectID, size uint64) (ids.ObjectID, []byte, error) {
	if err := c.flushBufferChunk(stream); err != nil {
		return 0, nil, err
	}
	id, data, err := c.CreateBuffer(size)
	if err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	if c.bufferChunks == nil {
		c.bufferChunks = make(map[ids.ObjectID]ids.ObjectID, 1)
	}
	c.bufferChunks[stream] = id
	c.mu.Unlock()
	return id, data, nil
}

// flushBufferChunk seals and pushes the blob NewBufferChunk handed out
// last for stream, if any.
func (c *Client) flushBufferChunk(stream ids.ObjectID) error {
	c.mu.Lock()
	id, ok := c.bufferChunks[stream]
	delete(c.bufferChunks, stream)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if err := c.Seal(id); err != nil {
		return err
	}
	if err := c.PushChunk(stream, id, -1); err != nil {
		return err
	}
	// The stream holds it now: this client's own reference goes.
	return c.Release(id)
}

// StopStream ends the stream: its readers get StreamDrained after the
// last chunk, or StreamFailed with failed. A buffer chunk not yet pushed
// is pushed first (dropped when failed).
func (c *Client) StopStream(stream ids.ObjectID, failed bool) error {
	if failed {
		c.mu.Lock()
		id, ok := c.bufferChunks[stream]
		delete(c.bufferChunks, stream)
		c.mu.Unlock()
		if ok {
			_ = c.Abort(id)
		}
	} else if err := c.flushBufferChunk(stream); err != nil {
		return err
	}
	var reply protocol.AckReply
	return c.call(&protocol.StopStreamRequest{ID: stream, Failed: failed}, &reply)
}

// DropStream removes the stream: whoever waits on it gets StreamFailed and
// its chunks not yet consumed are deleted. Its metadata stays (upstream's
// Python drop_stream deletes it too, unless asked not to).
func (c *Client) DropStream(stream ids.ObjectID) error {
	c.mu.Lock()
	id, ok := c.bufferChunks[stream]
	delete(c.bufferChunks, stream)
	c.mu.Unlock()
	if ok {
		_ = c.Abort(id)
	}
	var reply protocol.AckReply
	return c.call(&protocol.DropStreamRequest{ID: stream}, &reply)
}
