// Command stemgen generates typed Go code for the //stem: annotations of a
// package: run it with go generate. See package annotations for the
// directives and `stemgen -h` for the flags.
package main

import (
	"os"

	"github.com/stemflow/stem/internal/gen"
)

func main() {
	os.Exit(gen.Main(os.Args[1:], os.Stdout, os.Stderr))
}
