package sqlitestore

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// The embedded migrations start at 001 and have no gaps.
func TestMigrationsGapFree(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || !strings.HasPrefix(entries[0].Name(), "001_") {
		t.Fatalf("migrations do not start at 001: %v", entries)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(entries) {
		t.Fatalf("%d migrations loaded from %d files", len(ms), len(entries))
	}
	for i, m := range ms {
		if m.Version != i+1 || strings.TrimSpace(m.SQL) == "" {
			t.Fatalf("migration %d is version %d (%q)", i+1, m.Version, m.Name)
		}
	}
	if SchemaVersion() != len(ms) {
		t.Fatalf("SchemaVersion() = %d, want %d", SchemaVersion(), len(ms))
	}
}

// loadMigrations refuses sets that skip a number or do not start at 001.
func TestLoadMigrationsRefusesGaps(t *testing.T) {
	t.Parallel()
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"migrations/001_a.up.sql": file, "migrations/003_c.up.sql": file},
		"start":    {"migrations/002_b.up.sql": file},
		"dup":      {"migrations/001_a.up.sql": file, "migrations/001_b.up.sql": file},
		"bad name": {"migrations/1_a.up.sql": file},
		"empty":    {"migrations/README": nil},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted %v", name, fsys)
		}
	}
}
