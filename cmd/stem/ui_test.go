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
	return startUIEnv(t, nil, args...)
}

// startUIEnv is startUI with env (NAME=VALUE) added to the process's
// environment; the login's variables are empty unless env sets them.
func startUIEnv(t *testing.T, env []string, args ...string) *uiProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STEM_CLI_TEST_MAIN=1", "STEM_STORE=", "STEM_CODEC_KEY=", uiTokenEnv+"=", uiBasicEnv+"=")
	cmd.Env = append(cmd.Env, env...)
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
		got := strings.Join(uiBanner(c.addr, c.readOnly, allowed, nil), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("banner for %v (read-only %v) lacks %q:\n%s", c.addr, c.readOnly, w, got)
			}
		}
		if warns := strings.Contains(got, "warning: the dashboard has no login (--insecure-no-login)"); warns != c.warns {
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

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// request sends a request to the dashboard with the cookies and headers
// given (header pairs: name, value) and returns the response, its body
// read.
func (p *uiProcess) request(method, path string, form url.Values, cookies []*http.Cookie, header ...string) (*http.Response, string) {
	p.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, p.base+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp, string(b)
}

// sessionOf is the session cookie a response sets, nil if none.
func sessionOf(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "stem_session" {
			return c
		}
	}
	return nil
}

