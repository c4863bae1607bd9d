// The gccgo tracing fixture: `calls N` makes N rounds of calls to functions whose
// parameters and results take each System V place gotap reads (integer registers, rdx as
// an argument and as a second result, a string, a slice on the stack, a pointer, results
// sharing a register, results in the caller's memory), from the
// main goroutine and from a second one at the same time. Each call prints its own truth:
// "call FUNC ARGS -> RESULTS", values as %v prints them; then "calls FUNC COUNT". Each of
// the two goroutines says its id first, as libgo's traceback prints it: "goroutine main ID"
// makes rounds 0 to N-1, "goroutine worker ID" rounds N to 2N-1.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	mu                    sync.Mutex
	counts                = map[string]int{}
	parses, parseFailures int
)

// Printed after the call returns, so that the line is the call's own truth.
func record(name, args, results string) {
	mu.Lock()
	defer mu.Unlock()
	counts[name]++
	fmt.Printf("call %s %s -> %s\n", name, args, results)
}

// Exported, so that gccgo keeps one global copy (no .constprop clone taking other
// parameters) under the Go name.

//go:noinline
func Add(a, b int) int { return a + b }

// A bool in dil, then the string in rsi:rdx; the string result comes back in rax:rdx.
//
//go:noinline
func Label(loud bool, s string) string {
	if loud {
		return strings.ToUpper(s)
	}
	return s + "."
}

// A 24-byte slice is passed in memory: on the stack at entry RSP+8.
//
//go:noinline
func Sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// Two int results: rax and rdx.
//
//go:noinline
func DivMod(a, b int) (int, int) { return a / b, a % b }

//go:noinline
func Deref(p *int) int { return *p + 1 }

// Three results, 32 bytes: returned in memory, the caller's buffer address passed in rdi
// (the string argument then takes rsi:rdx) and back in rax.
//
//go:noinline
func Cut(s string, n int) (string, int, bool) {
	if n > len(s) {
		return s, len(s), false
	}
	return s[:n], n, true
}

// Two int32 results share rax: the first in its low half, the second in its high half.
//
//go:noinline
func Halves(a int32) (int32, int32) { return a * 2, -a - 1 }

// (int, error): 24 bytes, in memory, the error's first word at rax+8. Its calls and failures
// are printed at the end ("errors main.Parse CALLS FAILED"), and each call's error as its
// dynamic type and fields ("parse IN N *strconv.NumError FUNC NUM ERR", or "parse IN N nil"),
// which gotap reads from libgo's type descriptors.
//
//go:noinline
func Parse(s string) (int, error) { return strconv.Atoi(s) }

// A 24-byte slice result: in memory too.
//
//go:noinline
func Evens(n int) []int {
	xs := make([]int, 0, n)
	for i := 0; i < n; i++ {
		xs = append(xs, 2*i)
	}
	return xs
}

// The calling goroutine's id, from the first line of its own traceback ("goroutine 7
// [running]:"): libgo has no other way to tell it.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	return strings.Fields(string(buf[:n]))[1]
}

// The line its caller is at, from libgo's own traceback: a --stack test's truth.
func callLine() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}

// The function that called its caller, as libgo names it.
func callerOfCaller() string {
	pc, _, _, ok := runtime.Caller(2)
	if !ok {
		return "?"
	}
	return runtime.FuncForPC(pc).Name()
}

// Each round says where it calls main.Add ("stack I LINE CALLER": the line of that call in
// round, and round's own caller), for --stack's frames of Add's calls.
//
//go:noinline
func round(i int) {
	caller := callerOfCaller()
	a, at := Add(i, 2*i+1), callLine()
	fmt.Printf("stack %d %d %s\n", i, at, caller)
	record("main.Add", fmt.Sprintf("%d %d", i, 2*i+1), fmt.Sprint(a))
	s := "w" + strconv.Itoa(i)
	l := Label(i%2 == 0, s)
	record("main.Label", fmt.Sprintf("%v %s", i%2 == 0, s), l)
	xs := make([]int, i%4+1)
	for k := range xs {
		xs[k] = i + k
	}
	t := Sum(xs)
	record("main.Sum", fmt.Sprint(xs), fmt.Sprint(t))
	q, r := DivMod(100+i, i%7+1)
	record("main.DivMod", fmt.Sprintf("%d %d", 100+i, i%7+1), fmt.Sprintf("%d %d", q, r))
	v := i * 3
	d := Deref(&v)
	record("main.Deref", fmt.Sprint(v), fmt.Sprint(d))
	cs, cn, ok := Cut(s, i%4)
	record("main.Cut", fmt.Sprintf("%s %d", s, i%4), fmt.Sprintf("%s %d %v", cs, cn, ok))
	h1, h2 := Halves(int32(i) - 5)
	record("main.Halves", fmt.Sprint(int32(i)-5), fmt.Sprintf("%d %d", h1, h2))
	ev := Evens(i%3 + 1)
	record("main.Evens", fmt.Sprint(i%3+1), fmt.Sprint(ev))
	in := strconv.Itoa(i)
	if i%3 == 0 {
		in = "x" + in
	}
	pn, err := Parse(in)
	if ne, ok := err.(*strconv.NumError); ok {
		fmt.Printf("parse %s %d %T %s %s %s\n", in, pn, err, ne.Func, ne.Num, ne.Err)
	} else {
		fmt.Printf("parse %s %d %v\n", in, pn, err)
	}
	mu.Lock()
	parses++
	if err != nil {
		parseFailures++
	}
	mu.Unlock()
}

//go:noinline
func Leaf(n int) int { return n + 1 }

// Deep recurses n times with a 512-byte frame each, on a goroutine: its split stack grows in
// segments (__morestack), which a --stack walk crosses.
//
//go:noinline
func Deep(n int) int {
	var buf [512]byte
	buf[n%512] = byte(n)
	if n == 0 {
		return Leaf(int(buf[0]))
	}
	return Deep(n-1) + int(buf[n%512]&1)
}

func main() {
	n := 10
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	// "calls N deep": main.Deep N levels down on a goroutine, then one call of main.Leaf;
	// says "deep N".
	if len(os.Args) > 2 && os.Args[2] == "deep" {
		done := make(chan int)
		go func() { done <- Deep(n) }()
		<-done
		fmt.Printf("deep %d\n", n)
		return
	}
	// "calls N wait FILE": says so, then makes its calls once FILE exists (a tracer attached
	// by pid in between sees all of them).
	if len(os.Args) > 3 && os.Args[2] == "wait" {
		fmt.Println("waiting")
		for {
			if _, err := os.Stat(os.Args[3]); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	fmt.Printf("goroutine main %s\n", goid())
	go func() {
		defer wg.Done()
		fmt.Printf("goroutine worker %s\n", goid())
		for i := n; i < 2*n; i++ {
			round(i)
		}
	}()
	for i := 0; i < n; i++ {
		round(i)
	}
	// The main goroutine parks at least once with a reason ("sleep"), whichever of the two
	// goroutines ends first: tests of goroutine states wait for one (wg.Wait parks only when
	// the worker is still running).
	time.Sleep(time.Millisecond)
	wg.Wait()
	for _, f := range []string{"main.Add", "main.Label", "main.Sum", "main.DivMod", "main.Deref",
		"main.Cut", "main.Halves", "main.Evens"} {
		fmt.Printf("calls %s %d\n", f, counts[f])
	}
	fmt.Printf("errors main.Parse %d %d\n", parses, parseFailures)
}
