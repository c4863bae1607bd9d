// The gccgo interfaces fixture: `ifaces N` passes N values through parameters whose type is
// an interface named by the program or the standard library (no `error`, no `interface {}`
// spelled as such), and prints each call's truth: "iface FUNC TYPE VALUE", TYPE and VALUE as
// %T and %v print the dynamic value.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

type Shape interface{ Area() int }

// Any is the empty interface under a name of its own.
type Any interface{}

type Square struct{ Side int }

func (s Square) Area() int { return s.Side * s.Side }

//go:noinline
func Area(s Shape) int { return s.Area() }

//go:noinline
func Read(r io.Reader) int {
	b := make([]byte, 64)
	n, _ := r.Read(b)
	return n
}

//go:noinline
func Keep(a Any) Any { return a }

func main() {
	n := 3
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	for i := 1; i <= n; i++ {
		sq := Square{i}
		fmt.Printf("iface main.Area %T %v -> %d\n", sq, sq, Area(sq))
		r := strings.NewReader(strings.Repeat("x", i))
		fmt.Printf("iface main.Read %T %d\n", r, Read(r))
		fmt.Printf("iface main.Keep %T %v\n", i, Keep(i))
	}
}
