package nice

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// policyOf returns the scheduling policy and nice value of thread tid (0:
// the calling thread).
func policyOf(t *testing.T, tid int) (uint32, int32) {
	t.Helper()
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("sched_getattr(%d): %v", tid, err)
	}
	return attr.Policy, attr.Nice
}

// TestBatchEveryThreadKeepingNice: after SetBatch(true) every thread of the process
// is SCHED_BATCH, a background thread keeps its nice 19, threads made later
// are SCHED_BATCH too, a second call has nothing left to change, and
// SetBatch(false) puts them all back.
func TestBatchEveryThreadKeepingNice(t *testing.T) {
	bgTid, stop := make(chan int), make(chan struct{})
	go func() {
		Background()
		bgTid <- unix.Gettid()
		<-stop
	}()
	defer close(stop)
	bg := <-bgTid
	if p, _ := policyOf(t, 0); p != unix.SCHED_NORMAL {
		t.Skipf("the test runs under policy %d, not SCHED_NORMAL", p) // started by chrt, say
	}

	changed, err := SetBatch(true)
	if err != nil || changed == 0 {
		t.Fatalf("SetBatch(true) = %d, %v; want some threads changed", changed, err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	before := map[int]bool{}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		before[tid] = true
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // ended
		}
		if attr.Policy != unix.SCHED_BATCH {
			t.Errorf("thread %d: policy %d, want SCHED_BATCH", tid, attr.Policy)
		}
	}
	if p, n := policyOf(t, bg); p != unix.SCHED_BATCH || n != 19 {
		t.Errorf("background thread: policy %d nice %d, want SCHED_BATCH and 19", p, n)
	}

	// Threads made now: each goroutine holds a thread of its own while it
	// waits, so the runtime must start new ones.
	type seen struct {
		tid    int
		policy uint32
	}
	var wg sync.WaitGroup
	hold := make(chan struct{})
	threads := make(chan seen, 16)
	for range 16 {
		wg.Go(func() {
			Background() // locks the goroutine to a thread the runtime ends after it
			var p uint32 = 1<<32 - 1
			if attr, err := unix.SchedGetAttr(0, 0); err == nil {
				p = attr.Policy
			}
			threads <- seen{unix.Gettid(), p}
			<-hold
		})
	}
	fresh := 0
	for range 16 {
		th := <-threads
		if !before[th.tid] {
			fresh++
		}
		if th.policy != unix.SCHED_BATCH {
			t.Errorf("thread %d (new: %v): policy %d, want SCHED_BATCH", th.tid, !before[th.tid], th.policy)
		}
	}
	close(hold)
	wg.Wait()
	if fresh == 0 {
		t.Errorf("no goroutine ran on a thread made after SetBatch: the test checked no new thread")
	}
	if changed, err := SetBatch(true); err != nil || changed != 0 {
		t.Errorf("second SetBatch(true) = %d, %v; want 0, nil", changed, err)
	}
	// And back: every thread under SCHED_NORMAL, the background one still
	// at nice 19.
	if changed, err := SetBatch(false); err != nil || changed == 0 {
		t.Fatalf("SetBatch(false) = %d, %v; want some threads changed", changed, err)
	}
	tasks, err = os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil && attr.Policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d after SetBatch(false): policy %d", tid, attr.Policy)
		}
	}
	if p, n := policyOf(t, bg); p != unix.SCHED_NORMAL || n != 19 {
		t.Errorf("background thread after SetBatch(false): policy %d nice %d, want SCHED_NORMAL and 19", p, n)
	}
}
