// Go twin of bench/contention.c: N goroutines (2, 8, 64) increment one counter under
// one sync.Mutex, n increments in total split evenly. main holds the mutex while it
// starts them and the clock starts when it lets go. ns per lock/unlock.
// Checksum: the counter ends at n.
package main

import (
	"fmt"
	"sync"
	"time"

	"bobbinbench/benchutil"
)

func run(nthreads int, n int64) {
	name := fmt.Sprintf("contention_%d", nthreads)
	var mu sync.Mutex
	var counter, total int64
	var wg sync.WaitGroup
	mu.Lock()
	wg.Add(nthreads)
	for i := 0; i < nthreads; i++ {
		k := n / int64(nthreads)
		if int64(i) < n%int64(nthreads) {
			k++
		}
		total += k
		go func(k int64) {
			defer wg.Done()
			for j := int64(0); j < k; j++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
		}(k)
	}
	t0 := time.Now()
	mu.Unlock()
	wg.Wait()
	el := time.Since(t0)
	benchutil.Verify(name, total, n)
	benchutil.Verify(name, counter, n)
	benchutil.Report(name, n, el)
}

func main() {
	n := benchutil.Iters(1000000)
	run(2, n)
	run(8, n)
	run(64, n)
}
