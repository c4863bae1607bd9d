// Package geo gives the gccgo fixture methods in a package whose path needs encoding
// (gotap.test/geo: '.' and '/' are mangled as ..z2e and ..z2f).
package geo

type Point struct{ X, Y int }

// Sum has a value receiver: a 16-byte struct, passed in two integer registers.
//
//go:noinline
func (p Point) Sum() int { return p.X + p.Y }

// Scale has a pointer receiver; gccgo's symbol does not say so, DWARF does.
//
//go:noinline
func (p *Point) Scale(k int) { p.X *= k; p.Y *= k }

// Dist takes floats: xmm registers.
//
//go:noinline
func Dist(a, b float64) float64 { return a*a + b*b }
