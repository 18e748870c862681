package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// uiProcess is stem ui running as a child process of the test.
type uiProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // the URL it said it serves on, without a trailing slash
	mu   sync.Mutex
	out  bytes.Buffer // stdout after the banner's first line
	done chan struct{}
	err  error
}

var servingLine = regexp.MustCompile(`^serving the dashboard on (http://\S+) — `)

// startUI runs stem with args (its ui command) as a child process and
// returns once it says where it serves.
func startUI(t *testing.T, args ...string) *uiProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STEM_CLI_TEST_MAIN=1", "STEM_STORE=", "STEM_CODEC_KEY=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &uiProcess{t: t, cmd: cmd, done: make(chan struct{})}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		p.mu.Lock()
		p.out.WriteString(line)
		p.mu.Unlock()
		for {
			b, err := r.ReadString('\n')
			p.mu.Lock()
			p.out.WriteString(b)
			p.mu.Unlock()
			if err != nil {
				break
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case line := <-first:
		m := servingLine.FindStringSubmatch(line)
		if m == nil {
			<-p.done
			t.Fatalf("stem %v: first line %q, want %q\nstderr: %s", args, line, "serving the dashboard on http://...", stderr.String())
		}
		p.base = m[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("stem %v said nothing within 30s; stderr: %s", args, stderr.String())
	}
	return p
}

// stop sends sig and returns the exit code and everything it printed.
func (p *uiProcess) stop(sig os.Signal) (code int, stdout string) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("stem ui did not stop within 30s of %v", sig)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(p.err, &ee):
		code = ee.ExitCode()
	case p.err != nil:
		p.t.Fatal(p.err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return code, p.out.String()
}

// get fetches path under the dashboard and returns the status and body.
func (p *uiProcess) get(path string) (int, string) {
	p.t.Helper()
	return p.getAs("", path)
}

// stem ui serves the dashboard of the store on the port it says, on
// localhost, and stops on SIGINT or SIGTERM; --read-only shows the runs
// without the actions and refuses an action's POST.
func TestUIServes(t *testing.T) {
	f := newFixture(t, nil, true)
	if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "req-1", runtime.StatusWaiting)

	p := startUI(t, "--store", f.path, "ui", "--addr", "127.0.0.1:0")
	u, err := url.Parse(p.base)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "0" || u.Port() == "" {
		t.Fatalf("stem ui --addr 127.0.0.1:0 serves on %q, want the port it took", p.base)
	}
	if code, body := p.get("/runs"); code != http.StatusOK || !strings.Contains(body, `data-run-id="req-1"`) {
		t.Fatalf("GET /runs: %d\n%s", code, body)
	}
	if code, body := p.get("/"); code != http.StatusOK || !strings.Contains(body, `id="runs"`) {
		t.Fatalf("GET / does not lead to the runs: %d\n%s", code, body)
	}
	if code, body := p.get("/runs/req-1"); code != http.StatusOK || !strings.Contains(body, `data-action="pause"`) {
		t.Fatalf("GET /runs/req-1 without the pause button: %d\n%s", code, body)
	}
	code, out := p.stop(os.Interrupt)
	if code != 0 || !strings.Contains(out, "localhost only; --addr :"+u.Port()+" listens on every interface") || !strings.HasSuffix(out, "stopped\n") {
		t.Fatalf("stem ui after SIGINT: exit %d\n%s", code, out)
	}

	ro := startUI(t, "--store", f.path, "ui", "--addr", "127.0.0.1:0", "--read-only")
	if code, body := ro.get("/runs/req-1"); code != http.StatusOK || !strings.Contains(body, `data-run-id="req-1"`) || strings.Contains(body, "data-action=") {
		t.Fatalf("read-only GET /runs/req-1: %d, want the run without actions\n%s", code, body)
	}
	resp, err := http.PostForm(ro.base+"/runs/req-1/pause", url.Values{"csrf": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	refusal, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(refusal), "read-only") {
		t.Fatalf("read-only POST pause: %d, want 403 saying the access is read-only\n%s", resp.StatusCode, refusal)
	}
	if info, err := f.e.Get(f.ctx, "req-1"); err != nil || info.Status != runtime.StatusWaiting {
		t.Fatalf("after a refused pause the run is %s (%v), want waiting", info.Status, err)
	}
	code, out = ro.stop(syscall.SIGTERM)
	if code != 0 || !strings.Contains(out, "read-only: ") || !strings.HasSuffix(out, "stopped\n") {
		t.Fatalf("stem ui --read-only after SIGTERM: exit %d\n%s", code, out)
	}
}

// Wrong calls of stem ui are refused as other commands' are; a store that
// is not there or does not answer, and a port that is taken, are one line.
func TestUIErrors(t *testing.T) {
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--adr", "127.0.0.1:0"}, "unknown flag --adr; did you mean --addr?"},
		{[]string{"ui", "--read-onyl"}, "unknown flag --read-onyl; did you mean --read-only?"},
		{[]string{"ui", "--addr", "8233"}, `--addr "8233": want HOST:PORT`},
		{[]string{"ui", "--addr", "localhost:"}, `--addr "localhost:": want HOST:PORT`},
		{[]string{"ui", "extra"}, `unexpected argument "extra"`},
		{[]string{"ui", "--allowed-host", "ok.example,stem.internal:8233"}, `--allowed-host: allowed host "stem.internal:8233": want a host name without a port`},
		{[]string{"ui", "--allowed-host", "http://stem.internal"}, `--allowed-host: allowed host "http://stem.internal": want a host name alone`},
	} {
		_, errOut := cliAt(t, 2, append([]string{"--store", missing}, c.args...)...)
		if !strings.HasPrefix(errOut, "stem ui: ") || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: stem ui [--addr HOST:PORT] [--allowed-host NAME] [--read-only]") {
			t.Fatalf("stem %v:\n%s\nwant %q and the usage", c.args, errOut, c.want)
		}
	}
	if _, errOut := cliAt(t, 1, "--store", missing, "ui"); !strings.HasPrefix(errOut, "stem: no Stem store at "+missing) || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("stem ui on no store: %q", errOut)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stem ui created the store: %v", err)
	}
	if _, errOut := cliAt(t, 1, "--store", "redis://127.0.0.1:1/0", "ui"); !strings.HasPrefix(errOut, "stem: cannot open the store redis://127.0.0.1:1/0: ") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("stem ui on a store that does not answer: %q", errOut)
	}

	f := newFixture(t, nil, false)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, errOut := f.cli(1, "ui", "--addr", taken.Addr().String())
	if want := "stem ui: cannot listen on " + taken.Addr().String() + ": "; !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("stem ui on a taken port: %q, want %q...", errOut, want)
	}
	if out, _ := cliAt(t, 0, "help", "ui"); !strings.Contains(out, "--read-only") || !strings.Contains(out, "127.0.0.1:8233") || !strings.Contains(out, "--allowed-host") || !strings.Contains(out, "DNS rebinding") {
		t.Fatalf("help ui:\n%s", out)
	}
}

