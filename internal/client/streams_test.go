package client

import (
	"bytes"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// newStreamObject creates the metadata of a stream object and makes it a
// stream.
func newStreamObject(t *testing.T, c *Client, opt StreamOptions) ids.ObjectID {
	t.Helper()
	id, _, err := c.CreateMetadata([]byte(`{"typename":"vineyard::ByteStream","params_":"{}"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateStream(id, opt); err != nil {
		t.Fatal(err)
	}
	return id
}

func chunkBytes(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i) }

// writeChunks writes n buffer chunks, then stops the stream.
func writeChunks(t *testing.T, w *Client, stream ids.ObjectID, n int) {
	t.Helper()
	if err := w.OpenStream(stream, StreamWrite); err != nil {
		t.Error(err)
		return
	}
	for i := range n {
		_, buf, err := w.NewBufferChunk(stream, uint64(len(chunkBytes(i))))
		if err != nil {
			t.Error(err)
			return
		}
		copy(buf, chunkBytes(i))
	}
	if err := w.StopStream(stream, false); err != nil {
		t.Error(err)
	}
}

// readChunks pulls to the end and checks each chunk's bytes and order.
func readChunks(t *testing.T, r *Client, stream ids.ObjectID, n int) {
	t.Helper()
	if err := r.OpenStream(stream, StreamRead); err != nil {
		t.Error(err)
		return
	}
	for i := 0; ; i++ {
		chunk, err := r.PullChunk(stream)
		if code(err) == status.StreamDrained {
			if i != n {
				t.Errorf("drained after %d chunks, want %d", i, n)
			}
			return
		}
		if err != nil {
			t.Error(err)
			return
		}
		data, err := r.Get(chunk)
		if err != nil {
			t.Error(err)
			return
		}
		if !bytes.Equal(data, chunkBytes(i)) {
			t.Errorf("chunk %d: %d bytes, not the ones written", i, len(data))
		}
		if err := r.Release(chunk); err != nil {
			t.Error(err)
		}
	}
}

func TestStreamBufferChunks(t *testing.T) {
	srv := startServer(t, 64<<20)
	for _, tc := range []struct {
		name           string
		writer, reader func(t *testing.T) *Client
	}{
		{"ipc", func(t *testing.T) *Client { return connect(t, srv) }, func(t *testing.T) *Client { return connect(t, srv) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := tc.writer(t), tc.reader(t)
			stream := newStreamObject(t, w, StreamOptions{Capacity: 4})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); readChunks(t, r, stream, 50) }()
			writeChunks(t, w, stream, 50)
			wg.Wait()
		})
	}
}

// TestStreamRemoteClients writes and reads a stream over TCP, each way
// against a UNIX-socket client.
func TestStreamRemoteClients(t *testing.T) {
	srv := startRPCServer(t, 64<<20, "")
	for _, tc := range []struct {
		name             string
		wRemote, rRemote bool
	}{
		{"tcp-writer", true, false},
		{"tcp-reader", false, true},
		{"tcp-both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := func(remote bool) *Client {
				if remote {
					return connectRPCTest(t, srv)
				}
				return connect(t, srv)
			}
			w, r := dial(tc.wRemote), dial(tc.rRemote)
			stream := newStreamObject(t, w, StreamOptions{Capacity: 2})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); readChunks(t, r, stream, 20) }()
			writeChunks(t, w, stream, 20)
			wg.Wait()
		})
	}
}

func TestStreamManyReaders(t *testing.T) {
	srv := startServer(t, 64<<20)
	w := connect(t, srv)
	stream := newStreamObject(t, w, StreamOptions{Readers: 3, Capacity: 2})
	var wg sync.WaitGroup
	for range 3 {
		r := connect(t, srv)
		wg.Add(1)
		go func() { defer wg.Done(); readChunks(t, r, stream, 30) }()
	}
	writeChunks(t, w, stream, 30)
	wg.Wait()
}

func TestStreamFailureReachesReader(t *testing.T) {
	srv := startServer(t, 16<<20)
	w, r := connect(t, srv), connect(t, srv)
	stream := newStreamObject(t, w, StreamOptions{})
	id, _ := put(t, w, []byte("x"))
	if err := w.PushChunk(stream, id, -1); err != nil {
		t.Fatal(err)
	}
	if err := w.StopStream(stream, true); err != nil {
		t.Fatal(err)
	}
	got, err := r.PullChunk(stream)
	if err != nil || got != id {
		t.Fatalf("pull: %v %v", got, err)
	}
	if _, err := r.PullChunk(stream); code(err) != status.StreamFailed {
		t.Fatalf("want StreamFailed, got %v", err)
	}
	if err := w.DropStream(stream); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PullChunk(stream); code(err) != status.ObjectNotExists {
		t.Fatalf("after drop: %v", err)
	}
}
