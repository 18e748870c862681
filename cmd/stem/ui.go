package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// defaultUIAddr is where stem ui listens unless --addr says otherwise:
// this host's loopback only.
const defaultUIAddr = "127.0.0.1:8233"

// uiShutdownWait bounds how long stem ui waits, once told to stop, for the
// requests in flight to finish before it closes their connections.
const uiShutdownWait = 5 * time.Second

const uiDetail = `Serves the web dashboard (package ui) of the runs in the store until it is
interrupted (Ctrl-C, SIGTERM): the runs, newest first, filtered by
workflow, status, queue, time, ID prefix and search attributes
(customer=C-7 total>=100), children under their parents; each run's input,
output or error, executions, steps and attempts, sleeps and waits, updates
and streams, live while it runs; the queues, schedules and workers; and
the actions, each confirmed first: pause, resume, terminate, restart from
the top or a step, send an event or an update, start a run from a form
made from the workflow's recorded input schema, pause, resume, trigger or
delete a schedule, and act on every run a filter matches (bulk actions,
after a page that states how many runs it matches). It opens the store as
the other commands do, and --codec-key opens sealed payloads for display.
Unless --read-only, it runs a worker that carries out the bulk actions
(runtime.RegisterBulk), so they go on while it serves.

It listens on 127.0.0.1:8233 by default, which only this host can reach;
--addr 127.0.0.1:0 takes a free port, and says which. Beyond this host
(--addr :8233 listens on every interface) it needs a login, else it
refuses to start:

  --token-file FILE      a secret token, read from FILE (or --token TOKEN,
                         or $STEM_UI_TOKEN; a flag is seen by every user
                         of this host, a file or the environment is not)
  --basic-auth USER:PW   a user and password (or $STEM_UI_BASIC_AUTH)

A browser then logs in on the dashboard's login page, which sets a signed
session cookie (HttpOnly, SameSite=Strict) and offers to log out; a script
sends the token as "Authorization: Bearer TOKEN", or the user and password
with HTTP Basic authentication (curl -u USER:PW). Behind a proxy that
authenticates already, --insecure-no-login serves without a login, saying
so. --read-only serves the pages without the actions, refuses every
action, runs no worker and opens the store read-only. To put the dashboard
behind your own application's authentication instead, mount ui.New in
your server with an Authorize hook.

The dashboard answers only to the host names it serves, so that a web page
whose name is made to resolve to this host (DNS rebinding) can neither read
the runs nor act on them: localhost (and *.localhost) and IP addresses
always, and the names --allowed-host gives (repeat it, or separate names
with commas; .example.com allows a domain and its subdomains). A request
for any other name gets 421 Misdirected Request, whatever the mode. So
--addr :8233 answers at http://<this host's address>:8233 at once; to
reach it by a name (http://stem.internal:8233, or through a proxy that
passes the Host on), add --allowed-host stem.internal.`

// The environment variables stem ui reads its login from when no flag
// gives it.
const (
	uiTokenEnv = "STEM_UI_TOKEN"
	uiBasicEnv = "STEM_UI_BASIC_AUTH"
)

