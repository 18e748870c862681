package gen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen/gentest"
)

const awaitsPing = `package p

// Ping pings.
//
//stem:event topic=p.ping
type Ping struct{}

// Wait waits for a ping.
//
//stem:workflow name=p.wait
func Wait(ctx *WaitContext, n int) (int, error) {
	_, err := ctx.AwaitPing("ping", 0)
	return n, err
}
`

// sendsPing is a package of the case module that sends Ping through an
// import of p.
const sendsPing = `package %s

import (
	"context"

	"example.com/stemcase"
	"github.com/stemflow/stem/runtime"
)

func Send(ctx context.Context, e *runtime.Engine) error {
	return p.SendPing(ctx, e, "run", p.Ping{})
}
`

// TestSendersOfTheModule: a sender counts in any package of the module,
// but not under testdata, vendor, hidden directories or nested modules.
func TestSendersOfTheModule(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "p.go"), awaitsPing)
	for _, sub := range []string{"testdata/x", "vendor/x", ".hidden/x", "_ignored/x", "nested/x"} {
		writeFile(t, filepath.Join(dir, sub, "x.go"), strings.ReplaceAll(sendsPing, "%s", "x"))
	}
	writeFile(t, filepath.Join(dir, "nested", "go.mod"), "module example.com/nested\n")
	res := generate(t, dir)
	if len(res.Diagnostics) > 0 {
		t.Fatal(res.Diagnostics)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0].Rel(dir), "p.go:12:16: workflow p.wait awaits event Ping") {
		t.Fatalf("warnings = %v, want one at p.go:12:16", res.Warnings)
	}

	writeFile(t, filepath.Join(dir, "cmd", "send", "send.go"), strings.ReplaceAll(sendsPing, "%s", "main"))
	res = generate(t, dir)
	if len(res.Diagnostics) > 0 || len(res.Warnings) > 0 {
		t.Fatalf("with a sender in cmd/send: diagnostics %v, warnings %v", res.Diagnostics, res.Warnings)
	}
	page := string(fileContent(t, res, filepath.Join(dir, DocsFileName)))
	if !strings.Contains(page, "| `p.ping` | `Ping` | send: `main.Send` in [cmd/send/send.go](cmd/send/send.go) | `p.wait` (wait `ping`) |") {
		t.Errorf("the page does not name the sender:\n%s", page)
	}
}

// sendsPingTx sends Ping in the ways the transactional and
// signal-with-start API has: typed, and through the runtime.
const sendsPingTx = `package x

import (
	"context"

	"example.com/stemcase"
	"github.com/stemflow/stem/runtime"
)

func TypedTx(ctx context.Context, e *runtime.Engine, tx any) error {
	return p.SendPingTx(ctx, e, tx, "run", p.Ping{})
}

func TypedEmitTx(ctx context.Context, e *runtime.Engine, tx any) (int, error) {
	return p.EmitPingTx(ctx, e, tx, p.Ping{})
}

func TypedOrStart(ctx context.Context, e *runtime.Engine) error {
	_, err := p.SendPingOrStartWait(ctx, e, "run", 1, p.Ping{})
	return err
}

func EngineTx(ctx context.Context, e *runtime.Engine, tx any) error {
	if _, err := e.EmitTx(ctx, tx, "p.ping", nil); err != nil {
		return err
	}
	return e.SendEventTx(ctx, tx, "run", p.PingTopic, nil)
}

func RuntimeOrStart(ctx context.Context, e *runtime.Engine) error {
	_, err := runtime.SendOrStart[int, int](ctx, e, p.WaitWorkflowName, "run", 1, "p.ping", nil)
	return err
}

func RuntimeOrStartTx(ctx context.Context, e *runtime.Engine, tx any) error {
	_, err := runtime.SendOrStartTx[int, int](ctx, e, tx, p.WaitWorkflowName, "run", 1, p.PingTopic, nil)
	return err
}
`

