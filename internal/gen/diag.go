package gen

import (
	"cmp"
	"fmt"
	"go/token"
	"path/filepath"
	"slices"
)

// Diagnostic is one problem, positioned like a compiler error.
type Diagnostic struct {
	// Path is the file's absolute path.
	Path string
	// Line and Column are 1-based; 0 when unknown.
	Line, Column int
	Msg          string
}

// String formats the diagnostic as "path:line:col: message".
func (d Diagnostic) String() string { return d.format(d.Path) }

// Rel formats the diagnostic with its path relative to dir, as the go
// command prints errors.
func (d Diagnostic) Rel(dir string) string {
	path := d.Path
	if rel, err := filepath.Rel(dir, path); err == nil {
		path = rel
	}
	return d.format(path)
}

func (d Diagnostic) format(path string) string {
	switch {
	case path == "":
		return d.Msg
	case d.Line == 0:
		return fmt.Sprintf("%s: %s", path, d.Msg)
	case d.Column == 0:
		return fmt.Sprintf("%s:%d: %s", path, d.Line, d.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", path, d.Line, d.Column, d.Msg)
}

// diagnostics collects every problem of one package.
type diagnostics struct {
	fset *token.FileSet
	list []Diagnostic
}

// add records a problem at pos.
func (d *diagnostics) add(pos token.Pos, format string, args ...any) {
	p := d.fset.Position(pos)
	d.list = append(d.list, Diagnostic{Path: p.Filename, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...)})
}

// addPath records a problem with a whole file.
func (d *diagnostics) addPath(path, msg string) {
	d.list = append(d.list, Diagnostic{Path: path, Msg: msg})
}

// sorted returns the diagnostics sorted by position, without duplicates.
func (d *diagnostics) sorted() []Diagnostic {
	out := slices.Clone(d.list)
	slices.SortFunc(out, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column), cmp.Compare(a.Msg, b.Msg))
	})
	return slices.Compact(out)
}
