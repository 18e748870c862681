package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/internal/gen"
	"github.com/stemflow/stem/internal/gen/gentest"
)

// shopV1 is the workflow the runs in the store were started and parked
// by: reserve, then a sleep of an hour, then charge. The tests edit it
// where it says so.
const shopV1 = `// Package shop sells.
package shop

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

// Steps holds what the steps need.
type Steps struct{ Name string }

// Order is an order.
type Order struct {
	ID string ` + "`json:\"id\"`" + `
}

// Buy reserves the order, cools off for an hour, and charges.
//
//stem:workflow name=shop.buy
func Buy(ctx *BuyContext, o Order) (string, error) {
	hold, err := ctx.Reserve(o)
	if err != nil {
		return "", err
	}
	// BEFORE THE PARK
	if err := ctx.Sleep("cool-off", time.Hour); err != nil {
		return "", err
	}
	return ctx.Charge(hold)
}

// Reserve reserves.
//
//stem:step name=reserve
func (s *Steps) Reserve(ctx runtime.StepContext, o Order) (string, error) { return "hold-" + o.ID, nil }

// Charge charges.
//
//stem:step name=charge
func (s *Steps) Charge(ctx runtime.StepContext, hold string) (string, error) { return "paid " + hold, nil }
`

// seedProgram starts the runs named on its command line in the SQLite
// store at $SEED_STORE, with the codec key in $SEED_CODEC_KEY (hex) if
// set, and works them until each sleeps.
const seedProgram = `package main

import (
	"context"
	"encoding/hex"
	"log"
	"os"
	"time"

	"example.com/stemcase/shop"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/storeurl"
)

func main() {
	ctx := context.Background()
	st, err := storeurl.Open(ctx, os.Getenv("SEED_STORE"))
	if err != nil {
		log.Fatal(err)
	}
	var codec runtime.Codec
	if k := os.Getenv("SEED_CODEC_KEY"); k != "" {
		key, _ := hex.DecodeString(k)
		if codec, err = runtime.NewAESGCMCodec(key); err != nil {
			log.Fatal(err)
		}
	}
	e, err := runtime.New(runtime.Config{Store: st, Codec: codec, PollInterval: 10 * time.Millisecond, ShutdownGrace: -1})
	if err != nil {
		log.Fatal(err)
	}
	if err := shop.RegisterWorkflows(e, &shop.Steps{}); err != nil {
		log.Fatal(err)
	}
	for _, id := range os.Args[1:] {
		if _, err := shop.StartBuy(ctx, e, shop.Order{ID: id}, runtime.WithID(id)); err != nil {
			log.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(runCtx) }()
	for _, id := range os.Args[1:] {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			info, err := e.Get(ctx, id)
			if err == nil && info.Status == runtime.StatusWaiting {
				break
			}
			if time.Now().After(deadline) {
				log.Fatalf("run %s never slept: %+v %v", id, info, err)
			}
		}
	}
	stop()
	<-done
	e.Close()
	st.Close()
}
`

// shopModule is a module with package shop at shopV1, generated, and two
// SQLite stores holding runs of it parked at the sleep: one plain, one
// sealed with a codec key; and, when the test servers are named, a
// Postgres schema and a Redis prefix holding the same plain runs.
type shopModule struct {
	dir           string
	plain, sealed string
	key           string
	// servers are the Postgres and Redis stores' URLs, by name.
	servers map[string]string
}

func newShopModule(t *testing.T) *shopModule {
	t.Helper()
	m := &shopModule{dir: gentest.Module(t, "")}
	m.write(t, shopV1)
	m.generate(t)
	writeTestFile(t, filepath.Join(m.dir, "seed", "main.go"), seedProgram)
	if out, err := gentest.Go(m.dir, "build", "-o", filepath.Join(t.TempDir(), "seed"), "./seed"); err != nil {
		t.Fatal(out, err)
	}
	stores := t.TempDir()
	m.plain, m.sealed = filepath.Join(stores, "plain.db"), filepath.Join(stores, "sealed.db")
	m.key = hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	seed := func(store, key string, ids ...string) {
		t.Helper()
		t.Setenv("SEED_STORE", store)
		t.Setenv("SEED_CODEC_KEY", key)
		if out, err := gentest.Go(m.dir, append([]string{"run", "./seed"}, ids...)...); err != nil {
			t.Fatal(out, err)
		}
	}
	seed(m.plain, "", "order-1", "order-2")
	seed(m.sealed, m.key, "order-s")
	m.servers = map[string]string{}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	if base := os.Getenv("STEM_TEST_POSTGRES_URL"); base != "" {
		schema := "stem_cli_check_" + suffix
		t.Cleanup(func() { dropPgSchema(t, base, schema) })
		m.servers["postgres"] = withParam(base, "stem_schema", schema)
	}
	if base := os.Getenv("STEM_TEST_REDIS_URL"); base != "" {
		prefix := "stem-cli-check-" + suffix + ":"
		cleanRedisPrefix(t, prefix)
		m.servers["redis"] = withParam(base, "stem_prefix", prefix)
	}
	for _, u := range m.servers {
		seed(u, "", "order-1", "order-2")
	}
	if err := os.RemoveAll(filepath.Join(m.dir, "seed")); err != nil {
		t.Fatal(err)
	}
	return m
}

