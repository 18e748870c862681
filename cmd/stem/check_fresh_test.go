package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen"
	"github.com/stemflow/stem/internal/gen/gentest"
	"github.com/stemflow/stem/storage"
)

const freshShop = `// Package shop sells.
package shop

import "github.com/stemflow/stem/runtime"

// Steps holds what the steps need.
type Steps struct{}

// Order is an order.
type Order struct {
	ID string ` + "`json:\"id\"`" + `
}

// Buy reserves the order.
//
//stem:workflow name=shop.buy
func Buy(ctx *BuyContext, o Order) (string, error) { return ctx.Reserve(o) }

// Reserve reserves.
//
//stem:step name=reserve
func (s *Steps) Reserve(ctx runtime.StepContext, o Order) (string, error) { return "hold-" + o.ID, nil }
`

// stem check judges only a build whose manifests are what its code
// generates (the runs, checked against the manifests and replayed, pass): code changed without go generate, or that does not
// generate, exits 4 and says why; --manifest-only judges anyway.
func TestCheckFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and builds code in a temporary module")
	}
	for k, v := range map[string]string{"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOWORK": "off"} {
		t.Setenv(k, v)
	}
	db := storeWith(t, storedRun{id: "order-1", workflow: "shop.buy", version: 1, input: `{"id":"1"}`, steps: []storage.Checkpoint{stepCP("reserve@v1", `"hold-1"`)}})
	dir := gentest.Module(t, "")
	write := func(src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "shop"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shop", "shop.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(freshShop)
	res, err := gen.Generate(context.Background(), gen.Config{Dir: dir, Env: gentest.Env(), Patterns: []string{"./shop"}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatal(err, res.Diagnostics)
	}
	if _, err := gen.Commit(res.Files); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	if out, _ := cliAt(t, 0, "--store", db, "check"); out != "0 of 1 in-flight runs could not continue (checked against 1 manifest)\nreplayed 1 run through the build's code\n" {
		t.Errorf("unchanged: %q", out)
	}

	write(strings.Replace(freshShop, "return ctx.Reserve(o)", `return ctx.Charge(o)`, 1) + `
// Charge charges.
//
//stem:step name=charge
func (s *Steps) Charge(ctx runtime.StepContext, o Order) (string, error) { return "paid", nil }
`)
	out, _ := cliAt(t, 4, "--store", db, "check")
	for _, want := range []string{
		filepath.Join("shop", "stem_gen.go") + " is out of date: run go generate\n",
		filepath.Join("shop", "stem.manifest.json") + " is out of date: run go generate\n",
		"could not judge: 4 generated files are out of date: the build's manifests may not describe its code; run go generate, or pass --manifest-only to judge from the manifests alone as they are\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stale: lacks %q:\n%s", want, out)
		}
	}
	out, _ = cliAt(t, 4, "--store", db, "check", "--json")
	var rep jsonCannotJudge
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !strings.Contains(rep.CouldNotJudge, "out of date") || len(rep.Details) != 4 {
		t.Errorf("stale, --json: %+v %v", rep, err)
	}
	if out, _ := cliAt(t, 0, "--store", db, "check", "--manifest-only"); !strings.HasSuffix(out, manifestOnlyLine) {
		t.Errorf("stale, --manifest-only:\n%s", out)
	}

	write(strings.Replace(freshShop, "ID string", "ID int", 1))
	out, _ = cliAt(t, 4, "--store", db, "check")
	for _, want := range []string{
		filepath.Join("shop", "shop.go") + ":16:1: workflow shop.buy@v1 changed its input shape from {id:string} to {id:int}, incompatibly for runs in flight", "First, add a new workflow version=",
		"could not judge: the build's code does not generate (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("does not generate: lacks %q:\n%s", want, out)
		}
	}
}
