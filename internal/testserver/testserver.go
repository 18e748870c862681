// Package testserver starts private PostgreSQL and Redis servers for tests
// that restart, freeze, fill or misconfigure a server, so that no test ever
// does that to the shared servers named by STEM_TEST_POSTGRES_URL and
// STEM_TEST_REDIS_URL.
//
// Each server lives in a directory under t.TempDir(), listens on 127.0.0.1
// on a free port, and is stopped when the test ends. When the binaries are
// not installed the test is skipped with a reason (CI installs them: see
// .ci/run). Postgres runs with its defaults' crash semantics (fsync on), so
// an immediate restart is a real crash and recovery.
//
//	pg := testserver.Postgres(t)
//	store := open(pg.URL())
//	pg.Restart("immediate") // crash the server, start it again on the same port
//
//	rd := testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
//	rd.Kill()  // SIGKILL
//	rd.Start() // same port, dir and config: the AOF is replayed
package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// freePort returns a TCP port on 127.0.0.1 that nothing listens on right
// now. Another process may take it before the server binds it; the callers
// retry with a new port when the first start fails.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n bytes of the file at path, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// signalTree sends sig to pid and to every descendant of pid, parents
// first, so a stopped parent cannot start a child that escapes the signal.
func signalTree(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
	}
	for _, c := range children(pid) {
		// A child may have exited since the listing: not an error.
		if err := signalTree(c, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// children lists the direct children of pid from /proc.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may contain spaces: the
		// fields after the last ')' are state, then the parent's pid.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// process is a server process a test started: what PG and RedisServer
// share, and the freezing both offer.
type process struct {
	tb   testing.TB
	name string // "postgres", "redis-server": for messages
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd     // nil while stopped
	exited  chan struct{} // closed when cmd has exited
	waitErr error
	frozen  bool
}

// lockStopped takes p.mu for a start, as launch wants it held, when the
// process is stopped; when it runs, it leaves p.mu free and says so.
func (p *process) lockStopped() error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s on port %d: already running", p.name, p.port)
	}
	return nil
}

// kill kills the process with SIGKILL, which ends a stopped (frozen)
// process too, and waits for it to exit; killing a stopped server does
// nothing.
func (p *process) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.tb.Errorf("testserver: kill %s on port %d: %v", p.name, p.port, err)
	}
	<-exited
	p.mu.Lock()
	p.cmd, p.frozen = nil, false
	p.mu.Unlock()
}

// launch starts cmd as the server's process, its output appended to the
// log at logPath, and waits until ready reports it serving, asking every
// interval, for at most startTimeout. The caller holds p.mu, which launch
// releases once the process runs. When the process exits first, or is not
// ready in time, the error quotes what it logged since; notReady says what
// it was not ("not accepting connections"), and dir where it was started.
func (p *process) launch(cmd *exec.Cmd, dir, logPath string, interval time.Duration, notReady string, ready func(context.Context) bool) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: open log: %w", p.name, err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, 2)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s in %s: %w", p.name, dir, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		select {
		case <-exited:
			p.mu.Lock()
			err := p.waitErr
			p.cmd = nil
			p.mu.Unlock()
			return fmt.Errorf("%s on port %d exited while starting (%v); log %s:\n%s", p.name, p.port, err, logPath, logSince(logPath, logStart))
		case <-ctx.Done():
			return fmt.Errorf("%s on port %d %s after %v; log %s:\n%s", p.name, p.port, notReady, startTimeout, logPath, logSince(logPath, logStart))
		case <-time.After(interval):
		}
		if ready(ctx) {
			return nil
		}
	}
}

// Freeze stops the server and all its processes (a postmaster's backends,
// a Redis server's saving child) with SIGSTOP: the port still accepts TCP
// connections, but nothing answers until Thaw.
func (p *process) Freeze() {
	p.tb.Helper()
	p.signal("freeze", syscall.SIGSTOP)
	p.frozen = true
	p.mu.Unlock()
}

// Thaw resumes a frozen server with SIGCONT.
func (p *process) Thaw() {
	p.tb.Helper()
	p.signal("thaw", syscall.SIGCONT)
	p.frozen = false
	p.mu.Unlock()
}

// signal sends sig to the running server's process tree and returns with
// p.mu held.
func (p *process) signal(op string, sig syscall.Signal) {
	p.tb.Helper()
	p.mu.Lock()
	if p.cmd == nil {
		p.mu.Unlock()
		p.tb.Fatalf("testserver: %s %s on port %d: not running", op, p.name, p.port)
	}
	if err := signalTree(p.cmd.Process.Pid, sig); err != nil {
		p.mu.Unlock()
		p.tb.Fatalf("testserver: %s %s on port %d: %v", op, p.name, p.port, err)
	}
}
