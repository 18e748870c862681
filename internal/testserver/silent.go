package testserver

import (
	"net"
	"sync"
	"testing"
	"time"
)

// HangLimit is how long a call may take before a test calls it hung: far
// longer than any timeout the tests set, so it only catches a call that
// would never return.
const HangLimit = 60 * time.Second

// Silent listens on 127.0.0.1, accepts every connection and never sends a
// byte: a server that stopped answering. It returns host:port; the
// listener and its connections close when the test ends.
func Silent(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// Within runs fn and fails the test if it has not returned within
// HangLimit.
func Within[T any](t testing.TB, what string, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(HangLimit):
		t.Fatalf("%s hung: no return after %v", what, HangLimit)
		panic("unreachable")
	}
}
