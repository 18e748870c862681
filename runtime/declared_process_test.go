package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/storeurl"
)

// xprocStoreEnv carries the store URL to the worker process the test
// starts (the test binary again); set, the test is that worker.
const xprocStoreEnv = "STEM_TEST_XPROC_STORE"

// registerXproc registers the workflow the worker runs: a step fails with
// declared errors, and the workflow passes the failure on.
func registerXproc(e *runtime.Engine) error {
	return runtime.Register(e, "xproc.charge", func(c *runtime.WorkflowContext, _ string) (string, error) {
		_, err := runtime.Step(c, "charge@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "", runtime.Permanent(fmt.Errorf("charge: %w; %w", errCardDeclined, &cardError{PAN: "4111"}))
		})
		return "", fmt.Errorf("order: %w", err)
	})
}

// A run a worker process ended with declared errors matches them, fields
// and all, from Result in another process: this one, which never ran it.
// On each store that processes can share: a SQLite file, and Postgres and
// Redis when the test services are configured.
func TestDeclaredErrorsFromAnotherProcess(t *testing.T) {
	if url := os.Getenv(xprocStoreEnv); url != "" {
		xprocWorker(t, url)
		return
	}
	t.Parallel()
	stores := map[string]string{"sqlite": filepath.Join(t.TempDir(), "xproc.db")}
	suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano())
	if u := os.Getenv("STEM_TEST_POSTGRES_URL"); u != "" {
		schema := "stem_xproc_" + suffix
		stores["postgres"] = u + map[bool]string{true: "&", false: "?"}[strings.Contains(u, "?")] + "stem_schema=" + schema
		t.Cleanup(func() {
			if conn, err := pgx.Connect(context.Background(), u); err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				_ = conn.Close(context.Background())
			}
		})
	} else {
		t.Log("STEM_TEST_POSTGRES_URL not set: the Postgres form is skipped")
	}
	if u := os.Getenv("STEM_TEST_REDIS_URL"); u != "" {
		prefix := "stem-xproc-" + suffix + ":"
		stores["redis"] = u + "?stem_prefix=" + prefix
		t.Cleanup(func() { dropRedisPrefix(u, prefix) })
	} else {
		t.Log("STEM_TEST_REDIS_URL not set: the Redis form is skipped")
	}
	for name, url := range stores {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDeclaredErrorsFromAnotherProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), xprocStoreEnv+"="+url)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the worker process failed: %v\n%s", err, out)
			}
			ctx := waitCtx(t)
			st, err := storeurl.Open(ctx, url)
			must(t, err)
			t.Cleanup(func() { _ = st.Close() })
			e, err := runtime.New(runtime.Config{Store: st})
			must(t, err)
			t.Cleanup(func() { _ = e.Close() })
			run, err := runtime.Get[string](ctx, e, "xproc.charge", "x1")
			must(t, err)
			_, err = run.Result(ctx)
			var ce *cardError
			if !errors.Is(err, errCardDeclined) || !errors.As(err, &ce) || ce.PAN != "4111" || !runtime.IsPermanent(err) ||
				err.Error() != "order: charge: card declined; card rejected" {
				t.Fatalf("Result read in another process = %v: want the declared value and type, the field, permanent, the text", err)
			}
		})
	}
}

// xprocWorker is the worker process: it runs x1 to its end and exits.
func xprocWorker(t *testing.T, url string) {
	ctx := waitCtx(t)
	st, err := storeurl.Open(ctx, url)
	must(t, err)
	defer st.Close()
	e, err := runtime.New(runtime.Config{Store: st, PollInterval: 5 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond})
	must(t, err)
	defer e.Close()
	must(t, registerXproc(e))
	stop := start(t, e)
	defer stop()
	run, err := runtime.Start[string, string](ctx, e, "xproc.charge", "", runtime.WithID("x1"))
	must(t, err)
	if _, err := run.Result(ctx); err == nil {
		t.Fatal("the run succeeded; it must fail with the declared errors")
	}
}

// dropRedisPrefix deletes the keys under prefix.
func dropRedisPrefix(url, prefix string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}
