// The gccgo structs fixture: `structs N` passes N rounds of structs through parameters and
// results of each System V class: two integer eightbytes in registers (Point), two SSE ones
// (Vec), over 16 bytes on the stack (Rect, a struct of structs), and a pointer to a struct
// with a string (Person). Each call prints its truth after it returns: "struct FUNC ARGS ->
// RESULT", each value as %v prints it.
package main

import (
	"fmt"
	"os"
	"strconv"
)

type Point struct{ X, Y int }

type Vec struct{ X, Y float64 }

type Rect struct{ Min, Max Point }

type Person struct {
	Name string
	Age  int32
}

//go:noinline
func Move(p Point, dx int) Point { return Point{p.X + dx, p.Y} }

//go:noinline
func Scale(v Vec, k float64) Vec { return Vec{v.X * k, v.Y * k} }

//go:noinline
func Area(r Rect) int { return (r.Max.X - r.Min.X) * (r.Max.Y - r.Min.Y) }

//go:noinline
func Greet(p *Person) string { return "hi " + p.Name }

func main() {
	n := 3
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	for i := 1; i <= n; i++ {
		p := Point{i, -i}
		fmt.Printf("struct main.Move %v %d -> %v\n", p, 10*i, Move(p, 10*i))
		v := Vec{float64(i) / 2, 1.5}
		fmt.Printf("struct main.Scale %v %v -> %v\n", v, 2.0, Scale(v, 2.0))
		r := Rect{Point{i, 2 * i}, Point{3 * i, 5 * i}}
		fmt.Printf("struct main.Area %v -> %d\n", r, Area(r))
		who := &Person{"ann" + strconv.Itoa(i), int32(30 + i)}
		fmt.Printf("struct main.Greet %v -> %s\n", *who, Greet(who))
	}
}
