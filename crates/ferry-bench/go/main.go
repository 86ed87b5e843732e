// Command threads is the Go side of `ferry-bench threads`: one timed run of
// one case, printed as `name ns_per_op` lines on stdout.
//
// Usage: go run . -case CASE -n N (GOMAXPROCS is set by the caller).
//
// Cases, mirroring crates/ferry-bench/src/threads.rs:
//
//	proc-call        N calls of a //go:noinline empty function
//	fork             N goroutines forked in batches of -batch; each batch is
//	                 forked (`go f()`, timed as "create"), then waited for
//	                 with one sync.WaitGroup (timed as "destroy"); "fork" is
//	                 both. Prints three lines.
//	fork-join        N times: fork a null goroutine and wait for it
//	                 (sync.WaitGroup Add/Done/Wait)
//	yield            two goroutines each call runtime.Gosched N times; per yield
//	acquire-release  N uncontended sync.Mutex Lock/Unlock pairs
//	pingpong         two goroutines alternate N cycles on a sync.Cond; per cycle
//
// Only the standard library is used, so `go run` works offline.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

//go:noinline
func null() {}

//go:noinline
func nullThread(wg *sync.WaitGroup) { wg.Done() }

func perOp(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

func procCall(n int) float64 {
	start := time.Now()
	for i := 0; i < n; i++ {
		null()
	}
	return perOp(time.Since(start), n)
}

func fork(n, batch int) (create, destroy, total float64) {
	var wg sync.WaitGroup
	var c, d time.Duration
	done := 0
	for done < n {
		b := batch
		if n-done < b {
			b = n - done
		}
		t0 := time.Now()
		wg.Add(b)
		for i := 0; i < b; i++ {
			go nullThread(&wg)
		}
		t1 := time.Now()
		wg.Wait()
		t2 := time.Now()
		c += t1.Sub(t0)
		d += t2.Sub(t1)
		done += b
	}
	return perOp(c, n), perOp(d, n), perOp(c+d, n)
}

func forkJoin(n int) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go nullThread(&wg)
		wg.Wait()
	}
	return perOp(time.Since(start), n)
}

func yield(n int) float64 {
	var ready, done sync.WaitGroup
	ready.Add(2)
	done.Add(2)
	gate := make(chan struct{})
	for k := 0; k < 2; k++ {
		go func() {
			ready.Done()
			<-gate
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
			done.Done()
		}()
	}
	ready.Wait()
	start := time.Now()
	close(gate)
	done.Wait()
	return perOp(time.Since(start), 2*n)
}

func acquireRelease(n int) float64 {
	var mu sync.Mutex
	x := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		mu.Lock()
		x++
		mu.Unlock()
	}
	d := time.Since(start)
	if x != n {
		panic("lost increments")
	}
	return perOp(d, n)
}

func pingpong(n int) float64 {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	turn := 0
	side := func(me, other int, wg *sync.WaitGroup) {
		for i := 0; i < n; i++ {
			mu.Lock()
			for turn != me {
				cond.Wait()
			}
			turn = other
			cond.Signal()
			mu.Unlock()
		}
		if wg != nil {
			wg.Done()
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go side(1, 0, &wg)
	side(0, 1, nil)
	wg.Wait()
	return perOp(time.Since(start), n)
}

func main() {
	name := flag.String("case", "", "proc-call, fork, fork-join, yield, acquire-release or pingpong")
	n := flag.Int("n", 100000, "operations in the timed run")
	batch := flag.Int("batch", 32, "threads per batch in the fork case")
	flag.Parse()
	if *n < 1 || *batch < 1 {
		fmt.Fprintln(os.Stderr, "threads: -n and -batch must be positive")
		os.Exit(2)
	}
	switch *name {
	case "proc-call":
		fmt.Printf("proc-call %.3f\n", procCall(*n))
	case "fork":
		c, d, t := fork(*n, *batch)
		fmt.Printf("create %.3f\ndestroy %.3f\nfork %.3f\n", c, d, t)
	case "fork-join":
		fmt.Printf("fork-join %.3f\n", forkJoin(*n))
	case "yield":
		fmt.Printf("yield %.3f\n", yield(*n))
	case "acquire-release":
		fmt.Printf("acquire-release %.3f\n", acquireRelease(*n))
	case "pingpong":
		fmt.Printf("pingpong %.3f\n", pingpong(*n))
	default:
		fmt.Fprintf(os.Stderr, "threads: unknown case %q\n", *name)
		os.Exit(2)
	}
}
