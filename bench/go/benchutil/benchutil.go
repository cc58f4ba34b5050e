// Package benchutil holds what the Go twins of bench/*.c share: the iteration count
// from argv, the report line, and the checksum check. The lines printed match the C
// benchmarks' exactly ("<name> n=<n> ns_per_op=<float>"), so scripts/bench parses both
// alike; exit 1 on a wrong checksum, 2 on a usage error.
package benchutil

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Iters returns the iteration count from os.Args[1], or dflt when absent.
func Iters(dflt int64) int64 {
	if len(os.Args) < 2 {
		return dflt
	}
	n, err := strconv.ParseInt(os.Args[1], 10, 64)
	if len(os.Args) > 2 || err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "usage: %s [iterations > 0]\n", os.Args[0])
		os.Exit(2)
	}
	return n
}

// Report prints one result line.
func Report(name string, n int64, elapsed time.Duration) {
	fmt.Printf("%s n=%d ns_per_op=%.1f\n", name, n, float64(elapsed.Nanoseconds())/float64(n))
}

// Verify exits 1 when got != want.
func Verify(name string, got, want int64) {
	if got != want {
		fmt.Fprintf(os.Stderr, "%s: checksum %d, want %d\n", name, got, want)
		os.Exit(1)
	}
}
