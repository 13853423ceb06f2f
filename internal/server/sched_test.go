package server

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/store"
)

// policies returns the scheduling policies of the process's threads.
func policies(t *testing.T) map[uint32]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]int{}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil {
			out[attr.Policy]++
		}
	}
	return out
}

// putter sends pipelined puts of 1 KiB on c, as the Python client does,
// from leases of 64 puts.
type putter struct {
	t    *testing.T
	c    *conn
	l    store.Lease
	next ids.ObjectID
	off  uint64
	left int
}

func (p *putter) put(n int) {
	p.t.Helper()
	for range n {
		if p.left == 0 {
			l, err := p.c.sess.Lease(64<<10, 64<<10)
			if err != nil {
				p.t.Fatal(err)
			}
			p.l, p.next, p.off, p.left = l, l.FirstID, l.Offset, 64
		}
		id := p.next &^ ids.BlobBit
		frame := fmt.Appendf(nil, `{"type":"create_data_request","content":{"typename":"vineyard::Tensor<double>",`+
			`"shape_":"[128]","buffer_":{"inline":0}},"lease_blobs":[%d,%d,1024],"id":%d,"pipelined":true}`,
			uint64(p.next), p.off, uint64(id+1))
		if !p.c.handleFrame(frame) {
			p.t.Fatal("connection closed")
		}
		p.next += 2
		p.off += 1024
		p.left--
	}
}

// TestSchedAutoFollowsStreamingConnections: under SchedAuto the threads go
// under SCHED_BATCH once as many connections stream pipelined puts as the
// threshold says (one per CPU; 2 here), and back when one stops (parks, or
// makes a round trip after a window without puts); a connection that puts
// now and then never counts.
func TestSchedAutoFollowsStreamingConnections(t *testing.T) {
	if p, err := unix.SchedGetAttr(0, 0); err != nil || p.Policy != unix.SCHED_NORMAL {
		t.Skip("the test does not run under SCHED_NORMAL")
	}
	threshold := streamThreshold
	streamThreshold = func() int32 { return 2 }
	defer func() { streamThreshold = threshold }()
	s := startCfg(t, Config{Size: 64 << 20, SchedBatch: SchedAuto})
	mk := func() *putter {
		c := benchConn(t, s)
		c.passFds = true
		return &putter{t: t, c: c}
	}
	slow, a, b := mk(), mk(), mk()
	// stream puts bursts of 40 on p every 2 ms (and one put on slow every
	// other burst) until p streams.
	stream := func(p *putter) {
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; !p.c.streaming; i++ {
			if time.Now().After(deadline) {
				t.Fatal("a connection putting 40 every 2 ms never counted as streaming")
			}
			p.put(40)
			if i%2 == 0 {
				slow.put(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	stream(a)
	s.sched.mu.Lock()
	streaming := s.sched.streaming
	s.sched.mu.Unlock()
	if got := policies(t); got[unix.SCHED_BATCH] != 0 || streaming != 1 {
		t.Fatalf("one streaming connection: %d streaming, policies %v; want 1 and no SCHED_BATCH", streaming, got)
	}
	stream(b)
	if got := policies(t); got[unix.SCHED_NORMAL] != 0 || got[unix.SCHED_BATCH] == 0 {
		t.Fatalf("two streaming connections: policies %v; want every thread SCHED_BATCH", got)
	}
	if slow.c.streaming {
		t.Fatal("a connection putting one every 4 ms counted as streaming")
	}
	a.c.setStreaming(false) // what park does
	if got := policies(t); got[unix.SCHED_BATCH] != 0 {
		t.Fatalf("one streaming connection again: policies %v; want no SCHED_BATCH", got)
	}
	stream(a)
	if got := policies(t); got[unix.SCHED_BATCH] == 0 {
		t.Fatalf("two streaming connections again: policies %v", got)
	}
	// A round trip between puts keeps a stream; one after a window
	// without puts ends it.
	exists := []byte(`{"type":"exists_request","id":1}`)
	a.put(40)
	if !a.c.handleFrame(exists) {
		t.Fatal("connection closed")
	}
	if w := s.sched.window(); w <= a.c.pipeWindow+1 && !a.c.streaming {
		t.Fatal("a round trip right after 40 puts ended the stream")
	}
	time.Sleep(2*streamWindow + time.Millisecond)
	if !a.c.handleFrame(exists) {
		t.Fatal("connection closed")
	}
	if a.c.streaming {
		t.Fatal("a round trip two windows after the last put kept the stream")
	}
	if got := policies(t); got[unix.SCHED_BATCH] != 0 {
		t.Fatalf("one streaming connection after a round trip: policies %v; want no SCHED_BATCH", got)
	}
	stream(a)
	// Close puts the threads back (a test's process, or a daemon's last
	// moments, under the default policy).
	_ = s.Close()
	if got := policies(t); got[unix.SCHED_BATCH] != 0 {
		t.Fatalf("after Close: policies %v; want no SCHED_BATCH", got)
	}
}
