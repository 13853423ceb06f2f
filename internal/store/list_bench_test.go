package store

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkListLimit lists with a limit from a store of V6D_LIST_OBJECTS
// objects (default 100,000; issue 32 measured 1M), and reports the longest
// Exists another goroutine waited for meanwhile (stall-ms): a list must cost
// what it returns and not stop the others.
func BenchmarkListLimit(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("V6D_LIST_OBJECTS")); err == nil && v > 0 {
		n = v
	}
	s, err := New(Config{Size: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ss := s.NewSession()
	b.Cleanup(ss.Close)
	var probe = json.RawMessage(`{"typename":"vineyard::Probe"}`)
	first, err := ss.CreateData(probe, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := ss.CreateData(json.RawMessage(fmt.Sprintf(`{"typename":"vineyard::Tensor<int64>","i":%d}`, i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		pattern string
		limit   uint64
	}{{"*", 10}, {"*", 1000}, {"vineyard::Tensor*", 1000}, {"nothing::*", 10}} {
		b.Run(fmt.Sprintf("%s/limit=%d", tc.pattern, tc.limit), func(b *testing.B) {
			var stop atomic.Bool
			var worst atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					t0 := time.Now()
					s.Exists(first.ID)
					if d := int64(time.Since(t0)); d > worst.Load() {
						worst.Store(d)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}()
			for b.Loop() {
				if _, err := s.List(tc.pattern, false, tc.limit); err != nil {
					b.Fatal(err)
				}
			}
			stop.Store(true)
			wg.Wait()
			b.ReportMetric(float64(worst.Load())/1e6, "stall-ms")
		})
	}
}
