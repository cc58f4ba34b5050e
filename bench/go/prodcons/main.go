// Go twin of bench/prodcons.c: 4 producers and 4 consumers over a bounded buffer.
//
//	prodcons       a 64-slot ring under sync.Mutex with two sync.Cond ("not empty",
//	               "not full"): the same code as the C program.
//	prodcons_chan  the idiomatic Go version: a channel buffered to 64, closed when
//	               every producer is done.
//
// Producer p puts p, p+4, p+8, ... below n. ns per item. Checksum: n items taken,
// summing to n(n-1)/2.
package main

import (
	"sync"
	"time"

	"bobbinbench/benchutil"
)

const (
	nprod = 4
	ncons = 4
	capN  = 64
)

func condVersion(n int64) {
	var mu sync.Mutex
	notEmpty, notFull, gateCv := sync.NewCond(&mu), sync.NewCond(&mu), sync.NewCond(&mu)
	var ring [capN]int64
	head, count, producersLeft, ready, open := 0, 0, nprod, 0, false
	var sums, counts [ncons]int64
	gate := func() {
		mu.Lock()
		ready++
		gateCv.Broadcast()
		for !open {
			gateCv.Wait()
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(nprod + ncons)
	for c := 0; c < ncons; c++ {
		go func(c int) {
			defer wg.Done()
			gate()
			var s, k int64
			for {
				mu.Lock()
				for count == 0 && producersLeft > 0 {
					notEmpty.Wait()
				}
				if count == 0 {
					mu.Unlock()
					break
				}
				item := ring[head]
				head = (head + 1) % capN
				count--
				notFull.Signal()
				mu.Unlock()
				s += item
				k++
			}
			sums[c], counts[c] = s, k
		}(c)
	}
	for p := 0; p < nprod; p++ {
		go func(p int64) {
			defer wg.Done()
			gate()
			for item := p; item < n; item += nprod {
				mu.Lock()
				for count == capN {
					notFull.Wait()
				}
				ring[(head+count)%capN] = item
				count++
				notEmpty.Signal()
				mu.Unlock()
			}
			mu.Lock()
			producersLeft--
			if producersLeft == 0 {
				notEmpty.Broadcast()
			}
			mu.Unlock()
		}(int64(p))
	}
	mu.Lock()
	for ready < nprod+ncons {
		gateCv.Wait()
	}
	t0 := time.Now()
	open = true
	gateCv.Broadcast()
	mu.Unlock()
	wg.Wait()
	el := time.Since(t0)
	var s, k int64
	for c := 0; c < ncons; c++ {
		s += sums[c]
		k += counts[c]
	}
	benchutil.Verify("prodcons count", k, n)
	benchutil.Verify("prodcons sum", s, n*(n-1)/2)
	benchutil.Report("prodcons", n, el)
}

func chanVersion(n int64) {
	ch := make(chan int64, capN)
	start := make(chan struct{})
	var sums, counts [ncons]int64
	var prodWg, consWg sync.WaitGroup
	prodWg.Add(nprod)
	consWg.Add(ncons)
	for c := 0; c < ncons; c++ {
		go func(c int) {
			defer consWg.Done()
			<-start
			var s, k int64
			for item := range ch {
				s += item
				k++
			}
			sums[c], counts[c] = s, k
		}(c)
	}
	for p := 0; p < nprod; p++ {
		go func(p int64) {
			defer prodWg.Done()
			<-start
			for item := p; item < n; item += nprod {
				ch <- item
			}
		}(int64(p))
	}
	t0 := time.Now()
	close(start)
	prodWg.Wait()
	close(ch)
	consWg.Wait()
	el := time.Since(t0)
	var s, k int64
	for c := 0; c < ncons; c++ {
		s += sums[c]
		k += counts[c]
	}
	benchutil.Verify("prodcons_chan count", k, n)
	benchutil.Verify("prodcons_chan sum", s, n*(n-1)/2)
	benchutil.Report("prodcons_chan", n, el)
}

func main() {
	n := benchutil.Iters(400000)
	condVersion(n)
	chanVersion(n)
}
