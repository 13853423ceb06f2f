package store

import (
	"encoding/json"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// BenchmarkDeleteJunkPins deletes a small object while V6D_JUNK_PAGES
// (default 100; issue 32 used 1,000) other connections have pin pages
// whose hint claims every slot, each filled with junk: the delete must not
// pay for what other connections wrote.
func BenchmarkDeleteJunkPins(b *testing.B) {
	pages := 100
	if v, err := strconv.Atoi(os.Getenv("V6D_JUNK_PAGES")); err == nil && v > 0 {
		pages = v
	}
	s, err := New(Config{Size: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for range pages {
		ss := s.NewSession()
		b.Cleanup(ss.Close)
		fd, err := ss.AttachPins()
		if err != nil {
			b.Fatal(err)
		}
		m, err := shm.Map(fd, shm.PinPageSize, true)
		_ = unix.Close(fd)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close() })
		w := unsafe.Slice((*uint64)(unsafe.Pointer(&m.Bytes()[0])), shm.PinPageSize/8)
		for j := 1; j <= shm.PinSlots; j++ {
			atomic.StoreUint64(&w[j], uint64(j)|0x5a5a<<40)
		}
		atomic.StoreUint64(&w[0], shm.PinSlots)
	}
	ss := s.NewSession()
	b.Cleanup(ss.Close)
	for b.Loop() {
		p, err := ss.CreateBuffer(64)
		if err != nil {
			b.Fatal(err)
		}
		tree := json.RawMessage(`{"typename":"t","b":{"id":"` + p.ID.String() + `"}}`)
		c, err := ss.CreateData(tree, []ids.ObjectID{p.ID})
		if err != nil {
			b.Fatal(err)
		}
		if err := ss.Release(p.ID); err != nil {
			b.Fatal(err)
		}
		s.Delete([]ids.ObjectID{c.ID}, DeleteOptions{})
	}
}
