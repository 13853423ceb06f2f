package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// streamConn is a raw connection registered as upstream's client (no
// extensions), speaking upstream's stream messages.
type streamConn struct{ *raw }

func streamDial(t *testing.T, s *Server) streamConn {
	r := dial(t, s)
	if m := r.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	return streamConn{r}
}

// call sends body and decodes the reply keeping ids exact.
func (sc streamConn) call(body string, args ...any) map[string]any {
	sc.send(fmt.Sprintf(body, args...))
	return sc.reply()
}

func (sc streamConn) reply() map[string]any {
	sc.t.Helper()
	body, err := protocol.ReadFrame(sc.c, nil, 1<<20)
	if err != nil {
		sc.t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		sc.t.Fatal(err)
	}
	return m
}

// ok fails the test unless m is a reply of type want.
func (sc streamConn) ok(m map[string]any, want string) map[string]any {
	sc.t.Helper()
	if m["type"] != want {
		sc.t.Fatalf("want %s, got %v", want, m)
	}
	return m
}

// code fails the test unless m is an error reply with code.
func (sc streamConn) code(m map[string]any, code status.Code) {
	sc.t.Helper()
	if c, _ := m["code"].(json.Number); c.String() != fmt.Sprint(int(code)) {
		sc.t.Fatalf("want error %v, got %v", code, m)
	}
}

func idOf(t *testing.T, v any) ids.ObjectID {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not an id: %v", v)
	}
	var id ids.ObjectID
	if _, err := fmt.Sscan(n.String(), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

// object creates a metadata object of typename and returns its id.
func (sc streamConn) object(typename string) ids.ObjectID {
	m := sc.ok(sc.call(`{"type":"create_data_request","content":{"typename":%q,"nbytes":0,"transient":true}}`, typename), "create_data_reply")
	return idOf(sc.t, m["id"])
}

// stream creates a stream object with extra create_stream fields.
func (sc streamConn) stream(extra string) ids.ObjectID {
	id := sc.object("vineyard::RecordBatchStream")
	sc.ok(sc.call(`{"type":"create_stream_request","object_id":%d%s}`, uint64(id), extra), "create_stream_reply")
	return id
}

func (sc streamConn) open(id ids.ObjectID, mode int) map[string]any {
	return sc.call(`{"type":"open_stream_request","object_id":%d,"mode":%d}`, uint64(id), mode)
}

func (sc streamConn) push(id, chunk ids.ObjectID) map[string]any {
	return sc.call(`{"type":"push_next_stream_chunk_request","id":%d,"chunk":%d}`, uint64(id), uint64(chunk))
}

func (sc streamConn) pull(id ids.ObjectID) map[string]any {
	return sc.call(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id))
}

func (sc streamConn) pulled(id ids.ObjectID) ids.ObjectID {
	sc.t.Helper()
	return idOf(sc.t, sc.ok(sc.pull(id), "pull_next_stream_chunk_reply")["chunk"])
}

func (sc streamConn) stop(id ids.ObjectID, failed bool) map[string]any {
	return sc.call(`{"type":"stop_stream_request","id":%d,"failed":%t}`, uint64(id), failed)
}

func TestStreamInOrderThenDrained(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream("")
	w.ok(w.open(id, 2), "open_stream_reply")
	r.ok(r.open(id, 1), "open_stream_reply")
	r.code(r.open(id, 1), status.StreamOpened)                // one reader
	streamDial(t, s).code(w.open(id, 2), status.StreamOpened) // one writer
	var chunks []ids.ObjectID
	for range 5 {
		c := w.object("vineyard::Scalar<int>")
		chunks = append(chunks, c)
		w.ok(w.push(id, c), "push_next_stream_chunk_reply")
	}
	for i, want := range chunks {
		if got := r.pulled(id); got != want {
			t.Fatalf("chunk %d: got %v, want %v", i, got, want)
		}
		if i > 0 && s.store.Exists(chunks[i-1]) {
			t.Fatalf("chunk %d still exists after the reader pulled the next", i-1)
		}
	}
	w.ok(w.stop(id, false), "stop_stream_reply")
	r.code(r.pull(id), status.StreamDrained)
	if s.store.Exists(chunks[4]) {
		t.Fatal("the last chunk still exists after the reader reached the end")
	}
	w.code(w.stop(id, false), status.InvalidStreamState)
	w.code(w.push(id, w.object("x")), status.InvalidStreamState)
	w.ok(w.call(`{"type":"drop_stream_request","id":%d}`, uint64(id)), "drop_stream_reply")
	r.code(r.pull(id), status.ObjectNotExists)
}

