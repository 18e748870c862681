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

	"github.com/stemflow/stem/ui"
)

// defaultUIAddr is where stem ui listens unless --addr says otherwise:
// this host's loopback only.
const defaultUIAddr = "127.0.0.1:8233"

// uiShutdownWait bounds how long stem ui waits, once told to stop, for the
// requests in flight to finish before it closes their connections.
const uiShutdownWait = 5 * time.Second

const uiDetail = `Serves the web dashboard (package ui) of the runs in the store until it is
interrupted (Ctrl-C, SIGTERM): the runs, filtered by workflow, status,
queue, time and ID prefix, with their counts per status; each run's
input, output or error, executions, steps and attempts, sleeps and waits,
updates and streams, live while it runs; the queues, schedules and
workers; and the actions, each confirmed first: pause, resume, terminate,
restart from the top or a step, send an event, and send an update (one
with a validator only when told to send it unvalidated, as stem update
--unvalidated). It opens the store as the other commands do, and
--codec-key opens sealed payloads for display.

It listens on 127.0.0.1:8233 by default, which only this host can reach;
--addr 127.0.0.1:0 takes a free port, and says which. The dashboard has no
login of its own: another address (--addr :8233 listens on every
interface) lets whoever reaches it operate the runs, and stem ui warns of
it. --read-only serves the pages without the actions and refuses every
action, and opens the store read-only. To put the dashboard behind your
own authentication, mount ui.New in your server with an Authorize hook.

The dashboard answers only to the host names it serves, so that a web page
whose name is made to resolve to this host (DNS rebinding) can neither read
the runs nor act on them: localhost (and *.localhost) and IP addresses
always, and the names --allowed-host gives (repeat it, or separate names
with commas; .example.com allows a domain and its subdomains). A request
for any other name gets 421 Misdirected Request, whatever the mode. So
--addr :8233 answers at http://<this host's address>:8233 at once; to
reach it by a name (http://stem.internal:8233, or through a proxy that
passes the Host on), add --allowed-host stem.internal.`

// serveUI is stem ui: the dashboard over the call's engine, until a signal.
func serveUI(fs *flag.FlagSet) func(*call, []string) error {
	addr := fs.String("addr", defaultUIAddr, "listen on `HOST:PORT`; HOST empty (:8233) is every interface, port 0 a free one")
	readOnly := fs.Bool("read-only", false, "show the runs but refuse every action (pause, resume, terminate, restart, send an event or an update)")
	var allowed hostList
	fs.Var(&allowed, "allowed-host", "answer to `NAME` too, besides localhost and IP addresses (repeatable, or comma-separated; .example.com for a domain and its subdomains)")
	return func(c *call, _ []string) error {
		if _, port, err := net.SplitHostPort(*addr); err != nil || port == "" {
			return usagef("--addr %q: want HOST:PORT, such as %s, or :8233 for every interface", *addr, defaultUIAddr)
		}
		if err := ui.CheckAllowedHosts(allowed); err != nil {
			return usagef("--allowed-host: %v", err)
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

		// What the dashboard could not do for a request (a store that
		// fails) goes to stderr, where an operator watching it sees it.
		opts := ui.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), AllowedHosts: allowed}
		if *readOnly {
			opts.Authorize = func(*http.Request) ui.Access { return ui.AccessRead }
		}
		// The command's timeout bounds opening the store; serving lasts
		// until a signal. Requests live in ctx, so a live page's stream
		// ends when the server is told to stop.
		ctx, stop := signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
		defer stop()
		srv := &http.Server{
			Handler:           ui.New(e, opts),
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()

		tcp := ln.Addr().(*net.TCPAddr) // a "tcp" listener's
		if c.out.json {
			if err := c.out.encode(jsonUI{URL: uiURL(tcp), Loopback: tcp.IP.IsLoopback(), ReadOnly: *readOnly, AllowedHosts: allowed}); err != nil {
				srv.Close()
				return err
			}
		} else {
			for _, line := range uiBanner(tcp, *readOnly, allowed) {
				fmt.Fprintln(c.out.w, line)
			}
		}

		select {
		case err := <-served:
			return fmt.Errorf("serving on %s: %v", ln.Addr(), err)
		case <-ctx.Done():
		}
		stop() // a second Ctrl-C ends the process at once
		wait, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), uiShutdownWait)
		defer cancel()
		if err := srv.Shutdown(wait); err != nil {
			srv.Close()
		}
		if !c.out.json {
			fmt.Fprintln(c.out.w, "stopped")
		}
		return nil
	}
}

// jsonUI is what stem ui --json prints once it listens.
type jsonUI struct {
	URL      string `json:"url"`
	Loopback bool   `json:"loopback"`
	ReadOnly bool   `json:"read_only"`
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
// it and by which names, and a warning when more than this host can.
func uiBanner(a *net.TCPAddr, readOnly bool, allowed []string) []string {
	var lines []string
	if a.IP.IsLoopback() {
		lines = append(lines, fmt.Sprintf("serving the dashboard on %s — localhost only; --addr :%d listens on every interface", uiURL(a), a.Port))
	} else {
		where := "on every interface"
		if !a.IP.IsUnspecified() {
			where = "on " + a.IP.String()
		}
		can := "read every run and pause, resume, restart, terminate and send events to them"
		if readOnly {
			can = "read every run, its input and output"
		}
		lines = append(lines,
			fmt.Sprintf("serving the dashboard on %s — %s, not only to this host", uiURL(a), where),
			"warning: the dashboard has no login of its own: whoever reaches this port can "+can+
				"; listen on 127.0.0.1 behind an authenticating proxy, or mount ui.New in your own server with an Authorize hook")
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
