package streams

import (
	"errors"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

type objects struct{}

func (objects) IsObject(id ids.ObjectID) bool { return !id.IsBlob() && id != 0 }

type owner struct{ name string }

func newStream(t *testing.T, opt Options) (*Registry, *Stream) {
	t.Helper()
	r := New(objects{}, 0)
	if err := r.Create(1, opt); err != nil {
		t.Fatal(err)
	}
	st, err := r.Get(1)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

func wantCode(t *testing.T, err error, code status.Code) {
	t.Helper()
	if status.CodeOf(err) != code {
		t.Fatalf("want %v, got %v", code, err)
	}
}

// TestConcurrentReadersSeeEveryChunkInOrder runs one writer and three
// readers on goroutines, sleeping on the stream's channels as the server
// does; each reader must see every chunk once, in order, and every chunk
// must be consumed exactly once.
func TestConcurrentReadersSeeEveryChunkInOrder(t *testing.T) {
	const n, readers = 500, 3
	r, st := newStream(t, Options{Readers: readers, Capacity: 4})
	var mu sync.Mutex
	consumed := map[ids.ObjectID]int{}
	note := func(c []ids.ObjectID) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range c {
			consumed[id]++
		}
	}
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &owner{name: "reader"}
			if i%2 == 0 { // half open first, half pull without opening (upstream's readers may)
				if err := r.Open(o, st, ModeRead); err != nil {
					t.Error(err)
					return
				}
			}
			next := ids.ObjectID(100)
			for {
				chunk, wait, c, err := r.Pull(o, st)
				note(c)
				switch {
				case status.CodeOf(err) == status.StreamDrained:
					if next != 100+n {
						t.Errorf("drained after %d chunks", next-100)
					}
					note(r.Leave(o))
					return
				case err != nil:
					t.Error(err)
					return
				case wait != nil:
					<-wait
				case chunk != next:
					t.Errorf("got chunk %v, want %v", chunk, next)
					return
				default:
					next++
				}
			}
		}()
	}
	w := &owner{name: "writer"}
	if err := r.Open(w, st, ModeWrite); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for {
			room, err := r.Push(w, st, ids.ObjectID(100+i))
			if err != nil {
				t.Fatal(err)
			}
			if room == nil {
				break
			}
			<-room
		}
	}
	if err := r.Stop(st, false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range n {
		if c := consumed[ids.ObjectID(100+i)]; c != 1 {
			t.Fatalf("chunk %d consumed %d times", i, c)
		}
	}
}

func TestWriterLeavingFailsTheStream(t *testing.T) {
	r, st := newStream(t, Options{})
	w, rd := &owner{"w"}, &owner{"r"}
	if _, err := r.Push(w, st, 7); err != nil { // becomes the writer
		t.Fatal(err)
	}
	_, err := r.Push(&owner{"other"}, st, 8)
	wantCode(t, err, status.InvalidStreamState)
	chunk, _, _, err := r.Pull(rd, st)
	if err != nil || chunk != 7 {
		t.Fatalf("pull: %v %v", chunk, err)
	}
	_, wait, _, err := r.Pull(rd, st)
	if err != nil || wait == nil {
		t.Fatalf("pull should wait: %v", err)
	}
	if c := r.Leave(w); len(c) != 0 {
		t.Fatalf("the writer leaving consumed %v", c)
	}
	<-wait // woken by the failure
	_, _, _, err = r.Pull(rd, st)
	wantCode(t, err, status.StreamFailed)
	wantCode(t, r.Open(&owner{"w2"}, st, ModeWrite), status.InvalidStreamState)
}

func TestCreateRefuses(t *testing.T) {
	r := New(objects{}, 0)
	for _, tc := range []struct {
		id   ids.ObjectID
		opt  Options
		code status.Code
	}{
		{0, Options{}, status.ObjectNotExists},
		{ids.EmptyBlob, Options{}, status.ObjectIsBlob},
		{1, Options{Readers: MaxReaders + 1}, status.Invalid},
		{1, Options{Capacity: -1}, status.Invalid},
	} {
		wantCode(t, r.Create(tc.id, tc.opt), tc.code)
	}
	if err := r.Create(1, Options{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, r.Create(1, Options{}), status.ObjectExists)
	_, err := r.Get(2)
	if !errors.Is(err, &status.Error{Code: status.ObjectNotExists}) && status.CodeOf(err) != status.ObjectNotExists {
		t.Fatal(err)
	}
}