func TestStreamBadInput(t *testing.T) {
	s := start(t)
	c := streamDial(t, s)
	c.code(c.call(`{"type":"create_stream_request","object_id":12345}`), status.ObjectNotExists)
	c.code(c.call(`{"type":"create_stream_request","object_id":%d}`, uint64(ids.EmptyBlob)), status.ObjectIsBlob)
	c.code(c.call(`{"type":"create_stream_request","object_id":1,"readers":1000}`), status.Invalid)
	id := c.stream("")
	c.code(c.call(`{"type":"create_stream_request","object_id":%d}`, uint64(id)), status.ObjectExists)
	c.code(c.open(id, 3), status.Invalid)
	c.code(c.push(id, 777), status.ObjectNotExists)
	c.code(c.pull(424242), status.ObjectNotExists)
	c.code(c.call(`{"type":"push_next_stream_chunk_request","id":%d,"chunk":1,"timeout_ms":-1}`, uint64(id)), status.Invalid)
}

func TestStreamPullWaitsForPush(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream("")
	r.send(fmt.Sprintf(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id)))
	eventually(t, "the pull to wait", func() bool { return s.waitingCount() == 1 })
	c := w.object("chunk")
	w.ok(w.push(id, c), "push_next_stream_chunk_reply")
	if got := idOf(t, r.ok(r.reply(), "pull_next_stream_chunk_reply")["chunk"]); got != c {
		t.Fatalf("got %v, want %v", got, c)
	}
	// A waiting reader learns of the end.
	r.send(fmt.Sprintf(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id)))
	eventually(t, "the pull to wait", func() bool { return s.waitingCount() == 1 })
	w.ok(w.stop(id, true), "stop_stream_reply")
	r.code(r.reply(), status.StreamFailed)
}

func TestStreamWriterDeathFailsReaders(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream("")
	w.ok(w.open(id, 2), "open_stream_reply")
	c := w.object("chunk")
	w.ok(w.push(id, c), "push_next_stream_chunk_reply")
	if got := r.pulled(id); got != c {
		t.Fatalf("got %v, want %v", got, c)
	}
	r.send(fmt.Sprintf(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id)))
	eventually(t, "the pull to wait", func() bool { return s.waitingCount() == 1 })
	_ = w.c.Close()
	r.code(r.reply(), status.StreamFailed)
	r.code(r.pull(id), status.StreamFailed)
}

func TestStreamBackpressure(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream(`,"capacity":2`)
	a, b, c := w.object("a"), w.object("b"), w.object("c")
	w.ok(w.push(id, a), "push_next_stream_chunk_reply")
	w.ok(w.push(id, b), "push_next_stream_chunk_reply")
	w.code(w.call(`{"type":"push_next_stream_chunk_request","id":%d,"chunk":%d,"timeout_ms":0}`, uint64(id), uint64(c)), status.NotEnoughMemory)
	// The writer waits; pulling a (held) makes no room, pulling b gives a back.
	w.send(fmt.Sprintf(`{"type":"push_next_stream_chunk_request","id":%d,"chunk":%d}`, uint64(id), uint64(c)))
	eventually(t, "the push to wait", func() bool { return s.waitingCount() == 1 })
	if got := r.pulled(id); got != a {
		t.Fatalf("got %v, want %v", got, a)
	}
	if got := r.pulled(id); got != b {
		t.Fatalf("got %v, want %v", got, b)
	}
	w.ok(w.reply(), "push_next_stream_chunk_reply")
	if got := r.pulled(id); got != c {
		t.Fatalf("got %v, want %v", got, c)
	}
}

func TestStreamManyReadersEachSeeEveryChunk(t *testing.T) {
	s := start(t)
	w := streamDial(t, s)
	r1, r2 := streamDial(t, s), streamDial(t, s)
	id := w.stream(`,"readers":2,"capacity":8`)
	r1.ok(r1.open(id, 1), "open_stream_reply")
	var chunks []ids.ObjectID
	for range 4 {
		c := w.object("chunk")
		chunks = append(chunks, c)
		w.ok(w.push(id, c), "push_next_stream_chunk_reply")
	}
	w.ok(w.stop(id, false), "stop_stream_reply")
	for _, want := range chunks {
		if got := r1.pulled(id); got != want {
			t.Fatalf("reader 1: got %v, want %v", got, want)
		}
	}
	r1.code(r1.pull(id), status.StreamDrained)
	if !s.store.Exists(chunks[0]) {
		t.Fatal("a chunk the second reader has not read was deleted")
	}
	r2.ok(r2.open(id, 1), "open_stream_reply")
	streamDial(t, s).code(streamDial(t, s).open(id, 1), status.StreamOpened)
	for _, want := range chunks {
		if got := r2.pulled(id); got != want {
			t.Fatalf("reader 2: got %v, want %v", got, want)
		}
	}
	r2.code(r2.pull(id), status.StreamDrained)
	for _, c := range chunks {
		if s.store.Exists(c) {
			t.Fatalf("chunk %v outlived both readers", c)
		}
	}
}

