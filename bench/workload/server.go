package main

// -serve N: an HTTP server on loopback and a client in the same process sending it N
// requests at -rate requests a second over one keep-alive connection. Each request's handler,
// main.serve, parses the request, hands it to a worker goroutine over a channel and waits for
// the answer, which the worker gives after a 200 us timer: the goroutine parks and is woken
// twice per request, as a real handler waiting on a backend does. The process's own CPU time
// (user + system, all threads) over the requests is the figure: at a fixed rate, what tracing
// adds to it is what tracing costs the server. It prints
//
//	requests <N> elapsed_ns <T> cpu_ns <C> cpu_ns_per_request <C/N> p50_ns <P> p99_ns <Q>

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"
)

type job struct {
	key  string
	done chan int
}

var jobs = make(chan job)

func worker() {
	for j := range jobs {
		time.Sleep(200 * time.Microsecond)
		j.done <- hash(j.key, 7)
	}
}

//go:noinline
func serve(w http.ResponseWriter, r *http.Request) {
	j := job{key: r.URL.Path, done: make(chan int)}
	jobs <- j
	fmt.Fprintf(w, "%d\n", <-j.done)
}

func cpuNs() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func serveBench(n int, rate float64) {
	go worker()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotap-workload: listen:", err)
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(serve))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	url := "http://" + ln.Addr().String() + "/item/"
	get := func(i int) {
		resp, err := client.Get(url + strconv.Itoa(i))
		if err != nil {
			fmt.Fprintln(os.Stderr, "gotap-workload: get:", err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get(-1) // the connection, before the clock starts
	gap := time.Duration(0)
	if rate > 0 {
		gap = time.Duration(float64(time.Second) / rate)
	}
	lat := make([]int64, 0, n)
	start, cpu0 := time.Now(), cpuNs()
	next := start
	for i := 0; i < n; i++ {
		if gap > 0 {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(gap)
		}
		t0 := time.Now()
		get(i)
		lat = append(lat, time.Since(t0).Nanoseconds())
	}
	el, cpu := time.Since(start), cpuNs()-cpu0
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	fmt.Printf("requests %d elapsed_ns %d cpu_ns %d cpu_ns_per_request %.0f p50_ns %d p99_ns %d\n",
		n, el.Nanoseconds(), cpu, float64(cpu)/float64(n), lat[n/2], lat[n*99/100])
}
