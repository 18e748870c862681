package testserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/stemflow/stem/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func count(t *testing.T, url string) int {
	t.Helper()
	var n int
	if err := connect(t, url).QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

// TestPostgres: committed rows survive an immediate restart (a crash, then
// recovery) and a fast one, on the same URL; a frozen server answers
// nothing until thawed; a stopped one refuses connections.
func TestPostgres(t *testing.T) {
	t.Parallel()
	pg := testserver.Postgres(t)
	ctx := context.Background()
	c := connect(t, pg.URL())
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := c.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync = %q (%v), want on: a crash must be real", fsync, err)
	}

	pg.Restart("immediate")
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a connection from before the crash still works: the server was not restarted")
	}
	if n := count(t, pg.URL()); n != 100 {
		t.Fatalf("after an immediate restart: %d rows, want 100", n)
	}
	pg.Restart("fast")
	if n := count(t, pg.URL()); n != 100 {
		t.Fatalf("after a fast restart: %d rows, want 100", n)
	}

	c = connect(t, pg.URL())
	pg.Freeze()
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Exec(qctx, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("a frozen server answered a query")
	}
	pg.Thaw()
	if n := count(t, pg.URL()); n != 100 {
		t.Fatalf("after thawing: %d rows, want 100", n)
	}

	pg.Stop()
	if _, err := pgx.Connect(ctx, pg.URL()); err == nil {
		t.Fatal("connected to a stopped server")
	}
	pg.Start()
	if n := count(t, pg.URL()); n != 100 {
		t.Fatalf("after stop and start: %d rows, want 100", n)
	}

	pg.Kill()
	if _, err := pgx.Connect(ctx, pg.URL()); err == nil {
		t.Fatal("connected to a killed server")
	}
	pg.Start()
	if n := count(t, pg.URL()); n != 100 {
		t.Fatalf("after kill and start: %d rows, want 100", n)
	}
}

// TestPostgresSettings: settings reach the server.
func TestPostgresSettings(t *testing.T) {
	t.Parallel()
	pg := testserver.Postgres(t, "fsync=off", "application_name=stemtest")
	var fsync string
	if err := connect(t, pg.URL()).QueryRow(context.Background(), "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Fatalf("fsync = %q (%v), want off", fsync, err)
	}
}

// TestRedis: with appendfsync always, every acknowledged write survives a
// SIGKILL and restart on the same URL; a frozen server answers nothing
// until thawed.
func TestRedis(t *testing.T) {
	t.Parallel()
	rd := testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	c := rd.Client()
	for i := range 50 {
		if err := c.RPush(ctx, "list", i).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rd.Kill()
	probe := redis.NewClient(&redis.Options{Addr: rd.Addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err == nil {
		t.Fatal("a killed server answered PING")
	}
	rd.Start()
	if n, err := c.LLen(ctx, "list").Result(); err != nil || n != 50 {
		t.Fatalf("after kill and start: LLEN = %d (%v), want 50", n, err)
	}

	rd.Freeze()
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := probe.Ping(qctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a frozen server answered PING")
	}
	rd.Thaw()
	if n, err := probe.LLen(ctx, "list").Result(); err != nil || n != 50 {
		t.Fatalf("after thawing: LLEN = %d (%v), want 50", n, err)
	}
}

// TestRedisDefaultKeepsNothing: without persistence arguments, a killed
// server comes back empty; and the configuration given is in force.
func TestRedisDefaultKeepsNothing(t *testing.T) {
	t.Parallel()
	rd := testserver.Redis(t, "--maxmemory", "2mb")
	ctx := context.Background()
	c := rd.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.ConfigGet(ctx, "maxmemory").Result(); err != nil || cfg["maxmemory"] != "2097152" {
		t.Fatalf("maxmemory = %v (%v), want 2097152", cfg, err)
	}
	rd.Kill()
	rd.Start()
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after a restart without persistence: %v, want redis.Nil", err)
	}
}
