package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
)

// TestOpenSilentServer: against a server that accepts connections and never
// answers, Open fails once the connect timeout has passed, naming the
// server and what it was doing, instead of hanging; with OpenExisting too.
func TestOpenSilentServer(t *testing.T) {
	t.Parallel()
	addr := testserver.Silent(t)
	url := "postgres://stem:secret@" + addr + "/db?sslmode=disable"
	for _, existing := range []bool{false, true} {
		opts := Options{ConnectTimeout: 200 * time.Millisecond, OpenExisting: existing, Logger: quietLogger()}
		err := testserver.Within(t, "Open", func() error {
			s, err := Open(context.Background(), url, opts)
			if err == nil {
				s.Close()
			}
			return err
		})
		if err == nil {
			t.Fatalf("OpenExisting %v: Open of a silent server succeeded", existing)
		}
		op := "migrate schema stem on " + addr
		if existing {
			op = "open existing schema stem on " + addr
		}
		if !strings.Contains(err.Error(), op) || strings.Contains(err.Error(), "secret") {
			t.Errorf("OpenExisting %v: error %q should name %q (and never the password)", existing, err, op)
		}
	}
}

// TestDefaultTimeouts: without options, a connection attempt is bounded by
// DefaultConnectTimeout, and the URL's connect_timeout is kept.
func TestDefaultTimeouts(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		url  string
		want time.Duration
	}{
		{url, DefaultConnectTimeout},
		{url + sep + "connect_timeout=7", 7 * time.Second},
	} {
		s, err := Open(context.Background(), c.url, Options{Schema: freshSchema(t), DisableNotify: true, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Pool().Config().ConnConfig.ConnectTimeout; got != c.want {
			t.Errorf("connect timeout %v, want %v", got, c.want)
		}
		s.Close()
	}
}

// TestFrozenServer: while the server is frozen (SIGSTOP: connections are
// accepted, nothing answers), every call returns once its call timeout has
// passed, with an error naming the server, the operation and the timeout;
// the store logs "not answering" once for all of them, and "answering
// again" once when the server is back.
func TestFrozenServer(t *testing.T) {
	t.Parallel()
	pg := testserver.Postgres(t)
	logs, logger := testserver.CaptureLogs(slog.LevelDebug)
	ctx := context.Background()
	// The schema is migrated first, with the default timeout: a loaded
	// machine may take longer than the frozen calls' bound to apply it.
	migrated, err := Open(ctx, pg.URL(), Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	migrated.Close()
	s, err := Open(ctx, pg.URL(), Options{CallTimeout: 2 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Should a call hang, thaw the server before the store closes, so the
	// test fails instead of hanging in Close.
	t.Cleanup(pg.Thaw)
	// The listener too, which pings a quiet connection.
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	s.Notifications(sub)
	testserver.Within(t, "LISTEN", func() struct{} { <-s.listener.ready; return struct{}{} })
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("127.0.0.1:%d", pg.Port())

	pg.Freeze()
	calls := []struct {
		op   string
		call func() error
	}{
		{"get run", func() error { _, err := s.GetRun(ctx, "r1"); return err }},
		{"list runs", func() error { _, err := s.ListRuns(ctx, storage.ListRunsQuery{}); return err }},
		{"claim", func() error {
			_, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
			return err
		}},
		{"pause", func() error { return s.Pause(ctx, "r1") }},
	}
	for _, c := range calls {
		err := testserver.Within(t, c.op, c.call)
		want := "pgstore: " + c.op + " on " + host + ": "
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "no answer within 2s") {
			t.Errorf("%s on a frozen server: %v, want an error naming %q and the timeout", c.op, err, want)
		}
	}
	if n := logs.Count("not answering since"); n != 1 {
		t.Errorf(`%d "not answering" lines for %d failed calls, want 1:\n%s`, n, len(calls), logs)
	}
	if n := logs.Count("level=WARN msg=\"pgstore: database at " + host + " not answering"); n != 1 {
		t.Errorf("the warning does not name the server at warn level:\n%s", logs)
	}
	// The listener, waiting without a deadline, notices too (it pings a
	// connection quiet for a call timeout) and reconnects.
	testserver.Within(t, "the listener noticing", func() struct{} {
		for logs.Count("notification listener failed") == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		return struct{}{}
	})

	pg.Thaw()
	testserver.AnswersAgain(t, "get run", func() error { _, err := s.GetRun(ctx, "r1"); return err })
	if _, err := s.ListRuns(ctx, storage.ListRunsQuery{}); err != nil {
		t.Fatal(err)
	}
	if n := logs.Count("answering again after"); n != 1 {
		t.Errorf(`%d "answering again" lines after the thaw, want 1:\n%s`, n, logs)
	}
	if n := logs.Count("not answering since"); n != 1 {
		t.Errorf(`%d "not answering" lines in all, want 1:\n%s`, n, logs)
	}
	t.Logf("the store's log:\n%s", logs)
}

// TestOpenExisting: with OpenExisting, a schema that does not exist, one
// holding another application's tables, and one at a version this code
// does not read are refused with storage.ErrNotStore, naming the server
// and the schema, and nothing is created; a current store opens.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testURL(t)
	pool := sharedPool(t)
	host := hostOf(&pool.Config().ConnConfig.Config)
	tables := func(schema string) (schemas, tables int) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1),
			(SELECT count(*) FROM information_schema.tables WHERE table_schema = $1)`, schema).Scan(&schemas, &tables)
		if err != nil {
			t.Fatal(err)
		}
		return schemas, tables
	}
	openExisting := func(schema string) error {
		t.Helper()
		s, err := Open(ctx, url, Options{Schema: schema, OpenExisting: true, Logger: quietLogger()})
		if err == nil {
			s.Close()
		}
		return err
	}
	refused := func(schema, why string) {
		t.Helper()
		err := openExisting(schema)
		if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), schema) || !strings.Contains(err.Error(), why) {
			t.Fatalf("OpenExisting of schema %s: %v, want ErrNotStore naming %s, the schema and %q", schema, err, host, why)
		}
	}

	missing := freshSchema(t)
	refused(missing, "no such schema")
	if n, m := tables(missing); n != 0 || m != 0 {
		t.Fatalf("OpenExisting created schema %s (%d) or tables (%d)", missing, n, m)
	}

	foreign := freshSchema(t)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+foreign+`; CREATE TABLE `+foreign+`.orders (id int)`); err != nil {
		t.Fatal(err)
	}
	refused(foreign, "holds no Stem store")
	if _, m := tables(foreign); m != 1 {
		t.Fatalf("OpenExisting changed the foreign schema: %d tables", m)
	}

	schema := freshSchema(t)
	s := newTestStore(t, Options{Schema: schema})
	if err := openExisting(schema); err != nil {
		t.Fatalf("OpenExisting of a current store: %v", err)
	}
	latest := 0
	if err := pool.QueryRow(ctx, `SELECT max(version) FROM `+s.schema+`.migrations`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.schema+`.migrations (version, name) VALUES ($1, 'from_the_future')`, latest+1); err != nil {
		t.Fatal(err)
	}
	refused(schema, "upgrade the code")
	if err := openExisting(schema); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("OpenExisting of a newer schema: %v, want ErrSchemaTooNew too", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM `+s.schema+`.migrations WHERE version >= $1`, latest); err != nil {
		t.Fatal(err)
	}
	refused(schema, "upgrades it")
	var left int
	if err := pool.QueryRow(ctx, `SELECT max(version) FROM `+s.schema+`.migrations`).Scan(&left); err != nil || left != latest-1 {
		t.Fatalf("OpenExisting of an older schema migrated it: version %d, %v", left, err)
	}
}