// serveUI is stem ui: the dashboard over the call's engine, until a signal.
func serveUI(fs *flag.FlagSet) func(*call, []string) error {
	addr := fs.String("addr", defaultUIAddr, "listen on `HOST:PORT`; HOST empty (:8233) is every interface, port 0 a free one")
	readOnly := fs.Bool("read-only", false, "show the runs but refuse every action (pause, resume, terminate, restart, send an event or an update, start a run, bulk and schedule actions)")
	var allowed hostList
	fs.Var(&allowed, "allowed-host", "answer to `NAME` too, besides localhost and IP addresses (repeatable, or comma-separated; .example.com for a domain and its subdomains)")
	token := fs.String("token", "", "require a login with the secret `TOKEN` (also $"+uiTokenEnv+"; prefer --token-file, since other users of this host see a flag)")
	tokenFile := fs.String("token-file", "", "require a login with the secret token read from `FILE`")
	basic := fs.String("basic-auth", "", "require a login with `USER:PASSWORD` (also $"+uiBasicEnv+")")
	insecure := fs.Bool("insecure-no-login", false, "serve beyond this host without a login (behind a proxy that authenticates)")
	return func(c *call, _ []string) error {
		if _, port, err := net.SplitHostPort(*addr); err != nil || port == "" {
			return usagef("--addr %q: want HOST:PORT, such as %s, or :8233 for every interface", *addr, defaultUIAddr)
		}
		if err := ui.CheckAllowedHosts(allowed); err != nil {
			return usagef("--allowed-host: %v", err)
		}
		login, err := uiLogin(*token, *tokenFile, *basic)
		if err != nil {
			return err
		}
		if login != nil && *insecure {
			return usagef("--insecure-no-login with a login (--token, --token-file or --basic-auth, or $%s or $%s): choose one", uiTokenEnv, uiBasicEnv)
		}
		c.readOnly = *readOnly
		e, err := c.open()
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Err != nil {
				err = op.Err
			}
			return fmt.Errorf("cannot listen on %s: %v", *addr, err)
		}
		defer ln.Close()
		tcp := ln.Addr().(*net.TCPAddr) // a "tcp" listener's
		if !tcp.IP.IsLoopback() && login == nil && !*insecure {
			ln.Close()
			could := "read every run and act on it"
			if *readOnly {
				could = "read every run, its input and output"
			}
			return usagef("--addr %s reaches beyond this host, and the dashboard would have no login: whoever reaches the port could %s. "+
				"Give it a login (--token-file FILE, --token TOKEN or $%s; --basic-auth USER:PASSWORD or $%s), listen on 127.0.0.1, "+
				"or, behind a proxy that authenticates, say so with --insecure-no-login", *addr, could, uiTokenEnv, uiBasicEnv)
		}

		// What the dashboard could not do for a request (a store that
		// fails) goes to stderr, where an operator watching it sees it.
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		opts := ui.Options{Logger: logger, AllowedHosts: allowed, Login: login}
		if *readOnly {
			opts.Authorize = func(*http.Request) ui.Access { return ui.AccessRead }
		}
		// The command's timeout bounds opening the store; serving lasts
		// until a signal. Requests live in ctx, so a live page's stream
		// ends when the server is told to stop.
		ctx, stop := signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
		defer stop()

		// Unless read-only, this process carries out bulk actions too, so
		// that those started from its pages go on.
		worked := make(chan struct{})
		close(worked)
		if !*readOnly {
			if err := runtime.RegisterBulk(e); err != nil {
				fmt.Fprintf(c.errw, "stem ui: warning: bulk actions started here wait for an engine that runs them: %v\n", err)
			} else {
				worked = make(chan struct{})
				go func() {
					defer close(worked)
					if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
						logger.Error("stem ui: the worker that carries out bulk actions stopped", "err", err)
					}
				}()
			}
		}

		srv := &http.Server{
			Handler:           ui.New(e, opts),
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()

		if c.out.json {
			if err := c.out.encode(jsonUI{URL: uiURL(tcp), Loopback: tcp.IP.IsLoopback(), ReadOnly: *readOnly, AllowedHosts: allowed,
				Login: loginKind(login), NoLogin: *insecure}); err != nil {
				srv.Close()
				stop()
				<-worked
				return err
			}
		} else {
			for _, line := range uiBanner(tcp, *readOnly, allowed, login) {
				fmt.Fprintln(c.out.w, line)
			}
		}

		var serveErr error
		select {
		case err := <-served:
			serveErr = fmt.Errorf("serving on %s: %v", ln.Addr(), err)
		case <-ctx.Done():
		}
		stop() // a second Ctrl-C ends the process at once; the worker stops
		wait, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), uiShutdownWait)
		defer cancel()
		if err := srv.Shutdown(wait); err != nil {
			srv.Close()
		}
		<-worked
		if serveErr != nil {
			return serveErr
		}
		if !c.out.json {
			fmt.Fprintln(c.out.w, "stopped")
		}
		return nil
	}
}

