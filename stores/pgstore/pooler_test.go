package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// bouncer starts a private PgBouncer in transaction mode in front of the
// test server, skipping the test when either is missing.
func bouncer(t *testing.T) *testserver.Bouncer {
	t.Helper()
	return testserver.PgBouncer(t, testURL(t))
}

// poolerPool is a pool of connections through the bouncer, configured as
// Open configures one in pooler mode, closed when the test ends.
func poolerPool(t *testing.T, b *testserver.Bouncer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40
	if err := poolerExecMode(b.URL(), cfg.ConnConfig); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newPoolerStore is newTestStore through the bouncer's pool, in pooler
// mode.
func newPoolerStore(t *testing.T, pool *pgxpool.Pool, opts Options) *Store {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = freshSchema(t)
	}
	opts.TransactionPooler = true
	s, err := New(context.Background(), pool, opts)
	if err != nil {
		t.Fatalf("new store behind the pooler: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPoolerConformance runs the conformance suite through PgBouncer in
// transaction mode, the store in pooler mode with its listener on the
// direct URL, each case on its own schema. (A store that polls instead
// wakes its subscribers on any write to the server, and announces others'
// ends only as storage.Missed, where the suite holds a store to the
// notifications of its own schema's commits, by ID; TestPoolerWakes and
// the scenarios and crash tests run it.)
func TestPoolerConformance(t *testing.T) {
	pool := poolerPool(t, bouncer(t))
	direct := testURL(t)
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		s := newPoolerStore(t, pool, Options{Clock: clock, ListenURL: direct})
		// The listener's first subscription wakes every subscriber, in
		// case a hint was sent before it: let it be over before the case
		// subscribes, which may then wait for quiet only briefly.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		s.Notifications(ctx)
		select {
		case <-s.listener.ready:
		case <-ctx.Done():
			t.Fatal("the listener never subscribed")
		}
		return s
	})
}

// TestPoolerScenarios runs engines through every end-to-end scenario
// through PgBouncer in transaction mode, each on its own schema.
func TestPoolerScenarios(t *testing.T) {
	pool := poolerPool(t, bouncer(t))
	enginetest.Run(t, func(t *testing.T) storage.Store { return newPoolerStore(t, pool, Options{}) })
}

// poolerCrashConfig is crashConfig with the harness and every worker
// process reaching the server through b, in pooler mode; listen, when
// set, is the direct URL their listeners use, else they poll.
func poolerCrashConfig(t *testing.T, b *testserver.Bouncer, listen string) crashtest.Config {
	cfg := crashConfig(t)
	schema := strings.TrimPrefix(cfg.Env[0], envCrashSchema+"=")
	cfg.Open = func(t testing.TB) storage.Store {
		s, err := Open(context.Background(), crashURL(b.URL()), Options{Schema: schema, TransactionPooler: true, ListenURL: listen, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	cfg.Env = append(cfg.Env, envCrashPooler+"="+b.URL(), envCrashListen+"="+listen)
	return cfg
}

// TestPoolerChaosKill is TestChaosKill through PgBouncer in transaction
// mode, the workers polling for others' writes: four worker processes
// share 1000 ten-step runs (300 under -short) while random ones are
// killed with SIGKILL and replaced; every run completes once, every step
// key has exactly one checkpoint, every step ran.
func TestPoolerChaosKill(t *testing.T) {
	crashtest.Run(t, withKills(poolerCrashConfig(t, bouncer(t), "")))
}

// TestPoolerRestart: three worker processes share 300 ten-step runs
// through PgBouncer, their listeners on the direct URL, while the bouncer
// is killed with SIGKILL (every client connection dropped mid-statement or
// mid-transaction, which the server rolls back) when a third of the runs
// are complete: started again at once, then, 300ms later, killed and kept
// down for four leases, so every lease expires while it is away. No worker
// is restarted: their pools reconnect through the same URL, and every run
// still completes once, with exactly one checkpoint per step key; the step
// bodies that ran again (a step whose checkpoint's commit was cut off runs
// again, as after a worker's crash) are counted and logged.
func TestPoolerRestart(t *testing.T) {
	b := bouncer(t)
	cfg := poolerCrashConfig(t, b, testURL(t))
	cfg.Processes = 3
	cfg.Runs = 300
	cfg.StepDuration = 20 * time.Millisecond
	cfg.Disrupt = func(t *testing.T) {
		b.Restart()
		time.Sleep(300 * time.Millisecond)
		b.Kill()
		time.Sleep(4 * cfg.Lease)
		b.Start()
	}
	cfg.Timeout = 90 * time.Second
	rep := crashtest.Run(t, cfg)
	t.Logf("pooler restart: %d step executions for %d steps: %d ran again", rep.StepRuns, cfg.Runs*crashtest.Steps, rep.ReExecutions)
}

// TestPoolerWakes: behind the pooler, an idle worker whose own poll is an
// hour away runs a run another process starts, and that process's store
// tells its Finished subscribers of the run's end: without a listen URL
// through the store's poll, which LISTENs nowhere, as a possibly missed
// end (storage.Missed); with one through a LISTEN on the direct
// connection, by the run's ID.
func TestPoolerWakes(t *testing.T) {
	b := bouncer(t)
	pool := poolerPool(t, b)
	for _, tc := range []struct {
		name   string
		listen string
	}{{"poll", ""}, {"listen", testURL(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			worker := newPoolerStore(t, pool, Options{ListenURL: tc.listen})
			caller := newPoolerStore(t, pool, Options{Schema: worker.schemaName, ListenURL: tc.listen})
			if worker.polls() != (tc.listen == "") {
				t.Fatalf("polls() = %v with ListenURL %q", worker.polls(), tc.listen)
			}
			echo := func(_ *runtime.WorkflowContext, in string) (string, error) { return "echo " + in, nil }
			newEngine := func(s *Store) *runtime.Engine {
				e, err := runtime.New(runtime.Config{Store: s, PollInterval: time.Hour, Logger: quietLogger()})
				if err != nil {
					t.Fatal(err)
				}
				if err := runtime.Register(e, "pooler.echo", echo); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.Close() })
				return e
			}
			we, ce := newEngine(worker), newEngine(caller)
			ends := caller.Finished(ctx)
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- we.Run(runCtx) }()
			defer func() {
				stop()
				if err := <-done; err != nil {
					t.Errorf("worker: %v", err)
				}
			}()
			select { // the worker hears from now on
			case <-worker.listener.ready:
			case <-ctx.Done():
				t.Fatal("the worker's store never began to hear others' writes")
			}
			// The second run is started once the worker is idle, waiting
			// on nothing but the store's wake-ups.
			var last string
			for _, in := range []string{"a", "b"} {
				run, err := runtime.Start[string, string](ctx, ce, "pooler.echo", in)
				if err != nil {
					t.Fatal(err)
				}
				if out, err := run.Result(ctx); err != nil || out != "echo "+in {
					t.Fatalf("result of run %s: %q, %v", in, out, err)
				}
				last = run.ID()
			}
			want := last
			if tc.listen == "" {
				want = storage.Missed
			}
			for heard := false; !heard; {
				select {
				case id := <-ends:
					heard = id == want
				case <-ctx.Done():
					t.Fatalf("the caller's store never announced %q", want)
				}
			}
			if caller.HearsEveryFinish() != (tc.listen != "") {
				t.Fatalf("HearsEveryFinish() = %v with ListenURL %q", caller.HearsEveryFinish(), tc.listen)
			}
			var listening int
			if err := sharedPool(t).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND query LIKE '%' || $1 || '%'`,
				worker.schemaName).Scan(&listening); err != nil {
				t.Fatal(err)
			}
			if tc.listen == "" && (listening != 0 || worker.listener.pid.Load() != 0) {
				t.Fatalf("%d server connections LISTEN on the schema's channels, without a listen URL", listening)
			}
			if tc.listen != "" {
				// The listener's backend key is a real server process: the
				// connection is direct, not the pooler's.
				var query string
				if err := sharedPool(t).QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1`, int32(worker.listener.pid.Load())).Scan(&query); err != nil {
					t.Fatalf("the listener's server process: %v", err)
				}
				if !strings.HasPrefix(query, "LISTEN") {
					t.Fatalf("the listener's server process last ran %q, want a LISTEN", query)
				}
			}
		})
	}
}

