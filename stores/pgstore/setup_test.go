package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/stemflow/stem/internal/crashtest"
)

const urlEnv = "STEM_TEST_POSTGRES_URL"

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	// In a crash-test worker process this runs an engine until killed.
	crashtest.MaybeWorker(openCrashWorkerStore)
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testURL returns the test database URL, skipping the test when unset.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " not set: skipping tests that need a Postgres server")
	}
	return url
}

// sharedPool is one pool for the package's test stores: each store has its
// own schema, and every statement names its schema, so they never mix.
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := testURL(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 40
		shared.pool, shared.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if shared.err != nil {
		t.Fatalf("connect to %s: %v", urlEnv, shared.err)
	}
	return shared.pool
}

// freshSchema names a schema no other test uses and drops it when the test
// ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	pool := sharedPool(t)
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "stemtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// newTestStore returns a migrated store in a fresh schema, closed and
// dropped when the test ends.
func newTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = freshSchema(t)
	}
	s, err := New(context.Background(), sharedPool(t), opts)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