// uiLogin is the login the flags and the environment give, nil for none:
// a token (--token, --token-file or $STEM_UI_TOKEN) and a user and
// password (--basic-auth or $STEM_UI_BASIC_AUTH).
func uiLogin(token, tokenFile, basic string) (*ui.Login, error) {
	if token != "" && tokenFile != "" {
		return nil, usagef("--token and --token-file both give the token: choose one")
	}
	l := &ui.Login{Token: token}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, inputError{fmt.Sprintf("--token-file: %v", trimPathError(err))}
		}
		l.Token = strings.TrimSpace(string(b))
		if l.Token == "" {
			return nil, inputError{fmt.Sprintf("--token-file %s: the file holds no token", tokenFile)}
		}
		if strings.ContainsAny(l.Token, "\r\n") {
			return nil, inputError{fmt.Sprintf("--token-file %s: the token is one line; the file holds several", tokenFile)}
		}
	}
	if l.Token == "" && token == "" && tokenFile == "" {
		l.Token = strings.TrimSpace(os.Getenv(uiTokenEnv))
	}
	from := "--basic-auth"
	if basic == "" {
		basic, from = os.Getenv(uiBasicEnv), "$"+uiBasicEnv
	}
	if basic != "" {
		user, password, ok := strings.Cut(basic, ":")
		if !ok || user == "" || password == "" {
			return nil, usagef("%s: want USER:PASSWORD, both not empty", from)
		}
		l.User, l.Password = user, password
	}
	if l.Token == "" && l.User == "" {
		return nil, nil
	}
	if err := l.Check(); err != nil {
		return nil, usagef("the login: %v", err)
	}
	return l, nil
}

// trimPathError is a file's error without the operation's name ("open").
func trimPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// loginKind names the login for stem ui --json: "token", "password",
// "token+password", or "" for none.
func loginKind(l *ui.Login) string {
	switch {
	case l == nil:
		return ""
	case l.Token != "" && l.User != "":
		return "token+password"
	case l.Token != "":
		return "token"
	}
	return "password"
}

// jsonUI is what stem ui --json prints once it listens.
type jsonUI struct {
	URL      string `json:"url"`
	Loopback bool   `json:"loopback"`
	ReadOnly bool   `json:"read_only"`
	// Login is how a request logs in: "token", "password",
	// "token+password", or "" for none; NoLogin says none was asked for
	// (--insecure-no-login).
	Login   string `json:"login,omitempty"`
	NoLogin bool   `json:"no_login,omitempty"`
	// AllowedHosts are the names it answers to besides localhost and IP
	// addresses (--allowed-host).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// hostList is --allowed-host: names, repeated or comma-separated.
type hostList []string

// String lists the names, comma-separated.
func (l *hostList) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated names of one --allowed-host.
func (l *hostList) Set(v string) error {
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*l = append(*l, n)
		}
	}
	return nil
}

// uiURL is the dashboard's address as a browser on this host opens it.
func uiURL(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return fmt.Sprintf("http://localhost:%d", a.Port)
	}
	return "http://" + a.String()
}

// uiBanner is what stem ui says once it listens on a: where, who can reach
// it and by which names, how it logs in, and a warning when more than this
// host can reach it without a login.
func uiBanner(a *net.TCPAddr, readOnly bool, allowed []string, login *ui.Login) []string {
	var lines []string
	if a.IP.IsLoopback() {
		lines = append(lines, fmt.Sprintf("serving the dashboard on %s — localhost only; --addr :%d listens on every interface", uiURL(a), a.Port))
	} else {
		where := "on every interface"
		if !a.IP.IsUnspecified() {
			where = "on " + a.IP.String()
		}
		lines = append(lines, fmt.Sprintf("serving the dashboard on %s — %s, not only to this host", uiURL(a), where))
		if login == nil {
			can := "read every run and pause, resume, restart, terminate and send events to them"
			if readOnly {
				can = "read every run, its input and output"
			}
			lines = append(lines, "warning: the dashboard has no login (--insecure-no-login): whoever reaches this port can "+can+
				"; keep it behind a proxy that authenticates")
		}
	}
	switch {
	case login == nil:
	case login.Token != "" && login.User != "":
		lines = append(lines, fmt.Sprintf("login: the token, or user %s and the password; scripts send Authorization: Bearer TOKEN or HTTP Basic", login.User))
	case login.Token != "":
		lines = append(lines, "login: the token; scripts send it as Authorization: Bearer TOKEN")
	default:
		lines = append(lines, fmt.Sprintf("login: user %s and the password; scripts send them with HTTP Basic (curl -u)", login.User))
	}
	if len(allowed) > 0 {
		lines = append(lines, "answers to "+strings.Join(allowed, ", ")+", localhost and IP addresses; other host names are refused")
	} else if !a.IP.IsLoopback() {
		lines = append(lines, "answers to IP addresses and localhost only; --allowed-host NAME lets it answer to a name (a page of any other name is refused, against DNS rebinding)")
	}
	if readOnly {
		lines = append(lines, "read-only: the runs are shown; every action is refused")
	}
	return lines
}
