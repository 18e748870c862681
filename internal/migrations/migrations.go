// Package migrations reads the embedded, numbered schema migrations the SQL
// stores apply: files named NNN_name.up.sql, numbered 001, 002, ... without
// gaps.
package migrations

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// Migration is one schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// Load returns the migrations in dir of fsys in version order, checking that
// every file is named NNN_name.up.sql and that they are numbered 1, 2, 3, ...
// without gaps or duplicates.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations are not numbered 001, 002, ... without gaps: position %d holds %03d_%s", i+1, m.Version, m.Name)
		}
	}
	return ms, nil
}