// write sets package shop's source.
func (m *shopModule) write(t *testing.T, src string) {
	t.Helper()
	writeTestFile(t, filepath.Join(m.dir, "shop", "shop.go"), src)
}

// generate runs stemgen on package shop, as go generate would.
func (m *shopModule) generate(t *testing.T) {
	t.Helper()
	m.generateAt(t, "./shop")
}

// generateAt runs stemgen on a package of the module.
func (m *shopModule) generateAt(t *testing.T, pkg string) {
	t.Helper()
	res, err := gen.Generate(context.Background(), gen.Config{Dir: m.dir, Env: gentest.Env(), Patterns: []string{pkg}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("generate: %v", res.Diagnostics)
	}
	if _, err := gen.Commit(res.Files); err != nil {
		t.Fatal(err)
	}
}

// storesToCheck returns the stores holding the plain runs: the SQLite
// file and the servers', by name.
func (m *shopModule) storesToCheck() map[string]string {
	all := map[string]string{"sqlite": m.plain}
	for name, u := range m.servers {
		all[name] = u
	}
	return all
}

// leftovers fails the test if stem check left its program in the module.
func (m *shopModule) leftovers(t *testing.T) {
	t.Helper()
	if found, _ := filepath.Glob(filepath.Join(m.dir, programDir+"*")); len(found) > 0 {
		t.Errorf("stem check left %v", found)
	}
}

// withParam adds the query parameter name=value to a store URL.
func withParam(u, name, value string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + name + "=" + value
}

// dropPgSchema drops a schema a test made on the Postgres server at base.
func dropPgSchema(t *testing.T, base, schema string) {
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		t.Logf("dropping schema %s: %v", schema, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Logf("dropping schema %s: %v", schema, err)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stem check replays the runs in flight through the build's code: runs
// parked by the code as it is pass; a step inserted before the park is
// caught at the run's first divergent call with both keys; a renamed
// workflow's runs are named; runs it cannot open or import are not
// judged; a program that fails is not either, with its output; an
// interrupt removes the program; --manifest-only judges from the
// manifests alone and says so. (Code changed without go generate:
// TestCheckFresh.)
func TestCheckReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs in a temporary module")
	}
	for k, v := range map[string]string{"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOWORK": "off", "STEM_STORE": "", "STEM_CODEC_KEY": ""} {
		t.Setenv(k, v)
	}
	m := newShopModule(t)
	t.Chdir(m.dir)
	check := func(t *testing.T, code int, args ...string) string {
		t.Helper()
		start := time.Now()
		out, errOut := cliAt(t, code, append([]string{"check"}, args...)...)
		t.Logf("stem check %s: exit %d in %v\n%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out)
		if errOut != "" {
			t.Errorf("stderr: %s", errOut)
		}
		m.leftovers(t)
		return out
	}
	contains := func(t *testing.T, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}
	before := fileSum(t, m.plain)

	t.Run("unchanged", func(t *testing.T) {
		for name, store := range m.storesToCheck() {
			out := check(t, 0, "--store", store)
			if want := "0 of 2 in-flight runs could not continue (checked against 1 manifest)\nreplayed 2 runs through the build's code\n"; out != want {
				t.Errorf("%s: got:\n%s\nwant:\n%s", name, out, want)
			}
		}
	})

	t.Run("manifest-only", func(t *testing.T) {
		out := check(t, 0, "--store", m.plain, "--manifest-only")
		if want := "0 of 2 in-flight runs could not continue (checked against 1 manifest)\n" + manifestOnlyLine; out != want {
			t.Errorf("got:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("sealed", func(t *testing.T) {
		out := check(t, 4, "--store", m.sealed)
		contains(t, out, "replayed 0 runs through the build's code\n",
			"not replayed: order-s (shop.buy): sealed payload cannot be opened: ",
			"could not judge: 1 run in flight could not be replayed through the build's code (a run sealed by the workers' codec needs their key: --codec-key, --codec-key-file or $STEM_CODEC_KEY)\n")
		// With the key the workers seal with, the program opens them.
		t.Setenv("STEM_CODEC_KEY", m.key)
		out = check(t, 0, "--store", m.sealed, "--json", "./...")
		var rep jsonCheck
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Checked != 1 || rep.Replayed != 1 || rep.ManifestOnly || len(rep.NotReplayed) != 0 {
			t.Errorf("--json: %+v %v", rep, err)
		}
	})

	// The next build audits each order before the park.
	inserted := strings.Replace(shopV1, "// BEFORE THE PARK", "if _, err := ctx.Audit(o); err != nil {\n\t\treturn \"\", err\n\t}", 1) + `
// Audit audits.
//
//stem:step name=audit
func (s *Steps) Audit(ctx runtime.StepContext, o Order) (string, error) { return "ok", nil }
`

	t.Run("step inserted before the park", func(t *testing.T) {
		m.write(t, inserted)
		m.generate(t)
		for _, store := range m.storesToCheck() {
			out := check(t, 3, "--store", store)
			contains(t, out,
				"order-1 (shop.buy@v1, waiting): audit@v1: replay diverges: the code calls audit@v1, which the run did not record, where the run recorded ",
				"order-2 (shop.buy@v1, waiting): audit@v1: ",
				"2 of 2 in-flight runs could not continue (checked against 1 manifest)\nreplayed 2 runs through the build's code\n",
				"what to do:\n  audit@v1 (2 runs): ")
		}
	})

	t.Run("workflow renamed", func(t *testing.T) {
		m.write(t, strings.Replace(shopV1, "name=shop.buy", "name=shop.purchase", 1))
		m.generate(t)
		out := check(t, 3, "--store", m.plain)
		contains(t, out,
			"order-1 (shop.buy@v1, waiting): shop.buy@v1 is retired in the build: no function is annotated with it (it has no current version of the workflow)\n",
			"order-2 (shop.buy@v1, waiting): shop.buy@v1 is retired",
			"2 of 2 in-flight runs could not continue")
	})

	t.Run("program fails", func(t *testing.T) {
		// A second package registers a workflow of the same name and
		// version: the program cannot register both, and says so.
		m.write(t, shopV1)
		m.generate(t)
		writeTestFile(t, filepath.Join(m.dir, "shop2", "shop.go"), strings.Replace(shopV1, "package shop", "package shop2", 1))
		m.generateAt(t, "./shop2")
		defer os.RemoveAll(filepath.Join(m.dir, "shop2"))
		out := check(t, 4, "--store", m.plain)
		contains(t, out, "register the workflows of example.com/stemcase/shop2: ",
			"could not judge: the replay program of module example.com/stemcase failed (exit status 1)\n")
	})

	t.Run("workflow in package main", func(t *testing.T) {
		// No program can import a main package: its runs are not
		// replayed, and the check cannot judge them.
		worker := filepath.Join(m.dir, "cmd", "worker")
		writeTestFile(t, filepath.Join(worker, "main.go"), strings.Replace(shopV1, "package shop", "package main", 1)+"\nfunc main() {}\n")
		m.generateAt(t, "./cmd/worker")
		defer os.RemoveAll(filepath.Join(m.dir, "cmd"))
		out := check(t, 4, "--store", m.plain, "./cmd/worker")
		contains(t, out, "not replayed: order-1 (shop.buy): its workflow is declared in package main ("+filepath.Join("cmd", "worker")+"), which stem check cannot import to replay it: move the workflow to a package of its own\n",
			"could not judge: 2 runs in flight could not be replayed through the build's code\n")
	})

	t.Run("interrupted", func(t *testing.T) {
		// The test process takes the interrupt too, so that one arriving
		// after the check stopped watching does not end it.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		defer signal.Stop(sig)
		go func() {
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if found, _ := filepath.Glob(filepath.Join(m.dir, programDir+"*")); len(found) > 0 {
					syscall.Kill(os.Getpid(), syscall.SIGINT)
					return
				}
			}
		}()
		out := check(t, 4, "--store", m.plain)
		if out != "could not judge: interrupted\n" {
			t.Errorf("got %q", out)
		}
	})

	if fileSum(t, m.plain) != before {
		t.Error("stem check changed the store")
	}
}
