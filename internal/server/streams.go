package server

import (
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
	"github.com/v6d-io/v6d-go/internal/streams"
)

// The stream handlers: upstream's messages over the registry of
// internal/streams. A pull or a push that must wait sleeps on the stream's
// own channel through conn.waitFor (its client's hang-up watched by the
// poller), never polling; the chunks no reader needs any more are deleted
// here, as upstream deletes a chunk once its reader pulled the next.

func (c *conn) createStream(r *protocol.CreateStreamRequest) error {
	return c.s.streams.Create(r.ObjectID, streams.Options{Readers: r.Readers, Capacity: r.Capacity})
}

func (c *conn) openStream(r *protocol.OpenStreamRequest) error {
	st, err := c.s.streams.Get(r.ObjectID)
	if err != nil {
		return err
	}
	return c.s.streams.Open(c, st, r.Mode)
}

func (c *conn) pushStreamChunk(r *protocol.PushNextStreamChunkRequest) error {
	st, err := c.s.streams.Get(r.ID)
	if err != nil {
		return err
	}
	if err := c.s.store.CheckChunk(r.Chunk); err != nil {
		return err
	}
	timeout := c.s.cfg.StreamPushTimeout
	if r.TimeoutMs != nil { // in [0, protocol.MaxTimeoutMs]: checked at decode
		timeout = time.Duration(*r.TimeoutMs) * time.Millisecond
	}
	return c.push(st, r.Chunk, timeout)
}

// push appends chunk to st, waiting at most timeout for room.
func (c *conn) push(st *streams.Stream, chunk ids.ObjectID, timeout time.Duration) error {
	done, err := c.waitFor(timeout, func() (bool, <-chan struct{}, func(), error) {
		room, err := c.s.streams.Push(c, st, chunk)
		return room == nil && err == nil, room, nil, err
	})
	if err == nil && !done {
		err = status.Errorf(status.NotEnoughMemory,
			"stream %v is full: its slowest reader did not take a chunk within %v", st.ID(), timeout)
	}
	return err
}

func (c *conn) pullStreamChunk(r *protocol.PullNextStreamChunkRequest) (protocol.Reply, []int, error) {
	st, err := c.s.streams.Get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	var chunk ids.ObjectID
	_, err = c.waitFor(-1, func() (bool, <-chan struct{}, func(), error) {
		got, more, consumed, err := c.s.streams.Pull(c, st)
		c.consumeOf(st, consumed)
		chunk = got
		return more == nil && err == nil, more, nil, err
	})
	if err != nil {
		return nil, nil, err
	}
	return &protocol.PullNextStreamChunkReply{Chunk: chunk}, nil, nil
}

// getStreamChunk is upstream's get_next_stream_chunk: the blob handed out
// by the writer's previous call is sealed and pushed (waiting for room as
// a push does), then a new unsealed blob of the size asked for is created
// for the writer and returned. The last one is pushed by stop_stream; if
// the writer goes away first it is freed with its other unsealed blobs.
func (c *conn) getStreamChunk(r *protocol.GetNextStreamChunkRequest) (protocol.Reply, []int, error) {
	st, err := c.s.streams.Get(r.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := c.flushStreamBlob(st, false); err != nil {
		return nil, nil, err
	}
	e, err := c.sess.CreateBuffer(r.Size)
	if err != nil {
		return nil, nil, err
	}
	if c.writing == nil {
		c.writing = make(map[ids.ObjectID]ids.ObjectID, 1)
	}
	c.writing[st.ID()] = e.ID
	one := []protocol.Payload{payloadOf(e)}
	fds := c.arenaFds(one...)
	fd := -1
	if len(fds) > 0 {
		fd = fds[0]
	}
	return &protocol.GetNextStreamChunkReply{Buffer: one[0], Fd: fd}, fds, nil
}

// flushStreamBlob seals and pushes the blob get_next_stream_chunk handed
// out last for st, if any; with force it is appended whatever the stream
// holds (the stream stops).
func (c *conn) flushStreamBlob(st *streams.Stream, force bool) error {
	id, ok := c.writing[st.ID()]
	if !ok {
		return nil
	}
	delete(c.writing, st.ID())
	if err := c.sess.Seal(id); err != nil {
		return err
	}
	if force {
		return c.s.streams.Append(c, st, id)
	}
	return c.push(st, id, c.s.cfg.StreamPushTimeout)
}

func (c *conn) stopStream(r *protocol.StopStreamRequest) error {
	st, err := c.s.streams.Get(r.ID)
	if err != nil {
		return err
	}
	if err := c.flushStreamBlob(st, true); err != nil {
		return err
	}
	return c.s.streams.Stop(st, r.Failed)
}

func (c *conn) dropStream(r *protocol.DropStreamRequest) error {
	st, err := c.s.streams.Get(r.ID)
	if err != nil {
		return err
	}
	delete(c.writing, st.ID()) // unsealed: freed with the connection's others, or by a drop_buffer
	c.consume(c.s.streams.Drop(st))
	return nil
}

// leaveStreams runs as the connection closes: the streams it wrote fail,
// its reader slots are freed and what they held is given back.
func (c *conn) leaveStreams() {
	c.consume(c.s.streams.Leave(c))
}

// consume deletes the chunks no reader needs any more. An upstream client
// never releases, so its references to their blobs go with them (as a
// delete of its own releases them: delData).
func (c *conn) consume(chunks []ids.ObjectID) { c.consumeOf(nil, chunks) }

// consumeOf is consume of the chunks of st: the references of its writer,
// when it is upstream's client (which never releases what it put or was
// handed by get_next_stream_chunk), go too, or a long stream written by it
// would keep every chunk's memory until it disconnects. A session's
// references are guarded by the store's lock, so releasing them from this
// connection's goroutine is safe.
func (c *conn) consumeOf(st *streams.Stream, chunks []ids.ObjectID) {
	if len(chunks) == 0 {
		return
	}
	blobs := c.s.store.Delete(chunks, store.DeleteOptions{Deep: true})
	if len(blobs) == 0 {
		return
	}
	if c.upstream {
		_ = c.sess.Release(blobs...)
	}
	if st != nil {
		if w, ok := c.s.streams.Writer(st).(*conn); ok && w != c && w.upstream {
			_ = w.sess.Release(blobs...)
		}
	}
}
