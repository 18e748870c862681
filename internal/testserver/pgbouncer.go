package testserver

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bouncer is a private PgBouncer in transaction pooling mode in front of a
// Postgres server: its own directory under the test's temp dir (its
// configuration, user list and log), listening on 127.0.0.1 on a port of
// its own. Every client transaction may run on another server connection,
// as behind Neon's, Supabase's and most managed poolers; session state (a
// prepared statement, LISTEN, a session advisory lock, SET) stays with the
// server connection, not the client. The methods fail the test on error,
// so call them from the test's goroutine (or one that the test waits for
// and that does not outlive it).
type Bouncer struct {
	process
	bin      string
	dir      string
	upstream *url.URL
	cred     *syscall.Credential // run as this user (set when we are root)
}

// bouncerPoolSize is how many server connections the bouncer opens to
// the upstream server for each database and user: what the tests' clients,
// however many, share.
const bouncerPoolSize = 20

// PgBouncer starts a private PgBouncer for the test in front of the
// Postgres server at upstreamURL (a postgres:// URL; its host, port, user
// and database are used, and the server must let that user in without a
// password, as the shared test server and Postgres do), and stops it when
// the test ends. It skips the test when pgbouncer is not installed.
// Clients authenticate as the upstream's user with no password
// (auth_type=trust); the pool mode is transaction, with bouncerPoolSize
// server connections and up to 2000 clients.
//
// As root it runs the bouncer as the "postgres" OS user (PgBouncer refuses
// to run as root).
func PgBouncer(t testing.TB, upstreamURL string) *Bouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Skipf("testserver: no pgbouncer binary: %v; install the distribution's pgbouncer package", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	up, err := url.Parse(upstreamURL)
	if err != nil || (up.Scheme != "postgres" && up.Scheme != "postgresql") || up.Hostname() == "" {
		t.Fatalf("testserver: PgBouncer upstream %q: want a postgres://user@host:port/db URL", upstreamURL)
	}
	b := &Bouncer{process: process{tb: t, name: "pgbouncer"}, bin: bin, dir: t.TempDir(), upstream: up}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("testserver: running as root, which pgbouncer refuses, but there is no \"postgres\" OS user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		b.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		for _, d := range []string{filepath.Dir(b.dir), b.dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatalf("testserver: chmod %s: %v", d, err)
			}
		}
		if err := os.Chown(b.dir, uid, gid); err != nil {
			t.Fatalf("testserver: chown %s to postgres: %v", b.dir, err)
		}
	}
	userlist := fmt.Sprintf("%q \"\"\n", b.user())
	if err := os.WriteFile(filepath.Join(b.dir, "userlist.txt"), []byte(userlist), 0o644); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(b.cleanup)
	for attempt := 1; ; attempt++ {
		if b.port, err = freePort(); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		err = b.start()
		if err == nil {
			return b
		}
		if attempt == 3 || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("testserver: %v", err)
		}
	}
}

// user is the upstream's user, which clients of the bouncer log in as.
func (b *Bouncer) user() string {
	if u := b.upstream.User.Username(); u != "" {
		return u
	}
	return "postgres"
}

// database is the upstream URL's database.
func (b *Bouncer) database() string {
	if db := strings.TrimPrefix(b.upstream.Path, "/"); db != "" {
		return db
	}
	return b.user()
}

// URL is the bouncer's connection URL, for the upstream URL's user and
// database: postgres://USER@127.0.0.1:PORT/DB?sslmode=disable. It stays
// the same across Kill, Start and Restart.
func (b *Bouncer) URL() string {
	u := url.URL{Scheme: "postgres", User: url.User(b.user()), Host: "127.0.0.1:" + strconv.Itoa(b.port),
		Path: "/" + b.database(), RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the TCP port the bouncer listens on.
func (b *Bouncer) Port() int { return b.port }

func (b *Bouncer) logPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

// config is the bouncer's configuration file's text: every database name
// goes to the upstream server's database of that name. The bouncer logs to
// its standard error, which launch appends to logPath.
func (b *Bouncer) config() string {
	port := b.upstream.Port()
	if port == "" {
		port = "5432"
	}
	return fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 2000
admin_users = %s
log_connections = 0
log_disconnections = 0
server_login_retry = 1
`, b.upstream.Hostname(), port, b.port, filepath.Join(b.dir, "userlist.txt"), bouncerPoolSize, b.user())
}

// Start starts the killed bouncer again on the same port, and returns once
// a query through it reaches the upstream server.
func (b *Bouncer) Start() {
	b.tb.Helper()
	if err := b.start(); err != nil {
		b.tb.Fatalf("testserver: %v", err)
	}
}

func (b *Bouncer) start() error {
	if err := b.lockStopped(); err != nil {
		return err
	}
	conf := filepath.Join(b.dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(b.config()), 0o644); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	cmd := exec.Command(b.bin, conf)
	cmd.Dir = b.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred, Setpgid: true}
	return b.launch(cmd, b.dir, b.logPath(), 20*time.Millisecond, "not passing queries through",
		func(ctx context.Context) bool { return ping(ctx, b.URL()) == nil })
}

// Kill kills the bouncer with SIGKILL and waits for it to exit: every
// client connection drops, and a transaction in flight is rolled back by
// the upstream server when its connection closes. Killing a stopped
// bouncer does nothing.
func (b *Bouncer) Kill() {
	b.tb.Helper()
	b.kill()
}

// Restart kills the bouncer and starts it again on the same port, as a
// pooler's crash and restart: the clients reconnect to the same URL.
func (b *Bouncer) Restart() {
	b.tb.Helper()
	b.kill()
	b.Start()
}

// cleanup kills the bouncer at the end of the test.
func (b *Bouncer) cleanup() { b.kill() }
