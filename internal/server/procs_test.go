package server

import (
	"runtime"
	"testing"
)

// TestSpareProcs: the daemon runs with spareProcs Ps above the default,
// and leaves a GOMAXPROCS the environment sets alone.
func TestSpareProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	t.Setenv("GOMAXPROCS", "")
	if got := SpareProcs(); got != before+spareProcs {
		t.Fatalf("GOMAXPROCS %d, want %d", got, before+spareProcs)
	}
	runtime.GOMAXPROCS(before)
	t.Setenv("GOMAXPROCS", "1")
	if got := SpareProcs(); got != before {
		t.Fatalf("with GOMAXPROCS set: %d, want it left at %d", got, before)
	}
}
