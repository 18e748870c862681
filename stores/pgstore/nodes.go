package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

var _ storage.NodeReporter = (*Store)(nil)

// statsLag is how late pg_stat_database may be: each backend sends its
// counts at most once a second, and an idle one within about a second.
const statsLag = 1500 * time.Millisecond

// NodeStats implements storage.NodeReporter: the server's counts for the
// store's database, from pg_stat_database (through a transaction pooler
// too, where they are the server's, not the pooler's): its transactions,
// and the rows they read and wrote. The server does not report its
// processor time.
func (s *Store) NodeStats(ctx context.Context) ([]storage.NodeStat, error) {
	if err := s.check("node stats"); err != nil {
		return nil, err
	}
	st := storage.NodeStat{Node: s.host, CallsAre: "transactions", OperationsAre: "rows", Lag: statsLag}
	err := s.pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback,
		tup_returned + tup_fetched + tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&st.Calls, &st.Operations)
	if err != nil {
		return nil, fmt.Errorf("pgstore: node stats: %w", err)
	}
	return []storage.NodeStat{st}, nil
}
