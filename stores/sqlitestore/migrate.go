package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/stemflow/stem/internal/migrations"
	"github.com/stemflow/stem/storage"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// migration is one embedded schema change.
type migration = migrations.Migration

// loadMigrations returns the embedded migrations in version order, checking
// that they are numbered 1, 2, 3, ... without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	return migrations.Load(fsys, "migrations")
}

// Migrate brings the database schema up to the version this code knows,
// applying each missing embedded migration in order, all in one IMMEDIATE
// transaction (so concurrent openers of one file apply each exactly once).
// A database whose recorded version is newer than this code's is refused.
// Open calls it unless Options.SkipMigrate is set.
func (s *Store) Migrate(ctx context.Context) error {
	if s.isClosed.Load() {
		return fmt.Errorf("sqlitestore: migrate: %w", storage.ErrClosed)
	}
	if s.opts.ReadOnly {
		return s.refuseReadOnly("migrate")
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
	latest := ms[len(ms)-1].Version
	if current > latest {
		return fmt.Errorf("sqlitestore: migrate: database schema version %d is newer than this code knows (%d): upgrade the program", current, latest)
	}
	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stem_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, s.now().UnixNano()); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %03d_%s: %w", m.Version, m.Name, err)
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
	return ms[len(ms)-1].Version
}