// What stem ui says about where it listens: localhost only, or a warning
// that it serves more than this host.
func TestUIBanner(t *testing.T) {
	for _, c := range []struct {
		addr     *net.TCPAddr
		readOnly bool
		want     []string
		warns    bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8233}, false,
			[]string{"serving the dashboard on http://127.0.0.1:8233 — localhost only; --addr :8233 listens on every interface"}, false},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9000}, true,
			[]string{"serving the dashboard on http://[::1]:9000 — localhost only", "read-only: "}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8233}, false,
			[]string{"serving the dashboard on http://localhost:8233 — on every interface", "pause, resume, restart, terminate"}, true},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8233}, true,
			[]string{"http://192.0.2.7:8233 — on 192.0.2.7, not only to this host", "read-only: ", "answers to IP addresses and localhost only; --allowed-host NAME"}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8233}, false,
			[]string{"answers to stem.internal, .corp.example, localhost and IP addresses"}, true},
	} {
		var allowed []string
		if c.addr.IP.Equal(net.IPv4zero) {
			allowed = []string{"stem.internal", ".corp.example"}
		}
		got := strings.Join(uiBanner(c.addr, c.readOnly, allowed), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("banner for %v (read-only %v) lacks %q:\n%s", c.addr, c.readOnly, w, got)
			}
		}
		if warns := strings.Contains(got, "warning: the dashboard has no login of its own"); warns != c.warns {
			t.Errorf("banner for %v warns %v, want %v:\n%s", c.addr, warns, c.warns, got)
		}
	}
}

// getAs fetches path under the dashboard naming host in the Host header
// (none: the listener's address), as a browser at http://host/ does, and
// returns the status and body.
func (p *uiProcess) getAs(host, path string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// stem ui answers only to localhost, IP addresses and the names
// --allowed-host gives (repeated or comma-separated): a page whose name
// re-resolves to it (DNS rebinding) is refused with 421, in read-only mode
// too, and cannot act.
func TestUIAnswersOnlyToItsHosts(t *testing.T) {
	f := newFixture(t, nil, true)
	if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "req-1", runtime.StatusWaiting)

	for _, readOnly := range []bool{false, true} {
		args := []string{"--store", f.path, "ui", "--addr", "127.0.0.1:0", "--allowed-host", "stem.internal, ops.example", "--allowed-host", ".corp.example"}
		if readOnly {
			args = append(args, "--read-only")
		}
		p := startUI(t, args...)
		port := p.base[strings.LastIndexByte(p.base, ':')+1:]
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "localhost", "stem.internal:" + port, "OPS.example", "eu.corp.example:" + port, "[::1]:" + port} {
			if code, body := p.getAs(host, "/runs"); code != http.StatusOK || !strings.Contains(body, `data-run-id="req-1"`) {
				t.Errorf("read-only %v, Host %s: %d, want the runs\n%s", readOnly, host, code, body)
			}
		}
		for _, host := range []string{"evil.example:" + port, "evil.example", "stem.internal.evil.example:" + port} {
			for _, path := range []string{"/", "/runs", "/runs/req-1"} {
				if code, body := p.getAs(host, path); code != http.StatusMisdirectedRequest || strings.Contains(body, "req-1") || !strings.Contains(body, "--allowed-host") {
					t.Errorf("read-only %v, GET %s with Host %s: %d, want 421 and nothing of the runs\n%s", readOnly, path, host, code, body)
				}
			}
		}
		req, err := http.NewRequest(http.MethodPost, p.base+"/runs/req-1/pause", strings.NewReader("csrf=x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example:" + port
		req.Header.Set("Origin", "http://evil.example:"+port)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("read-only %v, rebound POST pause: %d, want 421", readOnly, resp.StatusCode)
		}
		if info, err := f.e.Get(f.ctx, "req-1"); err != nil || info.Status != runtime.StatusWaiting {
			t.Fatalf("after a rebound pause the run is %s (%v), want waiting", info.Status, err)
		}
		if code, out := p.stop(os.Interrupt); code != 0 || !strings.Contains(out, "answers to stem.internal, ops.example, .corp.example, localhost and IP addresses") {
			t.Fatalf("stem ui after SIGINT: exit %d\n%s", code, out)
		}
	}
}
