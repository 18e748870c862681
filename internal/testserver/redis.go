package testserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server: its own directory under the test's temp
// dir (where an AOF or RDB file goes), listening on 127.0.0.1 on a port of
// its own. The methods fail the test on error, so call them from the test's
// goroutine (or one that the test waits for and that does not outlive it).
type RedisServer struct {
	process
	bin  string
	dir  string
	args []string

	client *redis.Client // guarded by mu
}

// Redis starts a private redis-server for the test and stops it when the
// test ends; it skips the test when redis-server is not installed. Without
// args the server keeps nothing on disk (no RDB snapshots, no AOF); args are
// extra configuration given after the defaults, as redis-server takes them
// on its command line, e.g. "--appendonly", "yes", "--appendfsync",
// "always" or "--maxmemory", "2mb".
func Redis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("testserver: no redis-server binary: %v; install the distribution's redis-server package", err)
	}
	r := &RedisServer{process: process{tb: t, name: "redis-server"}, bin: bin, dir: t.TempDir(), args: args}
	t.Cleanup(r.cleanup)
	for attempt := 1; ; attempt++ {
		if r.port, err = freePort(); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		err = r.start()
		if err == nil {
			return r
		}
		if attempt == 3 || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("testserver: %v", err)
		}
	}
}

// URL is the server's URL, redis://127.0.0.1:PORT/0. It stays the same
// across Kill and Start.
func (r *RedisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *RedisServer) logPath() string { return filepath.Join(r.dir, "redis.log") }

// Client returns a client of the server, the same one on every call,
// closed when the test ends.
func (r *RedisServer) Client() *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		r.client = redis.NewClient(&redis.Options{Addr: r.Addr()})
	}
	return r.client
}

// Start starts the killed server again on the same port, directory and
// configuration (so an append-only file is replayed), and returns once it
// answers PING (its data loaded).
func (r *RedisServer) Start() {
	r.tb.Helper()
	if err := r.start(); err != nil {
		r.tb.Fatalf("testserver: %v", err)
	}
}

func (r *RedisServer) start() error {
	if err := r.lockStopped(); err != nil {
		return err
	}
	args := append(redisArgs(r.port, r.dir), r.args...)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// PING answers -LOADING while the server replays its files.
	return r.launch(cmd, r.dir, r.logPath(), 10*time.Millisecond, "not answering PING",
		func(context.Context) bool { return pong(r.Addr()) })
}

// redisArgs are the arguments every private redis-server starts with:
// its port and directory, on 127.0.0.1, in the foreground, keeping nothing
// on disk and logging to its output (which launch appends to its log).
func redisArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--logfile", "",
	}
}

// pong reports whether the server at addr answers PING with PONG. It
// speaks the protocol itself: a go-redis client backs off for a second
// after failed dials, which a server that is starting gives it.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Kill kills the server with SIGKILL (thawing it first if frozen) and
// waits for it to exit: what it had not written to disk is lost, as in a
// crash. Killing a stopped server does nothing.
func (r *RedisServer) Kill() {
	r.tb.Helper()
	r.kill()
}

// cleanup closes the client and kills the server at the end of the test.
func (r *RedisServer) cleanup() {
	r.mu.Lock()
	c := r.client
	r.client = nil
	r.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	r.kill()
}
