// goprog - a small Go program that writes a CPU and a heap profile
// (runtime/pprof) for `go tool pprof -callgrind` fixtures.
// SPDX-License-Identifier: MIT OR Apache-2.0
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
)

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func makeWords(n int) []string {
	words := make([]string, 0, n)
	x := uint32(1)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		words = append(words, strings.Repeat(string(rune('a'+x%7)), 1+int(x%5)))
	}
	return words
}

func sortWords(words []string) {
	sort.Strings(words)
}

func work() int {
	total := 0
	for round := 0; round < 60; round++ {
		total += fib(30)
		w := makeWords(2000)
		sortWords(w)
		total += len(w[0])
	}
	return total
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goprog CPU.pprof HEAP.pprof")
		os.Exit(2)
	}
	runtime.MemProfileRate = 4096
	cpu, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		panic(err)
	}
	fmt.Println("total =", work())
	pprof.StopCPUProfile()
	cpu.Close()

	heap, err := os.Create(os.Args[2])
	if err != nil {
		panic(err)
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(heap, 0); err != nil {
		panic(err)
	}
	heap.Close()
}
