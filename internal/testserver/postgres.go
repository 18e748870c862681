package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PG is a private PostgreSQL cluster: its own data directory under the
// test's temp dir, one postmaster listening on 127.0.0.1 on a port of its
// own. The methods fail the test on error, so call them from the test's
// goroutine (or one that the test waits for and that does not outlive it).
type PG struct {
	process
	bin      string // directory holding initdb and postgres
	dir      string // the temp dir: data/, postgres.log, the socket
	settings []string
	cred     *syscall.Credential // run as this user (set when we are root)
}

// Postgres starts a private PostgreSQL cluster for the test and stops it
// when the test ends; it skips the test when PostgreSQL's server binaries
// are not installed. Each setting is a "name=value" server parameter, given
// to the server as -c name=value after the defaults (fsync stays on unless a
// setting turns it off, so an immediate restart is a real crash).
//
// As root it runs initdb and the server as the "postgres" OS user (both
// refuse to run as root), with the data directory owned by that user.
func Postgres(t testing.TB, settings ...string) *PG {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		t.Skipf("testserver: no PostgreSQL server binaries (initdb, postgres): %v; install the distribution's postgresql package", err)
	}
	for _, s := range settings {
		if !strings.Contains(s, "=") {
			t.Fatalf("testserver: Postgres setting %q is not name=value", s)
		}
	}
	p := &PG{process: process{tb: t, name: "postgres"}, bin: bin, dir: t.TempDir(), settings: settings}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("testserver: running as root, and initdb refuses root, but there is no \"postgres\" OS user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		// The server's user must reach its directory: let it traverse the
		// test's temp dirs (not list them) and own its own.
		for _, d := range []string{filepath.Dir(p.dir), p.dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatalf("testserver: chmod %s: %v", d, err)
			}
		}
		if err := os.Chown(p.dir, uid, gid); err != nil {
			t.Fatalf("testserver: chown %s to postgres: %v", p.dir, err)
		}
	}
	initdb := p.command(filepath.Join(bin, "initdb"), "-D", p.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testserver: initdb in %s: %v\n%s", p.dataDir(), err, out)
	}
	t.Cleanup(p.cleanup)
	// The port is free when chosen, but another process may bind it before
	// the server does: then try another.
	for attempt := 1; ; attempt++ {
		if p.port, err = freePort(); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		err = p.start()
		if err == nil {
			return p
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("testserver: %v", err)
		}
	}
}

// postgresBinDir finds the directory holding initdb and postgres: the
// newest /usr/lib/postgresql/*/bin (Debian's layout), then pg_config
// --bindir, then $PATH.
func postgresBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("none in /usr/lib/postgresql/*/bin, pg_config --bindir or $PATH")
}

// URL is the cluster's connection URL, for the "postgres" superuser and
// database: postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable. It
// stays the same across Stop, Start and Restart.
func (p *PG) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// Port is the TCP port the cluster listens on.
func (p *PG) Port() int { return p.port }

func (p *PG) dataDir() string { return filepath.Join(p.dir, "data") }
func (p *PG) logPath() string { return filepath.Join(p.dir, "postgres.log") }

// command is a command run as the server's OS user, in its directory.
func (p *PG) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	return cmd
}

// Start starts the stopped cluster on the same port and data directory, and
// returns once it accepts connections (after crash recovery, when the last
// stop was immediate).
func (p *PG) Start() {
	p.tb.Helper()
	if err := p.start(); err != nil {
		p.tb.Fatalf("testserver: %v", err)
	}
}

func (p *PG) start() error {
	if err := p.lockStopped(); err != nil {
		return err
	}
	// A socket path longer than the kernel's limit (107 bytes) fails the
	// start; then the cluster listens on TCP only.
	sock := p.dir
	if len(filepath.Join(sock, ".s.PGSQL.65535")) > 100 {
		sock = ""
	}
	args := []string{"-D", p.dataDir(), "-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + sock,
		"-c", "shared_buffers=32MB",
		"-c", "max_connections=200",
	}
	for _, s := range p.settings {
		args = append(args, "-c", s)
	}
	cmd := p.command(filepath.Join(p.bin, "postgres"), args...)
	return p.launch(cmd, p.dataDir(), p.logPath(), 20*time.Millisecond, "not accepting connections",
		func(ctx context.Context) bool { return ping(ctx, p.URL()) == nil })
}

// logSince returns what the log at path holds from offset on, at most its
// last 4 KiB.
func logSince(path string, offset int64) string {
	s := tail(path, 4096)
	if st, err := os.Stat(path); err == nil && st.Size()-offset < int64(len(s)) {
		s = s[len(s)-int(st.Size()-offset):]
	}
	return s
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// Stop shuts the cluster down in "fast" mode (sessions are disconnected, a
// checkpoint is written) and waits for it to exit. Stopping a stopped
// cluster does nothing.
func (p *PG) Stop() {
	p.tb.Helper()
	if err := p.stop(syscall.SIGINT); err != nil {
		p.tb.Fatalf("testserver: %v", err)
	}
}

// Kill crashes the cluster as Restart("immediate") does, and leaves it
// stopped until Start. Killing a stopped cluster does nothing.
func (p *PG) Kill() {
	p.tb.Helper()
	if err := p.stop(syscall.SIGQUIT); err != nil {
		p.tb.Fatalf("testserver: %v", err)
	}
}

// Restart stops the cluster and starts it again on the same port. Mode
// "immediate" is a crash: the postmaster and every backend quit at once
// without a checkpoint and the start runs crash recovery (pg_ctl -m
// immediate); "fast" is a clean shutdown (pg_ctl -m fast).
func (p *PG) Restart(mode string) {
	p.tb.Helper()
	var sig syscall.Signal
	switch mode {
	case "immediate":
		sig = syscall.SIGQUIT
	case "fast":
		sig = syscall.SIGINT
	default:
		p.tb.Fatalf("testserver: Restart mode %q: want \"immediate\" or \"fast\"", mode)
	}
	if err := p.stop(sig); err != nil {
		p.tb.Fatalf("testserver: restart: %v", err)
	}
	if err := p.start(); err != nil {
		p.tb.Fatalf("testserver: restart: %v", err)
	}
}

// stop sends sig to the postmaster (thawing it first) and waits for it to
// exit.
func (p *PG) stop(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, exited, frozen := p.cmd, p.exited, p.frozen
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if frozen {
		_ = signalTree(cmd.Process.Pid, syscall.SIGCONT)
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop postgres on port %d: %w", p.port, err)
	}
	select {
	case <-exited:
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("stop postgres on port %d: still running %v after %v; killed it; log %s", p.port, startTimeout, sig, p.logPath())
	}
	p.mu.Lock()
	p.cmd, p.frozen = nil, false
	p.mu.Unlock()
	return nil
}

// cleanup stops the cluster at the end of the test; its data is thrown
// away with the temp dir, so an immediate stop is enough.
func (p *PG) cleanup() {
	if err := p.stop(syscall.SIGQUIT); err != nil {
		p.tb.Errorf("testserver: %v", err)
	}
}
