package testserver_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/internal/testserver"
)

// upstream is the server a test's bouncer stands in front of: the shared
// test server when STEM_TEST_POSTGRES_URL names one, else a private one.
func upstream(t *testing.T) string {
	if url := os.Getenv("STEM_TEST_POSTGRES_URL"); url != "" {
		return url
	}
	return testserver.Postgres(t).URL()
}

// backendPID is the upstream server's process serving conn's statement,
// asked in the simple protocol, which leaves nothing prepared.
func backendPID(t *testing.T, conn *pgx.Conn) uint32 {
	t.Helper()
	var pid uint32
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&pid); err != nil {
		t.Fatalf("pg_backend_pid through the bouncer: %v", err)
	}
	return pid
}

// TestPgBouncer: the bouncer pools transactions (a client's statement
// runs on the server connection another client's statement ran on once
// that one ended, which a direct or session-pooled connection never
// does); a killed bouncer passes nothing, and one started again does, on
// the same URL.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	b := testserver.PgBouncer(t, upstream(t))
	ctx := context.Background()
	c1, c2 := connect(t, b.URL()), connect(t, b.URL())
	first := backendPID(t, c1)
	if c1.PgConn().PID() == first {
		t.Fatalf("the client's backend key names the server's process %d: not a pooler", first)
	}
	if second := backendPID(t, c2); second != first {
		t.Fatalf("a second client's statement ran on server process %d, the first client's on %d: want the one idle server connection, transaction pooling", second, first)
	}

	b.Kill()
	if _, err := c1.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol); err == nil {
		t.Fatal("a query passed through a killed bouncer")
	}
	b.Start()
	backendPID(t, connect(t, b.URL()))
	b.Restart()
	backendPID(t, connect(t, b.URL()))
}
