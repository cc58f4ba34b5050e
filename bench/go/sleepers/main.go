// Go twin of bench/sleepers.c: n goroutines (default 10,000) each time.Sleep(10ms),
// add their index into an atomic sum and end; main waits for all. Reports the wall
// time from the first `go` to the end of the wait, divided by n (ns per goroutine).
// Checksum: the sum is n(n-1)/2.
package main

import (
	"sync"
	"sync/atomic"
	"time"

	"bobbinbench/benchutil"
)

func main() {
	n := benchutil.Iters(10000)
	var sum int64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func(i int64) {
			defer wg.Done()
			time.Sleep(10 * time.Millisecond)
			atomic.AddInt64(&sum, i)
		}(i)
	}
	wg.Wait()
	el := time.Since(t0)
	benchutil.Verify("sleepers", atomic.LoadInt64(&sum), n*(n-1)/2)
	benchutil.Report("sleepers", n, el)
}
