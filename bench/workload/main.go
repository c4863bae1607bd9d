// gotap-workload: the program `gotap bench` traces. Goroutines call main.handle, a framed
// function with realistic arguments (a request struct, a string key, an int) and results
// (an int and an error), at a tunable rate. The program times its own loop, so start-up,
// attach and detach stay out of the per-call figure, and prints
//
//	calls <N> elapsed_ns <T> ns_per_call <T/N>
//
// With -pingpong N it instead passes a token N times between two goroutines over unbuffered
// channels, so every handoff parks one goroutine and wakes the other: the workload for the
// cost of tracing goroutine state changes. It prints
//
//	handoffs <N> elapsed_ns <T> ns_per_handoff <T/N>
//
// With -serve N it serves N HTTP requests on loopback at -rate a second (server.go).
//
// With -syscalls N it makes N getppid system calls through syscall.RawSyscall, which leaves
// the goroutine running (no status change): the workload for what a system-call tracepoint
// costs each call. It prints
//
//	syscalls <N> elapsed_ns <T> ns_per_syscall <T/N>
//
// usage: gotap-workload [-calls N] [-goroutines G] [-rate CALLS_PER_SECOND] | -pingpong N |
// -serve N [-rate REQUESTS_PER_SECOND] | -syscalls N
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

type Request struct {
	ID     int
	Method string
	Path   string
	Body   []byte
}

var errNotFound = errors.New("not found")

// handle is what gets traced: small enough that tracing dominates its cost. It calls
// another function, so like most real functions it has a frame, and its entry probe sits
// on the kernel-emulated push rbp.
//
//go:noinline
func handle(req *Request, key string, n int) (int, error) {
	if len(key) == 0 {
		return 0, errNotFound
	}
	return hash(key, n) ^ req.ID ^ len(req.Path), nil
}

//go:noinline
func hash(key string, h int) int {
	for i := 0; i < len(key); i++ {
		h = h*31 + int(key[i])
	}
	return h
}

func main() {
	calls := flag.Int("calls", 200000, "calls in all")
	goroutines := flag.Int("goroutines", 4, "goroutines making the calls")
	rate := flag.Float64("rate", 0, "calls per second in all (0: as fast as possible)")
	pingpong := flag.Int("pingpong", 0, "pass a token this many times between two goroutines instead")
	serveN := flag.Int("serve", 0, "serve this many HTTP requests on loopback instead (at -rate)")
	syscalls := flag.Int("syscalls", 0, "make this many raw getppid system calls instead")
	flag.Parse()
	if *syscalls > 0 {
		rawSyscalls(*syscalls)
		return
	}
	if *serveN > 0 {
		serveBench(*serveN, *rate)
		return
	}
	if *pingpong > 0 {
		pingPong(*pingpong)
		return
	}
	if *calls <= 0 || *goroutines <= 0 || *rate < 0 {
		fmt.Fprintln(os.Stderr, "gotap-workload: -calls and -goroutines must be positive, -rate not negative")
		os.Exit(2)
	}
	keys := []string{"alpha", "bravo", "", "delta-echo-foxtrot"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sum, failed := 0, 0
	start := time.Now()
	for g := 0; g < *goroutines; g++ {
		n := *calls / *goroutines
		if g < *calls%*goroutines {
			n++
		}
		wg.Add(1)
		go func(g, n int) {
			defer wg.Done()
			req := &Request{ID: g, Method: "GET", Path: fmt.Sprintf("/items/%d", g)}
			var gap time.Duration
			if *rate > 0 {
				gap = time.Duration(float64(time.Second) * float64(*goroutines) / *rate)
			}
			next := time.Now()
			s, f := 0, 0
			for i := 0; i < n; i++ {
				if gap > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(gap)
				}
				v, err := handle(req, keys[i%len(keys)], i)
				if err != nil {
					f++
				}
				s += v
			}
			mu.Lock()
			sum, failed = sum+s, failed+f
			mu.Unlock()
		}(g, n)
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("calls %d elapsed_ns %d ns_per_call %.1f failed %d sum %d\n", *calls,
		el.Nanoseconds(), float64(el.Nanoseconds())/float64(*calls), failed, sum)
}

// pingPong times n handoffs of a token between two goroutines: each one wakes the other and
// parks until the token comes back.
func pingPong(n int) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	start := time.Now()
	v := 0
	for i := 0; i < n; i += 2 {
		ping <- v
		v = <-pong
	}
	close(ping)
	el := time.Since(start)
	fmt.Printf("handoffs %d elapsed_ns %d ns_per_handoff %.1f token %d\n", n, el.Nanoseconds(),
		float64(el.Nanoseconds())/float64(n), v)
}

// rawSyscalls times n getppid system calls made without the runtime's entersyscall.
func rawSyscalls(n int) {
	start := time.Now()
	var last uintptr
	for i := 0; i < n; i++ {
		last, _, _ = syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
	}
	el := time.Since(start)
	fmt.Printf("syscalls %d elapsed_ns %d ns_per_syscall %.1f ppid %d\n", n, el.Nanoseconds(),
		float64(el.Nanoseconds())/float64(n), last)
}
