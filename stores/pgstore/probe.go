package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/storage"
)

var _ storage.CommitProber = (*Store)(nil)

// probeTable is the scratch table ProbeCommits creates in the store's
// schema and drops before it returns.
const probeTable = "stem_probe"

// ProbeCommits measures the server's ceiling for this store (see
// storage.CommitProber): autocommitted single-row INSERTs, each its own
// durable commit, from conns connections of the store's pool at once (at
// most the pool's size) for d. The rows go to the scratch table
// <schema>.stem_probe, an ordinary table (a TEMP or UNLOGGED one writes no
// WAL, so its commits would cost next to nothing), created IF NOT EXISTS
// (a probe that was killed leaves one, which the next reuses) and dropped
// before ProbeCommits returns. What a commit costs is the server's to say
// (synchronous_commit, its disk). The probe holds its connections of the
// pool while it runs, so this store's other calls wait for the rest.
func (s *Store) ProbeCommits(ctx context.Context, conns int, d time.Duration) (p storage.CommitProbe, err error) {
	const op = "probe commits"
	if err := s.check(op); err != nil {
		return p, err
	}
	if err := storage.CheckProbe(conns, d); err != nil {
		return p, fmt.Errorf("pgstore: %w", err)
	}
	table := s.schema + "." + pgx.Identifier{probeTable}.Sanitize()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bytea)`); err != nil {
		return p, s.wrap(op+": create "+s.schemaName+"."+probeTable, err)
	}
	defer func() {
		// Dropped whatever ended the probe, the caller's context included.
		if _, derr := s.pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table); derr != nil {
			err = errors.Join(err, s.wrap(op+": drop "+s.schemaName+"."+probeTable, derr))
		}
	}()

	held := make([]*pgxpool.Conn, min(conns, int(s.pool.Config().MaxConns)))
	defer func() {
		for _, c := range held {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range held {
		err := s.connCall(ctx, func(ctx context.Context) (err error) {
			held[i], err = s.pool.Acquire(ctx)
			return err
		})
		if err != nil {
			return p, s.wrap(op+": acquire a connection", err)
		}
	}
	insert := `INSERT INTO ` + table + ` (v) VALUES ($1)`
	payload := []byte(`{"ok":true}`)
	p, err = storage.MeasureCommits(ctx, len(held), d, func(ctx context.Context, i int) error {
		return s.connCall(ctx, func(ctx context.Context) error {
			_, err := held[i].Exec(ctx, insert, payload)
			return err
		})
	})
	if err != nil {
		return storage.CommitProbe{}, s.wrap(op, err)
	}
	p.Commit = "one-row commits"
	return p, nil
}
