// A Go program whose CPU profile carries sample labels: the work runs
// under runtime/pprof.Do with a "worker" label, two values.
package main

import (
	"context"
	"os"
	"runtime/pprof"
	"time"
)

var sink uint64

func spin(n int) uint64 {
	var s uint64
	for i := 0; i < n; i++ {
		s += uint64(i*i) ^ (s >> 3)
	}
	return s
}

func work(d time.Duration, n int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		sink += spin(n)
	}
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	ctx := context.Background()
	pprof.Do(ctx, pprof.Labels("worker", "small"), func(context.Context) { work(150*time.Millisecond, 1000) })
	pprof.Do(ctx, pprof.Labels("worker", "large"), func(context.Context) { work(300*time.Millisecond, 100000) })
	pprof.StopCPUProfile()
	f.Close()
}
