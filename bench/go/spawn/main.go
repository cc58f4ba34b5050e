// Go twin of bench/spawn.c: `go f()` + sync.WaitGroup in the same two modes.
//
//	spawn_seq    start one goroutine, wait for it, repeat
//	spawn_batch  start 1,000 goroutines, wait for all, repeat
//	spawn_sized  the same (C's sets a 2 MiB stack size; goroutines have none)
//
// Each goroutine adds its argument (1..n) into an atomic sum; sum must be n(n+1)/2.
package main

import (
	"sync"
	"sync/atomic"
	"time"

	"bobbinbench/benchutil"
)

const batch = 1000

var sum int64

func body(arg int64, wg *sync.WaitGroup) {
	atomic.AddInt64(&sum, arg)
	wg.Done()
}

func spawnSeq(n int64) {
	var wg sync.WaitGroup
	atomic.StoreInt64(&sum, 0)
	t0 := time.Now()
	for i := int64(1); i <= n; i++ {
		wg.Add(1)
		go body(i, &wg)
		wg.Wait()
	}
	el := time.Since(t0)
	benchutil.Verify("spawn_seq", atomic.LoadInt64(&sum), n*(n+1)/2)
	benchutil.Report("spawn_seq", n, el)
}

func spawnBatch(name string, n int64) {
	var wg sync.WaitGroup
	atomic.StoreInt64(&sum, 0)
	t0 := time.Now()
	for base := int64(0); base < n; base += batch {
		k := n - base
		if k > batch {
			k = batch
		}
		wg.Add(int(k))
		for j := int64(0); j < k; j++ {
			go body(base+j+1, &wg)
		}
		wg.Wait()
	}
	el := time.Since(t0)
	benchutil.Verify(name, atomic.LoadInt64(&sum), n*(n+1)/2)
	benchutil.Report(name, n, el)
}

func main() {
	n := benchutil.Iters(20000)
	spawnSeq(n)
	spawnBatch("spawn_batch", n)
	spawnBatch("spawn_sized", n) // no stack size to set: spawn_batch again
}
