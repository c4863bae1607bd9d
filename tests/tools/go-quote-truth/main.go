// Prints the ground truth of tests/unit/test_go_quote.cpp: Go's own %q of each input, as
// C++ literals, and a digest of strconv.IsPrint over every rune. Run:
//   cd tests/tools/go-quote-truth && GOTOOLCHAIN=local GOPROXY=off go run .
package main

import (
	"fmt"
	"strconv"
)

// s as a C++ string literal: printable ASCII as it is, every other byte a 3-digit octal escape.
func cpp(s string) string {
	out := "\""
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out += "\\" + string(c)
		case c >= 0x20 && c < 0x7f:
			out += string(c)
		default:
			out += fmt.Sprintf("\\%03o", c)
		}
	}
	return out + "\""
}

func main() {
	ins := []string{
		"plain", "", "a\"b\\c", "\x1b[2J", "\x00\x01\a\b\f\n\r\t\v\x7f",
		"\u202e", "\u2066\u2067\u2068\u2069", "\xff", "caf\u00e9", "\u00ad", "\u00a0",
		"\xc2\x85\u2028\u2029", "\xed\xa0\x80", "\xf0\x80\x82\x85", "\xc3", "\xe2\x80",
		"\xf4\x90\x80\x80", "\U0001F600", "\U000E0001", "\U0010FFFF", "\ufeff", "\ufffd",
		"\uffff", "\x80", "\xc0\xaf", "\xe0\x80\xaf", "\u0378", "\U000F0000",
		"F\x1b[2J:1", "main.(*T).M", "map[string]int", "\u061c",
	}
	for _, s := range ins {
		fmt.Printf("    {%ss, %ss},\n", cpp(s), cpp(fmt.Sprintf("%q", s)))
	}
	// All of IsPrint: the number of printable runes and FNV-1a over a bitmap of them.
	n := 0
	h := uint32(2166136261)
	for base := 0; base < 0x110000; base += 8 {
		var b byte
		for i := 0; i < 8; i++ {
			if strconv.IsPrint(rune(base + i)) {
				b |= 1 << i
				n++
			}
		}
		h = (h ^ uint32(b)) * 16777619
	}
	fmt.Printf("printable %d fnv1a %#x\n", n, h)
}
