package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/stemflow/stem/runtime"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// loadMigrations returns the embedded migrations in version order, checking
// that they are numbered 1, 2, 3, ... without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migrations are not numbered 001, 002, ... without gaps: position %d holds %03d_%s", i+1, m.version, m.name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations")
	}
	return ms, nil
}

// Migrate brings the database schema up to the version this code knows,
// applying each missing embedded migration in order, all in one IMMEDIATE
// transaction (so concurrent openers of one file apply each exactly once).
// A database whose recorded version is newer than this code's is refused.
// Open calls it unless Options.SkipMigrate is set.
func (s *Store) Migrate(ctx context.Context) error {
	if s.isClosed.Load() {
		return fmt.Errorf("sqlitestore: migrate: %w", runtime.ErrClosed)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	_, err = retryBusy(ctx, s.logger, func() (struct{}, error) { return struct{}{}, s.migrate(ctx, ms) })
	return err
}

func (s *Store) migrate(ctx context.Context, ms []migration) error {
	tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS stem_schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM stem_schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	latest := ms[len(ms)-1].version
	if current > latest {
		return fmt.Errorf("sqlitestore: migrate: database schema version %d is newer than this code knows (%d): upgrade the program", current, latest)
	}
	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %03d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stem_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, s.now().UnixNano()); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %03d_%s: %w", m.version, m.name, err)
		}
	}
	return tx.Commit()
}

// SchemaVersion returns the schema version this code migrates a database
// to: the number of its newest embedded migration.
func SchemaVersion() int {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return 0
	}
	return ms[len(ms)-1].version
}