// TestPoolerModeMatters: through a transaction pooler, pgx's default mode
// loses its prepared statements (a statement prepared on one server
// connection is executed on another), so Open and New without pooler mode
// find the pooler and refuse, naming the mode to use; pooler mode refuses
// an exec mode that prepares; and an error of a missing prepared statement
// says what the likely cause is.
func TestPoolerModeMatters(t *testing.T) {
	b := bouncer(t)
	ctx := t.Context()

	// Two clients of the bouncer in pgx's default mode: the first's
	// statement is prepared on the one server connection, which the
	// second's transaction then holds, so the first's next execution of
	// it runs on a new server connection, which never prepared it.
	cfg, err := pgxpool.ParseConfig(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	plain, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c1, err := plain.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := plain.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const stmt = `SELECT $1::int + 1`
	var n int
	if err := c1.QueryRow(ctx, stmt, 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	tx, err := c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	err = c1.QueryRow(ctx, stmt, 2).Scan(&n)
	_ = tx.Rollback(ctx)
	c1.Release()
	c2.Release()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "26000" {
		t.Fatalf("a prepared statement executed on another server connection of the pooler: %v, want invalid_sql_statement_name (26000)", err)
	}

	// The store's hint on such an error.
	direct := newTestStore(t, Options{})
	if msg := direct.wrap("claim", err).Error(); !strings.Contains(msg, "TransactionPooler") || !strings.Contains(msg, "stem_pooler=transaction") {
		t.Fatalf("a missing prepared statement's error does not name pooler mode: %s", msg)
	}

	// Open and New without pooler mode find the pooler and refuse.
	schema := freshSchema(t)
	for name, open := range map[string]func() (*Store, error){
		"Open": func() (*Store, error) { return Open(ctx, b.URL(), Options{Schema: schema}) },
		"New": func() (*Store, error) {
			return New(ctx, plain, Options{Schema: schema})
		},
		"New, notifications off": func() (*Store, error) {
			return New(ctx, plain, Options{Schema: schema, DisableNotify: true})
		},
		"New, safe mode, listening through the pooler": func() (*Store, error) {
			return New(ctx, poolerPool(t, b), Options{Schema: schema})
		},
	} {
		s, err := open()
		if err == nil {
			s.Close()
			t.Fatalf("%s without pooler mode through a transaction pooler: opened", name)
		}
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "pools transactions") || !strings.Contains(err.Error(), "stem_pooler=transaction") {
			t.Fatalf("%s without pooler mode through a transaction pooler: %v, want a refusal naming pooler mode", name, err)
		}
	}
	var tables int
	if err := sharedPool(t).QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a refused open left %d tables (%v)", tables, err)
	}

	// Nothing relies on a session: the pool prepares nothing and the
	// store does not listen. Not in pooler mode, but accepted.
	s, err := New(ctx, poolerPool(t, b), Options{Schema: schema, DisableNotify: true})
	if err != nil {
		t.Fatalf("a store relying on no session, through the pooler: %v", err)
	}
	s.Close()

	// Pooler mode refuses an exec mode that prepares named statements.
	if s, err := Open(ctx, b.URL()+"&default_query_exec_mode=cache_statement", Options{Schema: schema, TransactionPooler: true}); !errors.Is(err, storage.ErrInvalidArgument) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open in pooler mode with default_query_exec_mode=cache_statement: %v, want ErrInvalidArgument", err)
	}
	if s, err := New(ctx, plain, Options{Schema: schema, TransactionPooler: true}); !errors.Is(err, storage.ErrInvalidArgument) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("New in pooler mode on a pool in pgx's default mode: %v, want ErrInvalidArgument", err)
	}

	// The direct server is not taken for a pooler.
	if pooled, err := direct.txPooled(ctx); err != nil || pooled {
		t.Fatalf("the direct server is taken for a transaction pooler: %v, %v", pooled, err)
	}
}

