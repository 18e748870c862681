package pgstore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// checkExisting is Open's check under Options.OpenExisting: the schema
// exists, holds a Stem store (its migrations and runs tables), and is at the
// newest version this code knows, the only one it reads. It only reads.
func (s *Store) checkExisting(ctx context.Context) error {
	op := "open existing schema " + s.schemaName
	if err := s.check(op); err != nil {
		return err
	}
	var hasSchema, hasMigrations, hasRuns bool
	err := s.pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		to_regclass($2) IS NOT NULL,
		to_regclass($3) IS NOT NULL`,
		s.schemaName, s.schema+".migrations", s.schema+".runs").Scan(&hasSchema, &hasMigrations, &hasRuns)
	if err != nil {
		return s.wrap(op, err)
	}
	switch {
	case !hasSchema:
		return fmt.Errorf("pgstore: %s on %s: no such schema (a worker's Open creates it): %w", op, s.host, storage.ErrNotStore)
	case !hasMigrations || !hasRuns:
		return fmt.Errorf("pgstore: %s on %s: the schema holds no Stem store (no migrations or runs table): %w", op, s.host, storage.ErrNotStore)
	}
	var current int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.schema+`.migrations`).Scan(&current); err != nil {
		return s.wrap(op, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	switch latest := ms[len(ms)-1].Version; {
	case current > latest:
		return fmt.Errorf("pgstore: %s on %s: schema version %d, this code knows versions up to %d; upgrade the code: %w: %w",
			op, s.host, current, latest, storage.ErrNotStore, ErrSchemaTooNew)
	case current < latest:
		return fmt.Errorf("pgstore: %s on %s: schema version %d, this code reads version %d; a worker's Open (or Migrate) upgrades it: %w",
			op, s.host, current, latest, storage.ErrNotStore)
	}
	return nil
}
