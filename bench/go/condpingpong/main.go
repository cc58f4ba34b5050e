// Go twin of bench/condpingpong.c: two goroutines ping-pong a counter.
//
//	condpingpong       sync.Mutex + two sync.Cond, the same loop as the C program: A
//	                   waits until the counter is even, moves it from 2i to 2i+1 and
//	                   signals B's cond; B waits until it is odd, moves it to 2i+2
//	                   and signals A's.
//	condpingpong_chan  the idiomatic Go version: two unbuffered channels; A sends 2i+1
//	                   to B, B answers 2i+2.
//
// ns per round trip. Checksum: the counter ends at 2n, A's values sum to n^2 and B's
// to n(n+1).
package main

import (
	"sync"
	"time"

	"bobbinbench/benchutil"
)

func condPingPong(n int64) {
	var mu sync.Mutex
	condA, condB, gateCv := sync.NewCond(&mu), sync.NewCond(&mu), sync.NewCond(&mu)
	var counter, sa, sb int64
	ready := 0
	var t0, t1 time.Time
	gate := func() {
		mu.Lock()
		ready++
		if ready == 2 {
			gateCv.Broadcast()
		}
		for ready < 2 {
			gateCv.Wait()
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // A
		defer wg.Done()
		gate()
		t0 = time.Now()
		mu.Lock()
		for i := int64(0); i < n; i++ {
			for counter != 2*i {
				condA.Wait()
			}
			counter = 2*i + 1
			sa += counter
			condB.Signal()
		}
		for counter != 2*n { // B's last move completes the last round trip
			condA.Wait()
		}
		mu.Unlock()
		t1 = time.Now()
	}()
	go func() { // B
		defer wg.Done()
		gate()
		mu.Lock()
		for i := int64(0); i < n; i++ {
			for counter != 2*i+1 {
				condB.Wait()
			}
			counter = 2*i + 2
			sb += counter
			condA.Signal()
		}
		mu.Unlock()
	}()
	wg.Wait()
	benchutil.Verify("condpingpong counter", counter, 2*n)
	benchutil.Verify("condpingpong sum A", sa, n*n)
	benchutil.Verify("condpingpong sum B", sb, n*(n+1))
	benchutil.Report("condpingpong", n, t1.Sub(t0))
}

func chanPingPong(n int64) {
	ping, pong := make(chan int64), make(chan int64)
	var sa, sb, last int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // B
		defer wg.Done()
		for i := int64(0); i < n; i++ {
			v := <-ping
			if v != 2*i+1 {
				benchutil.Verify("condpingpong_chan order", v, 2*i+1)
			}
			sb += v + 1
			pong <- v + 1
		}
	}()
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		ping <- 2*i + 1
		sa += 2*i + 1
		last = <-pong
	}
	el := time.Since(t0)
	wg.Wait()
	benchutil.Verify("condpingpong_chan counter", last, 2*n)
	benchutil.Verify("condpingpong_chan sum A", sa, n*n)
	benchutil.Verify("condpingpong_chan sum B", sb, n*(n+1))
	benchutil.Report("condpingpong_chan", n, el)
}

func main() {
	n := benchutil.Iters(100000)
	condPingPong(n)
	chanPingPong(n)
}
