// gosymload is the peer for bench/funcs.sh: what Go's own debug/elf + debug/gosym need to
// answer "which functions match PREFIX*" in a binary: open it, load the pclntab into a
// gosym.Table, and list the matching functions.
//
// usage: gosymload BINARY PREFIX   (prints the number of matching functions)
package main

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gosymload BINARY PREFIX")
		os.Exit(2)
	}
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sect := f.Section(".gopclntab")
	if sect == nil {
		sect = f.Section(".data.rel.ro.gopclntab")
	}
	if sect == nil {
		fmt.Fprintln(os.Stderr, "no .gopclntab")
		os.Exit(1)
	}
	data, err := sect.Data()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var text uint64
	if t := f.Section(".text"); t != nil {
		text = t.Addr
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	n := 0
	for _, fn := range tab.Funcs {
		if strings.HasPrefix(fn.Name, os.Args[2]) {
			n++
		}
	}
	fmt.Println(n)
}
