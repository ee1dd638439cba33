// How much of a grown encode buffer is resident (request_memory.buffer_growth_zeroes): 400 MiB
// written in 1 MiB pieces into a bytes.Buffer, which since Go 1.19 grows with an append that
// zeroes each new array, and into a buffer grown as Go 1.18 and older grew it, with make and
// copy, whose fresh pages the runtime does not zero. Each way runs in a fresh process (GOGC=off,
// so no array is freed); RSS is read from /proc/self/statm.
//
//	go run ./benchmarks/go/buffer-growth-rss
//
// docs/benchmarks.md records what it printed and on which machine.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

func rssMB() float64 {
	b, _ := os.ReadFile("/proc/self/statm")
	pages, _ := strconv.Atoi(strings.Fields(string(b))[1])
	return float64(pages*os.Getpagesize()) / 1e6
}

// madeBuffer grows as bytes.Buffer did before Go 1.19: a new array from make, the old content copied.
type madeBuffer struct{ buf []byte }

func (b *madeBuffer) Write(p []byte) {
	if len(b.buf)+len(p) > cap(b.buf) {
		grown := make([]byte, len(b.buf), 2*cap(b.buf)+len(p))
		copy(grown, b.buf)
		b.buf = grown
	}
	b.buf = append(b.buf, p...)
}

const pieces = 400

func run(way string) {
	piece := make([]byte, 1<<20)
	for i := range piece {
		piece[i] = byte(i)
	}
	before := rssMB()
	written, capacity := 0, 0
	if way == "append" {
		var b bytes.Buffer
		for i := 0; i < pieces; i++ {
			b.Write(piece)
		}
		written, capacity = b.Len(), b.Cap()
	} else {
		var b madeBuffer
		for i := 0; i < pieces; i++ {
			b.Write(piece)
		}
		written, capacity = len(b.buf), cap(b.buf)
	}
	fmt.Printf("%-6s written %4.0f MB, last array %4.0f MB, RSS +%5.0f MB\n",
		way, float64(written)/1e6, float64(capacity)/1e6, rssMB()-before)
}

func main() {
	if len(os.Args) > 1 {
		run(os.Args[1])
		return
	}
	for _, way := range []string{"append", "make"} {
		cmd := exec.Command(os.Args[0], way)
		cmd.Env = append(os.Environ(), "GOGC=off")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			panic(err)
		}
	}
}
