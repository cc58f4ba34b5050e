// Go twin of bench/yield.c: two goroutines ping-pong a shared atomic counter, A moving
// it from 2i to 2i+1 and B from 2i+1 to 2i+2, each calling runtime.Gosched() while it
// waits for its turn. Reports ns per round trip. Checksum: the counter ends at 2n, A's
// stored values sum to n^2, B's to n(n+1).
package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"bobbinbench/benchutil"
)

var (
	counter int64
	ready   int32
)

// gate starts both goroutines' loops together, keeping spawn latency out of the timing.
func gate() {
	atomic.AddInt32(&ready, 1)
	for atomic.LoadInt32(&ready) < 2 {
		runtime.Gosched()
	}
}

func waitFor(v int64) {
	for atomic.LoadInt64(&counter) != v {
		runtime.Gosched()
	}
}

func main() {
	n := benchutil.Iters(200000)
	var wg sync.WaitGroup
	var sa, sb int64
	var t0, t1 time.Time
	wg.Add(2)
	go func() { // A
		defer wg.Done()
		gate()
		t0 = time.Now()
		for i := int64(0); i < n; i++ {
			waitFor(2 * i)
			atomic.StoreInt64(&counter, 2*i+1)
			sa += 2*i + 1
		}
		waitFor(2 * n) // B's last move completes the last round trip
		t1 = time.Now()
	}()
	go func() { // B
		defer wg.Done()
		gate()
		for i := int64(0); i < n; i++ {
			waitFor(2*i + 1)
			atomic.StoreInt64(&counter, 2*i+2)
			sb += 2*i + 2
		}
	}()
	wg.Wait()
	benchutil.Verify("yield counter", atomic.LoadInt64(&counter), 2*n)
	benchutil.Verify("yield sum A", sa, n*n)
	benchutil.Verify("yield sum B", sb, n*(n+1))
	benchutil.Report("yield", n, t1.Sub(t0))
}
