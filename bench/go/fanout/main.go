// Go twin of bench/fanout.c: n CPU-bound work units split over goroutines.
//
//	fanout_procs  n units over GOMAXPROCS goroutines
//	fanout_1000   the same n units over 1,000 goroutines
//
// A unit is 1,000 rounds of splitmix64's finaliser; goroutine i of N gets a
// contiguous share. The time runs from the first `go` to the end of
// WaitGroup.Wait. Checksum: the wrapping sum of every unit's result, equal in
// both modes (and to the C version's, printed on stderr).
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"bobbinbench/benchutil"
)

const (
	rounds = 1000
	many   = 1000
)

func unit(u uint64) uint64 {
	x := u * 0x9e3779b97f4a7c15
	for r := 0; r < rounds; r++ {
		x += 0x9e3779b97f4a7c15
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
		x = (x ^ (x >> 27)) * 0x94d049bb133111eb
		x ^= x >> 31
	}
	return x
}

func fanout(name string, n int64, nthreads int) uint64 {
	sums := make([]uint64, nthreads)
	lo := make([]uint64, nthreads+1)
	base, extra := uint64(n)/uint64(nthreads), uint64(n)%uint64(nthreads)
	for i := 0; i < nthreads; i++ {
		lo[i+1] = lo[i] + base
		if uint64(i) < extra {
			lo[i+1]++
		}
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(nthreads)
	for i := 0; i < nthreads; i++ {
		go func(i int) {
			var sum uint64
			for u := lo[i]; u < lo[i+1]; u++ {
				sum += unit(u)
			}
			sums[i] = sum
			wg.Done()
		}(i)
	}
	wg.Wait()
	el := time.Since(t0)
	var sum uint64
	for _, s := range sums {
		sum += s
	}
	benchutil.Report(name, n, el)
	fmt.Fprintf(os.Stderr, "%s threads=%d wall_ms=%.1f checksum=%016x\n", name, nthreads,
		float64(el.Nanoseconds())/1e6, sum)
	return sum
}

func main() {
	n := benchutil.Iters(500000)
	a := fanout("fanout_procs", n, runtime.GOMAXPROCS(0))
	b := fanout("fanout_1000", n, many)
	if a != b {
		fmt.Fprintf(os.Stderr, "fanout: checksums differ: %016x with GOMAXPROCS goroutines, %016x with %d\n", a, b, many)
		os.Exit(1)
	}
}
