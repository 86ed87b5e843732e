// Command scale is the Go side of `ferry-bench scale`: one timed run of N
// goroutines that each block on one gate, printed as `name value` lines.
//
// Usage: scale -n N (GOMAXPROCS is set by the caller).
//
// With -idle -sockets K it sets up instead the idle case that the caller
// measures from outside: N goroutines blocked on the gate and K loopback
// TCP connections, each with a goroutine blocked in Read on its server
// end. It listens on 127.0.0.1, prints `listening PORT`, and the caller
// opens the K connections (and holds their client ends, which would not
// fit under this process's descriptor limit too). Once every goroutine
// waits it prints `ready` and waits for ever; the caller reads its
// threads' run time and kills it.
// Each goroutine marks itself started (sync.WaitGroup) and receives from
// a channel that is never sent on; closing the channel is the gate opening
// (the idiomatic broadcast in Go). Lines printed:
//
//	spawn_ns  per goroutine: from the first `go` to every goroutine started
//	          (the last few may still be on their way into the receive)
//	join_ns   per goroutine: from close(gate) to every goroutine returned
//	          (a second sync.WaitGroup)
//	bytes     per blocked goroutine: VmRSS + VmPTE of /proc/self/status
//	          after spawn+block minus before it
//
// With -sleepers it runs the timers case instead: N goroutines each wait
// for the gate, then sleep until a deadline delay(i) away (1 to 100 ms,
// the same pseudo-random sequence as ferry's side) and record how late
// they woke; it prints `p50_ns`, `p99_ns`, `max_ns` (how late) and
// `in_tick` (the share that woke within tick_ns of their deadline).
//
// Only the standard library is used, so it builds offline.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tickNs is ferry's timer tick (2^16 ns): the bound "within a tick".
const tickNs = 1 << 16

// delay is sleeper i's delay: 1 to 100 ms from splitmix64, as on ferry's
// side.
func delay(i uint64) time.Duration {
	z := i + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return time.Duration(1000+z%99001) * time.Microsecond
}

// sleepers runs the timers case with n goroutines and prints its lines.
func sleepers(n int) {
	gate := make(chan struct{})
	late := make([]int64, n)
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			started.Done()
			<-gate
			due := time.Now().Add(delay(uint64(i)))
			time.Sleep(time.Until(due))
			late[i] = int64(time.Since(due))
			done.Done()
		}(i)
	}
	started.Wait()
	close(gate)
	done.Wait()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	inTick := 0
	for _, l := range late {
		if l <= tickNs {
			inTick++
		}
	}
	q := func(p int) int64 { return late[(n-1)*p/100] }
	fmt.Printf("p50_ns %d\n", q(50))
	fmt.Printf("p99_ns %d\n", q(99))
	fmt.Printf("max_ns %d\n", late[n-1])
	fmt.Printf("in_tick %.6f\n", float64(inTick)/float64(n))
}

// residentBytes is VmRSS + VmPTE (resident memory plus page tables).
func residentBytes() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	found := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && (fields[0] == "VmRSS:" || fields[0] == "VmPTE:") && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, err
			}
			total += kb * 1024
			found++
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("no VmRSS/VmPTE in /proc/self/status")
	}
	return total, s.Err()
}

// idle blocks n goroutines on a gate and k goroutines in Read on the
// server ends of k loopback connections the caller opens, prints `ready`
// and waits for ever.
func idle(n, k int) {
	gate := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n + k)
	for i := 0; i < n; i++ {
		go func() {
			started.Done()
			<-gate
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	for i := 0; i < k; i++ {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "accept:", err)
			os.Exit(1)
		}
		go func() {
			started.Done()
			var b [64]byte
			c.Read(b[:])
		}()
	}
	started.Wait()
	fmt.Println("ready")
	<-gate
}

func main() {
	n := flag.Int("n", 10000, "goroutines")
	idleCase := flag.Bool("idle", false, "set up the idle case instead and wait for ever")
	sockets := flag.Int("sockets", 0, "idle connections, with -idle")
	sleepCase := flag.Bool("sleepers", false, "run the timers case instead")
	flag.Parse()
	if *n <= 0 {
		fmt.Fprintln(os.Stderr, "-n must be positive")
		os.Exit(2)
	}
	if *sleepCase {
		sleepers(*n)
		return
	}
	if *idleCase {
		idle(*n, *sockets)
		return
	}
	before, err := residentBytes()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gate := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(*n)
	done.Add(*n)
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		go func() {
			started.Done()
			<-gate
			done.Done()
		}()
	}
	started.Wait()
	spawn := time.Since(t0)
	after, err := residentBytes()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t1 := time.Now()
	close(gate)
	done.Wait()
	join := time.Since(t1)
	fmt.Printf("spawn_ns %.2f\n", float64(spawn.Nanoseconds())/float64(*n))
	fmt.Printf("join_ns %.2f\n", float64(join.Nanoseconds())/float64(*n))
	fmt.Printf("bytes %.2f\n", float64(after-before)/float64(*n))
}
