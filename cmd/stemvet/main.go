// Command stemvet is Stem's determinism analyzer as a go vet tool: it
// reports what makes workflow code diverge on replay (the wall clock,
// randomness, goroutines, channels, map order, I/O, package variables),
// each at file:line:col with the fix. See package determinism for what it
// reports and how //stem:allow allows an exception.
//
//	go install github.com/stemflow/stem/cmd/stemvet
//	go vet -vettool=$(go env GOPATH)/bin/stemvet ./...
//
// or, with the tool recorded in go.mod (go get -tool):
//
//	go build -o /tmp/stemvet github.com/stemflow/stem/cmd/stemvet
//	go vet -vettool=/tmp/stemvet ./...
//
// go vet exits non-zero when it reports anything. stemgen reports the same
// findings when it generates.
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/stemflow/stem/determinism"
)

func main() {
	unitchecker.Main(determinism.Analyzer)
}
