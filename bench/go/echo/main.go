// Go twin of bench/echo.c: a goroutine-per-connection TCP echo server (net package)
// and, in the same process, C client goroutines, for C = 100, 1,000 and 5,000 (or the
// counts given after n). Every client connects, all wait for a start signal, then
// each sends n/C requests of 64 bytes one after another, reading each echo back in
// full; the time from the start to the last client's end, divided by the requests,
// is ns_per_op. Checksum: every echoed byte equals the byte sent, and the sum of the
// echoes' first bytes equals the one computed from the requests.
//
// Usage: echo [n [C...]] (default n = 200,000).
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"bobbinbench/benchutil"
)

const reqSize = 64

func reqByte(conn, k int64, j int) byte {
	return byte(conn*131 + k*7 + int64(j)*3 + (k >> 8))
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "echo: %s: %v\n", what, err)
	os.Exit(1)
}

func serve(c net.Conn, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				fail("server write", werr)
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
}

func run(n, conns int64) {
	perConn := n / conns
	if perConn < 1 {
		perConn = 1
	}
	total := perConn * conns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen", err)
	}
	var servers sync.WaitGroup
	servers.Add(int(conns))
	go func() {
		for i := int64(0); i < conns; i++ {
			c, err := ln.Accept()
			if err != nil {
				fail("accept", err)
			}
			go serve(c, &servers)
		}
	}()
	var sum int64
	var connected, clients sync.WaitGroup
	start := make(chan struct{})
	connected.Add(int(conns))
	clients.Add(int(conns))
	addr := ln.Addr().String()
	for i := int64(0); i < conns; i++ {
		go func(id int64) {
			defer clients.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				fail("dial", err)
			}
			connected.Done()
			<-start
			out := make([]byte, reqSize)
			in := make([]byte, reqSize)
			var s int64
			for k := int64(0); k < perConn; k++ {
				for j := 0; j < reqSize; j++ {
					out[j] = reqByte(id, k, j)
				}
				if _, err := c.Write(out); err != nil {
					fail("client write", err)
				}
				if _, err := io.ReadFull(c, in); err != nil {
					fail("client read", err)
				}
				if !bytes.Equal(in, out) {
					fmt.Fprintf(os.Stderr, "echo: client %d: the echo differs\n", id)
					os.Exit(1)
				}
				s += int64(in[0])
			}
			c.Close()
			atomic.AddInt64(&sum, s)
		}(i)
	}
	connected.Wait()
	t0 := time.Now()
	close(start)
	clients.Wait()
	el := time.Since(t0)
	servers.Wait()
	ln.Close()
	var want int64
	for c := int64(0); c < conns; c++ {
		for k := int64(0); k < perConn; k++ {
			want += int64(reqByte(c, k, 0))
		}
	}
	name := fmt.Sprintf("echo_%d", conns)
	benchutil.Verify(name, atomic.LoadInt64(&sum), want)
	benchutil.Report(name, total, el)
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: echo [requests [connections...]]\n")
	os.Exit(2)
}

func main() {
	n := int64(200000)
	conns := []int64{100, 1000, 5000}
	if len(os.Args) > 1 {
		v, err := strconv.ParseInt(os.Args[1], 10, 64)
		if err != nil || v <= 0 {
			usage()
		}
		n = v
	}
	if len(os.Args) > 2 {
		conns = nil
		for _, a := range os.Args[2:] {
			v, err := strconv.ParseInt(a, 10, 64)
			if err != nil || v <= 0 {
				usage()
			}
			conns = append(conns, v)
		}
	}
	var most int64
	for _, c := range conns {
		if c > most {
			most = c
		}
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(2*most+16) {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		if rl.Cur < uint64(2*most+16) {
			fmt.Fprintf(os.Stderr, "echo: %d fds needed, RLIMIT_NOFILE hard limit is %d\n",
				2*most+16, rl.Max)
			os.Exit(1)
		}
	}
	for _, c := range conns {
		run(n, c)
	}
}
