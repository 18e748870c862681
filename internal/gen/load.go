package gen

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/packages"
)

// loadMode is all stemgen needs: names and files to find the package, and
// syntax with full type information for the annotated declarations.
// Dependencies come from export data, not source.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
	packages.NeedTypes | packages.NeedTypesInfo

// loaded is the result of the one packages.Load.
type loaded struct {
	fset *token.FileSet
	pkgs []*loadedPackage
}

// loadedPackage is one matched package and what loading it found.
type loadedPackage struct {
	pkg *packages.Package
	dir string
	// hasGenFile: the package has a stem_gen.go written by stemgen, which
	// the load replaced by an empty file.
	hasGenFile bool
	// foreignGenFile: the package has a stem_gen.go not written by stemgen.
	foreignGenFile bool
	// errors are the load's list and parse errors.
	errors []Diagnostic
}

// load loads the packages with one packages.Load.
//
// The package's own stem_gen.go is stale or missing while stemgen runs, so
// the load parses it as an empty file (via ParseFile, which, unlike an
// Overlay, keeps the dependencies' export data usable). What is left are the
// errors naming generated identifiers in the user's files, which
// typeErrors tolerates.
func load(ctx context.Context, cfg Config) (*loaded, error) {
	var (
		mu        sync.Mutex
		generated = map[string]bool{} // stem_gen.go path → written by stemgen
	)
	fset := token.NewFileSet()
	pcfg := &packages.Config{
		Context: ctx,
		Mode:    loadMode,
		Dir:     cfg.Dir,
		Env:     cfg.Env,
		Fset:    fset,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			const mode = parser.AllErrors | parser.ParseComments
			if filepath.Base(filename) != GenFileName {
				return parser.ParseFile(fset, filename, src, mode)
			}
			ours := bytes.HasPrefix(src, []byte(header))
			mu.Lock()
			generated[filename] = ours
			mu.Unlock()
			if ours {
				if f, err := parser.ParseFile(fset, filename, src, parser.PackageClauseOnly); err == nil {
					return parser.ParseFile(fset, filename, "package "+f.Name.Name+"\n", mode)
				}
			}
			return parser.ParseFile(fset, filename, src, mode)
		},
	}
	pkgs, err := packages.Load(pcfg, cfg.Patterns...)
	if err != nil {
		return nil, fmt.Errorf("gen: load %s: %w", strings.Join(cfg.Patterns, " "), err)
	}
	l := &loaded{fset: fset}
	for _, p := range pkgs {
		lp := &loadedPackage{pkg: p, dir: p.Dir}
		for _, f := range p.GoFiles {
			if filepath.Base(f) == GenFileName {
				ours, parsed := generated[f]
				lp.hasGenFile = ours
				lp.foreignGenFile = parsed && !ours
			}
		}
		for _, e := range p.Errors {
			switch {
			case e.Kind == packages.TypeError:
				// Reported from TypeErrors, with exact positions.
			case e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# "):
				// The go command compiling the package for export data
				// fails while the generated file is stale; our own type
				// check, which skips that file, is authoritative.
			default:
				lp.errors = append(lp.errors, listDiagnostic(p, e))
			}
		}
		if len(lp.errors) > 0 || p.Types == nil || p.TypesInfo == nil {
			lp.pkg = nil
			if len(lp.errors) == 0 {
				lp.errors = append(lp.errors, Diagnostic{Path: p.Dir, Msg: fmt.Sprintf("package %s could not be loaded", p.PkgPath)})
			}
		}
		l.pkgs = append(l.pkgs, lp)
	}
	slices.SortFunc(l.pkgs, func(a, b *loadedPackage) int { return cmp.Compare(a.dir, b.dir) })
	return l, nil
}

var posRE = regexp.MustCompile(`^(.*):(\d+):(\d+)$`)

// listDiagnostic converts a load error, positioned "file:line:col" or not.
func listDiagnostic(p *packages.Package, e packages.Error) Diagnostic {
	d := Diagnostic{Path: p.Dir, Msg: e.Msg}
	if m := posRE.FindStringSubmatch(e.Pos); m != nil {
		d.Path = m[1]
		d.Line, _ = strconv.Atoi(m[2])
		d.Column, _ = strconv.Atoi(m[3])
	} else if e.Pos != "" {
		d.Path = e.Pos
	}
	return d
}

// undefinedRE matches the type checker's error that a missing generated
// identifier causes. (With stem_gen.go parsed as empty, every generated
// identifier is missing, so no other error can come from a stale file.)
var undefinedRE = regexp.MustCompile(`^undefined: (?:\w+\.)?(\w+)$`)

// typeErrors reports the package's type errors, except those that name an
// identifier stemgen is about to generate (in this package or, qualified,
// in another package of the load): before the first generation, and
// whenever stem_gen.go is stale, the user's code refers to identifiers that
// do not exist yet.
func typeErrors(lp *loadedPackage, gen map[string]bool, d *diagnostics) {
	for _, e := range lp.pkg.TypeErrors {
		if m := undefinedRE.FindStringSubmatch(e.Msg); m != nil && gen[m[1]] {
			continue
		}
		if filepath.Base(d.fset.Position(e.Pos).Filename) == GenFileName {
			continue
		}
		d.add(e.Pos, "%s", e.Msg)
	}
}
