package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	mid := Small - (Small-100)/2
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, Small}, {Low, Small}, {(Low + High) / 2, mid}, {High, 100}, {10 * High, 100},
	} {
		if got := Percent(c.live); got != c.want {
			t.Errorf("Percent(%d) = %d, want %d", c.live, got, c.want)
		}
	}
	for live, prev := uint64(0), Small; live < 2*High; live += 1 << 20 {
		p := Percent(live)
		if p > prev || p < 100 {
			t.Fatalf("Percent(%d) = %d after %d: not falling within [100, %d]", live, p, prev, Small)
		}
		prev = p
	}
}

// collect runs collections until the tuner has run after one that began
// after the call, and returns the percent it set.
func collect(t *testing.T) int {
	t.Helper()
	want := cycles.Load() + 2 // the next may be for a collection begun before
	for deadline := time.Now().Add(30 * time.Second); cycles.Load() < want; {
		if time.Now().After(deadline) {
			t.Fatal("the tuner did not run after a collection")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	p := debug.SetGCPercent(-1) // reads the collector's setting
	debug.SetGCPercent(p)
	if int64(p) != last.Load() {
		t.Fatalf("the collector's percent is %d, the tuner's %d", p, last.Load())
	}
	return p
}

// TestStart: Start leaves the percent alone when GOGC is set; without it,
// a collection with a small live heap sets Small, one with a live heap over
// High sets 100, and one after that heap is gone Small again.
func TestStart(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	t.Setenv("GOGC", "100")
	if Start() {
		t.Fatal("Start tuned with GOGC set")
	}
	_ = os.Unsetenv("GOGC") // t.Setenv restores it
	low, high := Low, High
	Low, High = 4<<20, 32<<20
	t.Cleanup(func() { Low, High = low, high })
	if !Start() {
		t.Fatal("Start did not tune without GOGC")
	}
	if p := collect(t); p != Small {
		t.Fatalf("small heap: percent %d, want %d", p, Small)
	}
	big := make([]byte, 48<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if p := collect(t); p != 100 {
		t.Fatalf("live heap over High: percent %d, want 100", p)
	}
	runtime.KeepAlive(big) // dead from here
	if p := collect(t); p != Small {
		t.Fatalf("heap gone: percent %d, want %d", p, Small)
	}
}
