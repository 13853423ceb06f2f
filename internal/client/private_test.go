package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// pattern returns n bytes that differ from page to page and within a page.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/4096)
	}
	return b
}

// checkNoViews fails if the test leaves private views behind.
func checkNoViews(t *testing.T) {
	t.Helper()
	base := PrivateViews()
	t.Cleanup(func() {
		if n := PrivateViews(); n != base {
			t.Errorf("%d private views leaked", n-base)
		}
	})
}

// smapsField returns a field (in kB) of the /proc/self/smaps entry of the
// mapping that contains p, e.g. "Anonymous" (pages copied on write).
func smapsField(t *testing.T, p uintptr, field string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = p >= lo && p < hi
			continue
		}
		if in && strings.HasPrefix(line, field+":") {
			var kb int
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, field+":"), "%d", &kb); err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no mapping with %s contains %#x", field, p)
	return 0
}

func TestPrivateViewIsCopyOnWrite(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	want := pattern(3*4096 + 100) // spans 4 or 5 pages, not page-aligned
	_, bid := put(t, a, want)
	ro, err := b.Get(bid)
	if err != nil {
		t.Fatal(err)
	}
	before := b.Stats().RoundTrips
	view, err := b.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().RoundTrips - before; n != 0 {
		t.Errorf("MapPrivate took %d round trips, want 0", n)
	}
	if len(view) != len(want) || !bytes.Equal(view, want) {
		t.Fatal("private view differs from the blob")
	}
	if addr(view) == addr(ro) {
		t.Fatal("private view is the shared read-only view")
	}
	if kb := smapsField(t, addr(view), "Anonymous"); kb != 0 {
		t.Fatalf("%d kB copied before any write; reads must share the store's pages", kb)
	}
	view[0] ^= 0xff
	view[len(view)-1] ^= 0xff
	if kb := smapsField(t, addr(view), "Anonymous"); kb != 8 {
		t.Errorf("%d kB copied after writing 2 pages, want 8", kb)
	}
	if !bytes.Equal(ro, want) {
		t.Fatal("a write through the private view reached the shared view")
	}
	other, err := a.Get(bid)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(other, want) {
		t.Fatal("a write through the private view reached another client")
	}
	second, err := b.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(second, want) {
		t.Fatal("a second private view sees the first one's writes")
	}
	if n := PrivateViews(); n != 2 {
		t.Fatalf("PrivateViews = %d, want 2", n)
	}
	for _, v := range [][]byte{view, second} {
		if err := UnmapPrivate(addr(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateViewPinsItsBlob(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	want := bytes.Repeat([]byte{7}, 64<<10)
	id, bid := put(t, a, want)
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bid); err != nil {
		t.Fatal(err)
	}
	view, err := b.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	// The view's own reference keeps the blob once the get's is released:
	// no round trip, and the memory is not freed.
	before := b.Stats().RoundTrips
	if err := b.Release(bid); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().RoundTrips - before; n != 0 {
		t.Errorf("release under a live view took %d round trips, want 0", n)
	}
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	used, _ := srv.Store().Usage()
	refillFreed(t, a)
	if !bytes.Equal(view, want) {
		t.Fatal("a deleted blob's memory was reused under a live private view")
	}
	used2, _ := srv.Store().Usage()
	if err := UnmapPrivate(addr(view)); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushReleases(); err != nil { // releases are deferred
		t.Fatal(err)
	}
	after, _ := srv.Store().Usage()
	if after >= used2 || used2-after != 64<<10 {
		t.Fatalf("unmapping the last view did not free the deleted blob: %d -> %d (before reuse %d)", used2, after, used)
	}
	if _, _, err := b.BlobPointer(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("blob still held after the last unmap: %v", err)
	}
}

func TestPrivateViewErrors(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	_, bid := put(t, c, []byte("sealed"))
	cases := []struct {
		name string
		id   ids.ObjectID
		want status.Code
	}{
		{"empty blob", ids.EmptyBlob, status.Invalid},
		{"not a blob", ids.ObjectID(42), status.Invalid},
		{"not held", ids.BlobBit | 12345, status.ObjectNotExists},
	}
	unsealed, _, err := c.CreateBuffer(10)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		id   ids.ObjectID
		want status.Code
	}{"unsealed", unsealed, status.ObjectNotSealed})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := c.MapPrivate(tc.id); code(err) != tc.want || v != nil {
				t.Fatalf("MapPrivate = %v, %v; want %v", v, err, tc.want)
			}
		})
	}
	view, err := c.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []uintptr{0, addr(view) + 1, 4096} {
		if err := UnmapPrivate(p); code(err) != status.Invalid {
			t.Fatalf("UnmapPrivate(%#x) = %v, want Invalid", p, err)
		}
	}
	if err := UnmapPrivate(addr(view)); err != nil {
		t.Fatal(err)
	}
	if err := UnmapPrivate(addr(view)); code(err) != status.Invalid {
		t.Fatalf("double unmap = %v, want Invalid", err)
	}
	// The view's reference is gone, the seal's remains.
	if err := c.Release(bid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MapPrivate(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("after release: %v", err)
	}
}

