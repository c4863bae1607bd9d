// The gccgo fixture: functions whose parameters and results cover the System V classes
// (integers, floats, a 16-byte string, a 24-byte slice in memory, an interface, several
// results) in main and in a package with an encoded path. It prints its own results.
package main

import (
	"fmt"
	"os"
	"strings"

	"gotap.test/geo"
)

//go:noinline
func add(a, b int) int { return a + b }

//go:noinline
func greet(name string, n int) string { return strings.Repeat(name, n) }

//go:noinline
func total(xs []int) (sum int, count int) {
	for _, x := range xs {
		sum += x
	}
	return sum, len(xs)
}

//go:noinline
func mix(f float64, b bool, s string) (float64, error) {
	if b {
		return f * 2, nil
	}
	return 0, fmt.Errorf("no %s", s)
}

//go:noinline
func describe(v interface{}) string { return fmt.Sprint(v) }

// Exported functions are global symbols (T in nm); gccgo's -O2 clones unexported ones it
// can specialise (main.add.constprop.0), which keeps them out of nm's T list.
//
//go:noinline
func Add3(a, b, c int) int { return a + b + c }

func main() {
	n := len(os.Args)
	p := &geo.Point{X: n, Y: 2}
	p.Scale(3)
	fmt.Println(add(n, 2), greet("ab", n+1), p.Sum(), geo.Dist(float64(n), 2), Add3(n, 2, 3))
	s, c := total([]int{1, 2, n})
	v, err := mix(1.5, n > 5, "x")
	fmt.Println(s, c, v, err, describe(n))
	done := make(chan int)
	go func() { done <- add(n, 40) }()
	fmt.Println(<-done)
}
