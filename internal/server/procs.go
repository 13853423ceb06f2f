package server

import (
	"os"
	"runtime"
)

// spareProcs is how many Ps the daemon keeps above its CPUs (SpareProcs).
const spareProcs = 3

// SpareProcs raises GOMAXPROCS by spareProcs, unless the environment sets
// GOMAXPROCS, and returns the value in force. A busy connection waits for
// its next request in poll(2) on a thread of its own (read.go), holding its P
// in the system call. When no P is idle, Go's sysmon takes such a P back
// after 20 µs and keeps checking every 20 µs: 8% of the daemon's CPU with two
// clients putting in a loop on two CPUs (docs/performance.md, "December 5,
// evening"). With a P idle it leaves waiting connections alone and backs off
// to sleeping 10 ms. The collector sizes its mark workers by GOMAXPROCS:
// on two CPUs, three spare Ps give it one dedicated worker where it had a
// quarter of a P (eight Ps gave it two, and more of the daemon's CPU than
// sysmon had taken).
func SpareProcs() int {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + spareProcs)
	}
	return runtime.GOMAXPROCS(0)
}