// stem ui --token-file asks a browser to log in: a page without a login
// leads to the login form, a wrong token is refused there, the right one
// sets a signed HttpOnly, SameSite=Strict cookie that lets the browser in
// until it logs out; a script's bearer token lets it in too, a wrong one
// does not.
func TestUILoginWithToken(t *testing.T) {
	f := newFixture(t, nil, true)
	if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "req-1", runtime.StatusWaiting)
	const token = "s3cret-token-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUI(t, "--store", f.path, "ui", "--addr", "127.0.0.1:0", "--token-file", file)

	resp, body := p.request(http.MethodGet, "/runs/req-1", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../login?next=runs%2Freq-1" || strings.Contains(body, "req-1") {
		t.Fatalf("GET /runs/req-1 without a login: %d to %q, want 303 to the login\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, body = p.request(http.MethodGet, "/login?next=runs%2Freq-1", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form id="login-form"`) || !strings.Contains(body, `name="token" type="password"`) || strings.Contains(body, `name="password"`) {
		t.Fatalf("GET /login: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := p.request(http.MethodGet, "/assets/stem.css", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /assets/stem.css without a login: %d, want the stylesheet the login page uses", resp.StatusCode)
	}
	// A POST without a login changes nothing.
	if resp, _ := p.request(http.MethodPost, "/runs/req-1/pause", url.Values{"csrf": {"x"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST pause without a login: %d, want 401", resp.StatusCode)
	}

	resp, body = p.request(http.MethodPost, "/login", url.Values{"token": {"wrong"}, "next": {"runs/req-1"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `<p id="login-error" class="error" role="alert">Wrong token.</p>`) || sessionOf(resp) != nil {
		t.Fatalf("POST /login with a wrong token: %d\n%s", resp.StatusCode, body)
	}
	resp, body = p.request(http.MethodPost, "/login", url.Values{"token": {token}, "next": {"runs/req-1"}}, nil)
	session := sessionOf(resp)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./runs/req-1" || session == nil {
		t.Fatalf("POST /login with the token: %d to %q, cookie %v\n%s", resp.StatusCode, resp.Header.Get("Location"), session, body)
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Value == "" {
		t.Fatalf("the session cookie %+v: want HttpOnly and SameSite=Strict", session)
	}
	resp, body = p.request(http.MethodGet, "/runs/req-1", nil, []*http.Cookie{{Name: session.Name, Value: session.Value}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-action="pause"`) || !strings.Contains(body, `<button id="logout" type="submit">Log out</button>`) {
		t.Fatalf("GET /runs/req-1 logged in: %d\n%s", resp.StatusCode, body)
	}
	// A cookie signed otherwise is no login.
	forged := session.Value[:len(session.Value)-2] + "xx"
	if resp, _ := p.request(http.MethodGet, "/runs", nil, []*http.Cookie{{Name: session.Name, Value: forged}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /runs with a forged session: %d, want 303 to the login", resp.StatusCode)
	}

	// Scripts send the token.
	if resp, body := p.request(http.MethodGet, "/runs", nil, nil, "Authorization", "Bearer "+token); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-run-id="req-1"`) {
		t.Fatalf("GET /runs with the bearer token: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := p.request(http.MethodGet, "/runs", nil, nil, "Authorization", "Bearer "+token+"x"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /runs with a wrong bearer token: %d, want 303 to the login", resp.StatusCode)
	}

	// Logging out ends the session in the browser.
	resp, _ = p.request(http.MethodPost, "/logout", url.Values{}, []*http.Cookie{{Name: session.Name, Value: session.Value}})
	if out := sessionOf(resp); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./login?out=1" || out == nil || out.MaxAge >= 0 {
		t.Fatalf("POST /logout: %d to %q, cookie %+v; want 303 to the login and the cookie removed", resp.StatusCode, resp.Header.Get("Location"), out)
	}
	if code, out := p.stop(os.Interrupt); code != 0 || !strings.Contains(out, "login: the token; scripts send it as Authorization: Bearer TOKEN") {
		t.Fatalf("stem ui after SIGINT: exit %d\n%s", code, out)
	}
}

// stem ui takes a user and password from $STEM_UI_BASIC_AUTH: the login
// form asks for both, a wrong password is refused, and scripts log in
// with HTTP Basic.
func TestUILoginWithPassword(t *testing.T) {
	f := newFixture(t, nil, false)
	p := startUIEnv(t, []string{uiBasicEnv + "=ops:correct horse"}, "--store", f.path, "ui", "--addr", "127.0.0.1:0")
	resp, body := p.request(http.MethodGet, "/login", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="user"`) || !strings.Contains(body, `name="password" type="password"`) || strings.Contains(body, `name="token"`) {
		t.Fatalf("GET /login: %d\n%s", resp.StatusCode, body)
	}
	resp, body = p.request(http.MethodPost, "/login", url.Values{"user": {"ops"}, "password": {"wrong"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Wrong user or password.") || !strings.Contains(body, `name="user" value="ops"`) {
		t.Fatalf("POST /login with a wrong password: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = p.request(http.MethodPost, "/login", url.Values{"user": {"ops"}, "password": {"correct horse"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./runs" || sessionOf(resp) == nil {
		t.Fatalf("POST /login with the password: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodGet, p.base+"/runs", nil)
	req.SetBasicAuth("ops", "correct horse")
	if resp, err := noRedirects.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /runs with HTTP Basic: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req.SetBasicAuth("ops", "wrong")
	if resp, err := noRedirects.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /runs with a wrong HTTP Basic password: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, out := p.stop(os.Interrupt); code != 0 || !strings.Contains(out, "login: user ops and the password") {
		t.Fatalf("stem ui after SIGINT: exit %d\n%s", code, out)
	}
}

// Beyond this host, stem ui refuses to serve without a login unless told
// so explicitly, and says how; with a login or --insecure-no-login it
// serves, warning of the latter.
func TestUIRefusesNoLoginBeyondLocalhost(t *testing.T) {
	f := newFixture(t, nil, false)
	for _, readOnly := range []bool{false, true} {
		args := []string{"ui", "--addr", "0.0.0.0:0"}
		if readOnly {
			args = append(args, "--read-only")
		}
		_, errOut := f.cli(2, args...)
		for _, want := range []string{"stem ui: --addr 0.0.0.0:0 reaches beyond this host, and the dashboard would have no login", "--token-file FILE", "--basic-auth USER:PASSWORD", "--insecure-no-login"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stem %v: %q lacks %q", args, errOut, want)
			}
		}
	}
	p := startUI(t, "--store", f.path, "ui", "--addr", "0.0.0.0:0", "--insecure-no-login")
	port := p.base[strings.LastIndexByte(p.base, ':')+1:]
	if code, body := p.getAs("127.0.0.1:"+port, "/runs"); code != http.StatusOK {
		t.Fatalf("--insecure-no-login GET /runs: %d\n%s", code, body)
	}
	if code, out := p.stop(os.Interrupt); code != 0 || !strings.Contains(out, "warning: the dashboard has no login (--insecure-no-login)") {
		t.Fatalf("stem ui --insecure-no-login: exit %d\n%s", code, out)
	}
	p = startUIEnv(t, []string{uiTokenEnv + "=from-the-environment-0123456789"}, "--store", f.path, "ui", "--addr", "0.0.0.0:0")
	if code, out := p.stop(os.Interrupt); code != 0 || strings.Contains(out, "warning:") || !strings.Contains(out, "login: the token") {
		t.Fatalf("stem ui with $%s beyond localhost: exit %d\n%s", uiTokenEnv, code, out)
	}
}

// The login's flags are refused in words when they cannot be used.
func TestUILoginFlagErrors(t *testing.T) {
	f := newFixture(t, nil, false)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{2, []string{"--token", "a", "--token-file", empty}, "stem ui: --token and --token-file both give the token: choose one"},
		{2, []string{"--token-file", empty}, "stem ui: --token-file " + empty + ": the file holds no token"},
		{2, []string{"--token-file", missing}, "stem ui: --token-file: " + missing + ": no such file or directory"},
		{2, []string{"--basic-auth", "ops"}, "stem ui: --basic-auth: want USER:PASSWORD, both not empty"},
		{2, []string{"--basic-auth", "ops:"}, "stem ui: --basic-auth: want USER:PASSWORD, both not empty"},
		{2, []string{"--token", "t", "--insecure-no-login"}, "stem ui: --insecure-no-login with a login"},
	} {
		_, errOut := f.cli(c.code, append([]string{"ui", "--addr", "127.0.0.1:0"}, c.args...)...)
		if !strings.HasPrefix(errOut, c.want) {
			t.Errorf("stem ui %v: %q, want %q", c.args, errOut, c.want)
		}
	}
	if out, _ := cliAt(t, 0, "help", "ui"); !strings.Contains(out, "--token-file") || !strings.Contains(out, "--basic-auth") || !strings.Contains(out, "--insecure-no-login") || !strings.Contains(out, "Authorization: Bearer TOKEN") {
		t.Fatalf("help ui:\n%s", out)
	}
}

// stem ui carries out the bulk actions started on its store (here by
// another engine, as its pages would): it runs their worker. Read-only,
// it runs none, and a bulk action waits.
func TestUIRunsBulkActions(t *testing.T) {
	f := newFixture(t, nil, true)
	for _, id := range []string{"req-1", "req-2"} {
		if _, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID(id)); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, f.e, id, runtime.StatusWaiting)
	}

	ro := startUI(t, "--store", f.path, "ui", "--addr", "127.0.0.1:0", "--read-only")
	held, err := f.e.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkPause, Filter: runtime.ListRunsQuery{IDPrefix: "req-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := ro.get("/bulks"); code != http.StatusOK || !strings.Contains(body, `data-bulk-id="`+held+`"`) {
		t.Fatalf("read-only GET /bulks: %d\n%s", code, body)
	}
	if code, _ := ro.stop(os.Interrupt); code != 0 {
		t.Fatalf("stem ui --read-only: exit %d", code)
	}
	if b, err := f.e.GetBulk(f.ctx, held); err != nil || b.Progress.Done || b.Status.Finished() {
		t.Fatalf("with a read-only stem ui alone, the bulk action went on: %+v %v", b, err)
	}

	p := startUI(t, "--store", f.path, "ui", "--addr", "127.0.0.1:0")
	id, err := f.e.StartBulk(f.ctx, runtime.BulkRequest{Action: runtime.BulkPause, Filter: runtime.ListRunsQuery{IDPrefix: "req-2"}})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "req-2", runtime.StatusPaused)
	waitStatus(t, f.e, "req-1", runtime.StatusPaused) // the one queued meanwhile too
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := f.e.GetBulk(f.ctx, id)
		if err == nil && b.Progress.Done && b.Progress.Acted == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bulk action under stem ui: %+v %v", b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, out := p.stop(syscall.SIGTERM); code != 0 || !strings.HasSuffix(out, "stopped\n") {
		t.Fatalf("stem ui after SIGTERM: exit %d\n%s", code, out)
	}
}
