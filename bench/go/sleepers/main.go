// Go twin of bench/sleepers.c: n goroutines (default 10,000) each time.Sleep(10ms),
// add their index into an atomic sum and end; main waits for all. Reports the wall
// time from the first `go` to the end of the wait, divided by n (ns per goroutine).
// Checksum: the sum is n(n-1)/2. With a second argument ms (the mode sleepers_held),
// each sleeps ms milliseconds instead.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"bobbinbench/benchutil"
)

func main() {
	mode, ms := "sleepers", int64(10)
	if len(os.Args) == 3 { // sleepers n ms
		v, err := strconv.ParseInt(os.Args[2], 10, 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "usage: %s [n [ms > 0]]\n", os.Args[0])
			os.Exit(2)
		}
		mode, ms = "sleepers_held", v
		os.Args = os.Args[:2]
	}
	n := benchutil.Iters(10000)
	var sum int64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func(i int64) {
			defer wg.Done()
			time.Sleep(time.Duration(ms) * time.Millisecond)
			atomic.AddInt64(&sum, i)
		}(i)
	}
	wg.Wait()
	el := time.Since(t0)
	benchutil.Verify(mode, atomic.LoadInt64(&sum), n*(n-1)/2)
	benchutil.Report(mode, n, el)
}
