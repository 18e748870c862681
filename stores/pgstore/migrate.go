package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/internal/migrations"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// ErrSchemaTooNew is returned by Migrate (and so by Open and New) when the
// database's schema was migrated by a newer version of this package than the
// running one: the code does not know the tables it would write.
var ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this code")

// schemaPlaceholder stands for the quoted schema name in migration files.
const schemaPlaceholder = "{schema}"

// migration is one embedded, numbered schema change.
type migration = migrations.Migration

// loadMigrations reads the embedded migrations in version order and checks
// that they number 1, 2, 3, ... without gaps or duplicates.
func loadMigrations() ([]migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// Migrate creates the schema when missing and applies every embedded
// migration the database lacks, in one transaction holding an advisory lock
// derived from the schema name, so concurrent Migrate calls (processes
// starting together) apply each migration exactly once. A database already
// migrated past the newest embedded version fails with ErrSchemaTooNew and
// is left untouched. It then reads how the schema's run IDs sort (see
// ListRuns).
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.check("migrate"); err != nil {
		return err
	}
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	var applied []int
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		applied = applied[:0]
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "stem.pgstore.migrate:"+s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.schema+`.migrations (
			version    integer     NOT NULL PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.schema+`.migrations`).Scan(&current); err != nil {
			return err
		}
		if latest := ms[len(ms)-1].Version; current > latest {
			return fmt.Errorf("%w: schema %s is at version %d, this code knows versions up to %d; upgrade the code",
				ErrSchemaTooNew, s.schema, current, latest)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.SQL, schemaPlaceholder, s.schema)); err != nil {
				return fmt.Errorf("apply %03d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.schema+`.migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return err
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return s.wrap("migrate schema "+s.schemaName, err)
	}
	for _, v := range applied {
		s.log.Info("applied migration", "version", v)
	}
	return s.readIDCollation(ctx)
}