// openFds counts the process's open file descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestPrivateViewsLeakNoFds(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	base := openFds(t)
	c, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	_, bid := put(t, c, pattern(10000))
	connected := openFds(t)
	for i := 0; i < 200; i++ {
		v, err := c.MapPrivate(bid)
		if err != nil {
			t.Fatal(err)
		}
		v[i] = 1
		if err := UnmapPrivate(addr(v)); err != nil {
			t.Fatal(err)
		}
	}
	if n := openFds(t); n != connected {
		t.Fatalf("%d fds open after 200 views, %d before", n, connected)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The in-process daemon closes its end once it reads the disconnect.
	for deadline := time.Now().Add(5 * time.Second); openFds(t) != base; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d fds open after Close, %d before Connect", openFds(t), base)
		}
	}
}

func TestCloseWaitsForPrivateViews(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	base, _ := srv.Store().Usage()
	a := connect(t, srv)
	want := pattern(8192)
	id, bid := put(t, a, want)
	b, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bid); err != nil {
		t.Fatal(err)
	}
	v1, err := b.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := b.MapPrivate(bid)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.MapPrivate(bid); !errors.Is(err, ErrClosed) {
		t.Fatalf("MapPrivate after Close = %v", err)
	}
	if _, err := b.Get(bid); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	// The closed client's connection still holds the blob: deleting it and
	// dropping a's references frees nothing.
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.InstanceStatus(); st.IPCConnections != 2 {
		t.Fatalf("%d connections, want 2: Close must wait for the views", st.IPCConnections)
	}
	if used, _ := srv.Store().Usage(); used == base {
		t.Fatal("blob freed while private views of a closed client live")
	}
	v1[0]++
	if !bytes.Equal(v2, want) {
		t.Fatal("view changed")
	}
	if err := UnmapPrivate(addr(v1)); err != nil {
		t.Fatal(err)
	}
	if err := UnmapPrivate(addr(v2)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := a.InstanceStatus()
		used, _ := srv.Store().Usage()
		if st.IPCConnections == 1 && used == base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the last view: %d connections, usage %d (baseline %d)", st.IPCConnections, used, base)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestPrivateViewsConcurrent(t *testing.T) {
	checkNoViews(t)
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	want := pattern(5000)
	_, bid := put(t, c, want)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for i := 0; i < 50; i++ {
				v, err := c.MapPrivate(bid)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(v, want) {
					errs <- fmt.Errorf("goroutine %d sees another's writes", g)
					return
				}
				v[g] = byte(g)
				if err := UnmapPrivate(addr(v)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// Close racing with MapPrivate: either the map fails with ErrClosed, or
	// the view is live and Close waits for it.
	d, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(bid); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		v, err := d.MapPrivate(bid)
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Error(err)
		}
		got <- v
	}()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != nil {
		if !bytes.Equal(v, want) {
			t.Error("view of a closing client changed")
		}
		if err := UnmapPrivate(addr(v)); err != nil {
			t.Fatal(err)
		}
	}
}