func TestStreamReaderDeathReleasesItsSlot(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream("")
	a, b := w.object("a"), w.object("b")
	w.ok(w.push(id, a), "push_next_stream_chunk_reply")
	w.ok(w.push(id, b), "push_next_stream_chunk_reply")
	if got := r.pulled(id); got != a {
		t.Fatalf("got %v, want %v", got, a)
	}
	_ = r.c.Close()
	eventually(t, "the held chunk to go", func() bool { return !s.store.Exists(a) })
	r2 := streamDial(t, s)
	r2.ok(r2.open(id, 1), "open_stream_reply")
	if got := r2.pulled(id); got != b {
		t.Fatalf("got %v, want %v", got, b)
	}
}

func TestStreamDropFailsWaiters(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream("")
	r.send(fmt.Sprintf(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id)))
	eventually(t, "the pull to wait", func() bool { return s.waitingCount() == 1 })
	w.ok(w.call(`{"type":"drop_stream_request","id":%d}`, uint64(id)), "drop_stream_reply")
	r.code(r.reply(), status.StreamFailed)
	if s.streams.Len() != 0 {
		t.Fatalf("%d streams left", s.streams.Len())
	}
}

// TestStreamGetNextChunk writes through upstream's get_next_stream_chunk
// over TCP (no fds), the daemon sealing each blob as the next is asked for.
func TestStreamGetNextChunk(t *testing.T) {
	s := startRPC(t, "")
	w := streamConn{dialTCP(t, s)}
	w.ok(w.call(`{"type":"register_request"}`), "register_reply")
	r := streamConn{dialTCP(t, s)}
	r.ok(r.call(`{"type":"register_request"}`), "register_reply")
	id := w.stream("")
	w.ok(w.open(id, 2), "open_stream_reply")
	var blobs []ids.ObjectID
	for range 3 {
		m := w.ok(w.call(`{"type":"get_next_stream_chunk_request","id":%d,"size":16}`, uint64(id)), "get_next_stream_chunk_reply")
		buffer, _ := m["buffer"].(map[string]any)
		blobs = append(blobs, idOf(t, buffer["object_id"]))
	}
	if got := r.pulled(id); got != blobs[0] {
		t.Fatalf("got %v, want %v", got, blobs[0])
	}
	// The blob being written is not sealed yet: no chunk.
	w.code(w.push(id, blobs[2]), status.ObjectNotSealed)
	w.ok(w.stop(id, false), "stop_stream_reply")
	for _, want := range blobs[1:] {
		if got := r.pulled(id); got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	r.code(r.pull(id), status.StreamDrained)
}

// TestStreamWaitersThatGoAway: a reader waiting in a pull and a writer
// waiting in a push whose clients go away stop waiting (learnt from the
// poller, no polling), free the reader's slot and fail the writer's stream.
func TestStreamWaitersThatGoAway(t *testing.T) {
	s := start(t)
	w, r := streamDial(t, s), streamDial(t, s)
	id := w.stream(`,"capacity":1`)
	r.send(fmt.Sprintf(`{"type":"pull_next_stream_chunk_request","id":%d}`, uint64(id)))
	eventually(t, "the pull to wait", func() bool { return s.waitingCount() == 1 })
	_ = r.c.Close()
	eventually(t, "the pull to end", func() bool { return s.waitingCount() == 0 })
	r2 := streamDial(t, s)
	r2.ok(r2.open(id, 1), "open_stream_reply") // the slot is free again

	w.ok(w.push(id, w.object("a")), "push_next_stream_chunk_reply")
	w.send(fmt.Sprintf(`{"type":"push_next_stream_chunk_request","id":%d,"chunk":%d}`, uint64(id), uint64(w.object("b"))))
	eventually(t, "the push to wait", func() bool { return s.waitingCount() == 1 })
	_ = w.c.Close()
	eventually(t, "the push to end", func() bool { return s.waitingCount() == 0 })
	r2.pulled(id)
	r2.code(r2.pull(id), status.StreamFailed)
}

// TestStreamUpstreamWriterMemoryFreed: upstream's writer never releases the
// blobs get_next_stream_chunk gave it; once its reader consumed them, their
// memory must be free while the writer is still connected.
func TestStreamUpstreamWriterMemoryFreed(t *testing.T) {
	s := startRPC(t, "")
	w := streamConn{dialTCP(t, s)}
	w.ok(w.call(`{"type":"register_request"}`), "register_reply")
	r := streamConn{dialTCP(t, s)}
	r.ok(r.call(`{"type":"register_request"}`), "register_reply")
	id := w.stream("")
	base, _ := s.store.Usage()
	for range 4 {
		w.ok(w.call(`{"type":"get_next_stream_chunk_request","id":%d,"size":%d}`, uint64(id), 1<<20), "get_next_stream_chunk_reply")
	}
	w.ok(w.stop(id, false), "stop_stream_reply")
	for range 4 {
		r.pulled(id)
	}
	r.code(r.pull(id), status.StreamDrained)
	if used, _ := s.store.Usage(); used > base {
		t.Fatalf("%d bytes still used after every chunk was read, %d before", used, base)
	}
}