// TestPoolerOpenParams: Open in pooler mode prepares nothing (the pool's
// mode is CacheDescribe, or the URL's safe one), and refuses a
// misspelled stem_ parameter naming the new ones.
func TestPoolerOpenParams(t *testing.T) {
	b := bouncer(t)
	ctx := t.Context()
	schema := freshSchema(t)
	for url, want := range map[string]pgx.QueryExecMode{
		b.URL(): pgx.QueryExecModeCacheDescribe,
		b.URL() + "&default_query_exec_mode=exec": pgx.QueryExecModeExec,
	} {
		s, err := Open(ctx, url, Options{Schema: schema, TransactionPooler: true})
		if err != nil {
			t.Fatalf("Open(%s) in pooler mode: %v", url, err)
		}
		got := s.Pool().Config().ConnConfig.DefaultQueryExecMode
		s.Close()
		if got != want {
			t.Fatalf("Open(%s) in pooler mode: exec mode %v, want %v", url, got, want)
		}
	}
	for url, want := range map[string]string{
		b.URL() + "&stem_poolr=transaction":  "did you mean stem_pooler?",
		b.URL() + "&stem_listen_ur=x":        "did you mean stem_listen_url?",
		b.URL() + "&stem_pooler=transaction": "stem_pooler",
	} {
		if _, err := Open(ctx, url, Options{Schema: schema}); !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open(%s): %v, want %q", url, err, want)
		}
	}
	if _, err := Open(ctx, b.URL(), Options{Schema: schema, TransactionPooler: true, ListenURL: "postgres://x@127.0.0.1:5432/x?stem_schema=y"}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a ListenURL with a stem_ parameter: %v, want ErrInvalidArgument", err)
	}
}