// TestSendersTx: the page names the senders that send or emit in the
// application's transaction, or start the run with the event.
func TestSendersTx(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "p.go"), awaitsPing)
	writeFile(t, filepath.Join(dir, "x", "x.go"), sendsPingTx)
	res := generate(t, dir)
	if len(res.Diagnostics) > 0 || len(res.Warnings) > 0 {
		t.Fatalf("diagnostics %v, warnings %v", res.Diagnostics, res.Warnings)
	}
	page := string(fileContent(t, res, filepath.Join(dir, DocsFileName)))
	for _, want := range []string{
		"emit: `x.EngineTx` in [x/x.go](x/x.go)", "send: `x.EngineTx` in [x/x.go](x/x.go)",
		"send: `x.RuntimeOrStart` in [x/x.go](x/x.go)", "send: `x.RuntimeOrStartTx` in [x/x.go](x/x.go)",
		"emit: `x.TypedEmitTx` in [x/x.go](x/x.go)",
		"send: `x.TypedOrStart` in [x/x.go](x/x.go)", "send: `x.TypedTx` in [x/x.go](x/x.go)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not name %s:\n%s", want, page)
		}
	}
}

func fileContent(t *testing.T, res *Result, path string) []byte {
	t.Helper()
	i := slices.IndexFunc(res.Files, func(f File) bool { return f.Path == path })
	if i < 0 {
		t.Fatalf("no file %s in %v", path, res.Files)
	}
	return res.Files[i].Content
}

// TestForeignDocsFile: stemgen does not overwrite a page it did not write,
// nor remove it when the annotations go.
func TestForeignDocsFile(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "p.go"), strings.ReplaceAll(okPackage, "%s", "p"))
	mine := filepath.Join(dir, DocsFileName)
	writeFile(t, mine, "# My workflows\n")
	res := generate(t, dir)
	want := []string{DocsFileName + ": " + DocsFileName + " exists and was not generated by stemgen; rename it so stemgen can write its own"}
	if got := diagStrings(res, dir); !slices.Equal(got, want) || len(res.Files) > 0 {
		t.Errorf("diagnostics = %q, files %v; want %q and no file", got, res.Files, want)
	}

	writeFile(t, filepath.Join(dir, "p.go"), "package p\n")
	res = generate(t, dir)
	if len(res.Diagnostics) > 0 || len(res.Files) > 0 {
		t.Errorf("without annotations: diagnostics %v, files %v; want none", res.Diagnostics, res.Files)
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "# My workflows\n" {
		t.Errorf("%s = %q, %v; want it untouched", DocsFileName, b, err)
	}
}

func TestMermaidText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"pack@v1#i":           "pack@v1#35;i",
		`say "hi" <b> & | x`:  "say #34;hi#34; #60;b#62; #38; #124; x",
		"a`b` {c} [d]":        "a#96;b#96; #123;c#125; #91;d#93;",
		"two\nlines\tand tab": "two lines and tab",
		"docs/shipped:v1":     "docs/shipped:v1",
	} {
		if got := mermaidText(in); got != want {
			t.Errorf("mermaidText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMarkdownText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Ship *ships* the `order` <now> | x_y.": `Ship \*ships\* the \` + "`" + `order\` + "`" + ` \<now\> \| x\_y.`,
		"# not a heading":                       `\# not a heading`,
		"- not a list":                          `\- not a list`,
		"1. not a list either, v1.2":            `1\. not a list either, v1.2`,
		"[link](x) & ~strike~!":                 `\[link\](x) \& \~strike\~\!`,
	} {
		if got := mdText(in); got != want {
			t.Errorf("mdText(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"Order":       "`Order`",
		"a`b":         "``a`b``",
		"`x`":         "`` `x` ``",
		"map[K]V":     "`map[K]V`",
		"interface{}": "`interface{}`",
	} {
		if got := code(in); got != want {
			t.Errorf("code(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cell(code("int | string")); got != "`int \\| string`" {
		t.Errorf("cell = %q", got)
	}
	if got := link("sub dir/a_b.go"); got != "[sub dir/a\\_b.go](sub%20dir/a_b.go)" {
		t.Errorf("link = %q", got)
	}
}
