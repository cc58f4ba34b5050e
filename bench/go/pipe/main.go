// Go twin of bench/pipe.c: two goroutines ping-pong one byte over two os.Pipe pipes
// (os.File reads and writes park the goroutine on Go's netpoller). ns_per_op is one
// round trip. Checksum: the ponger returns each byte plus one; the pinger sums what
// comes back, which must equal the sum computed from the bytes sent.
package main

import (
	"fmt"
	"os"
	"time"

	"bobbinbench/benchutil"
)

func main() {
	n := benchutil.Iters(200000)
	pingR, pingW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pipe: %v\n", err)
		os.Exit(1)
	}
	pongR, pongW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pipe: %v\n", err)
		os.Exit(1)
	}
	done := make(chan struct{})
	go func() {
		b := make([]byte, 1)
		for k := int64(0); k < n; k++ {
			if _, err := pingR.Read(b); err != nil {
				fmt.Fprintf(os.Stderr, "ponger read: %v\n", err)
				os.Exit(1)
			}
			b[0]++
			if _, err := pongW.Write(b); err != nil {
				fmt.Fprintf(os.Stderr, "ponger write: %v\n", err)
				os.Exit(1)
			}
		}
		close(done)
	}()
	b := make([]byte, 1)
	var sum, want int64
	t0 := time.Now()
	for k := int64(0); k < n; k++ {
		b[0] = byte(k)
		if _, err := pingW.Write(b); err != nil {
			fmt.Fprintf(os.Stderr, "pinger write: %v\n", err)
			os.Exit(1)
		}
		if _, err := pongR.Read(b); err != nil {
			fmt.Fprintf(os.Stderr, "pinger read: %v\n", err)
			os.Exit(1)
		}
		sum += int64(b[0])
		want += int64(byte(k + 1))
	}
	el := time.Since(t0)
	<-done
	benchutil.Verify("pipe", sum, want)
	benchutil.Report("pipe", n, el)
}
