package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// Every call the store makes is bounded, whatever deadline its caller's
// context has (or lacks): a server that accepts connections and never
// replies costs a call Options.CallTimeout, never a hang. Scripts are
// bounded in run; on a client Open made, a hook bounds every other command
// too and the client's socket deadlines follow the context. Connecting is
// bounded by Options.ConnectTimeout. The wake-up subscription is a long
// poll, exempt, and go-redis pings it when it is quiet, so a dead
// connection is noticed and replaced.

const (
	// DefaultConnectTimeout bounds establishing one connection when
	// neither Options.ConnectTimeout nor the URL's dial_timeout sets it.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultCallTimeout bounds each call when Options.CallTimeout is zero.
	DefaultCallTimeout = 10 * time.Second
	// DefaultPolicyCheckInterval is how often Claim reads the server's
	// maxmemory-policy again when Options.PolicyCheckInterval is zero.
	DefaultPolicyCheckInterval = 15 * time.Second
)

// errConnectTimeout is the cause of the context of Open's first PING when
// the connect timeout ended it.
var errConnectTimeout = errors.New("redisstore: connect timeout")

// bound returns ctx limited to the call timeout from now (see
// storage.BoundCall).
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return storage.BoundCall(ctx, time.Now().Add(s.callTimeout))
}

// outcome classifies the result of a call made under cctx, started at
// start: an answer (a reply, an error reply such as OOM) is recorded in the
// store's health; an error caused by the store's own deadline comes back as
// a *storage.NoAnswerError; an error that means the server did not answer is
// recorded as a failure of op.
func (s *Store) outcome(cctx context.Context, start time.Time, op string, err error) error {
	var na *storage.NoAnswerError
	var ne net.Error
	timedOut := storage.CallTimedOut(cctx)
	// A socket timeout is the call timeout too, unless the URL set a
	// shorter read or write timeout: either way the server did not
	// answer in time.
	if err != nil && (timedOut || errors.As(err, &ne) && ne.Timeout() && cctx.Err() == nil) && !errors.As(err, &na) {
		err = &storage.NoAnswerError{Timeout: s.callTimeout, Err: err}
		timedOut = true
	}
	switch {
	case cctx.Err() != nil && !timedOut && !errors.As(err, &na):
		// The caller's context ended the call (or Open's connect
		// timeout, which ping reports): nothing to learn of the server.
	case notAnswering(err):
		s.health.Fail(op, err)
	case err == nil || answered(err):
		s.health.OK(start)
	}
	return err
}

// answered reports whether err is the server's reply (an error reply, or
// redis.Nil for a missing key), so the server answers.
func answered(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &re)
}

// notAnswering reports whether err means the server did not answer: the
// store's call timeout passed, a socket timed out, connecting failed, or
// the connection broke. An error reply is an answer; a call its caller
// cancelled, or ended by the caller's own deadline, says nothing about the
// server.
func notAnswering(err error) bool {
	var (
		na *storage.NoAnswerError
		ne net.Error
	)
	switch {
	case err == nil || answered(err) || errors.Is(err, redis.ErrClosed):
		return false
	case errors.As(err, &na):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne):
		return true
	}
	return strings.Contains(err.Error(), "pool timeout")
}

// onHost names the server in an error of the client: "server
// 127.0.0.1:6379: no answer within 10s: ...".
func (s *Store) onHost(err error) error {
	return fmt.Errorf("server %s: %w", s.host, err)
}

// hcall runs one plain command of the store's (not a script), bounded and
// reported as run bounds and reports scripts.
func (s *Store) hcall(ctx context.Context, op string, f func(context.Context) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	start := time.Now()
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.outcome(cctx, start, op, f(cctx)); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, s.wrapErr(err))
	}
	return nil
}

// boundHook bounds every command of a client Open made by the call
// timeout, including go-redis's own retries of it.
type boundHook struct{ s *Store }

func (h boundHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h boundHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		cctx, cancel := h.s.bound(ctx)
		defer cancel()
		err := next(cctx, cmd)
		if out := h.s.outcome(cctx, start, cmd.Name(), err); out != err {
			cmd.SetErr(out)
			err = out
		}
		return err
	}
}

func (h boundHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		cctx, cancel := h.s.bound(ctx)
		defer cancel()
		return h.s.outcome(cctx, start, "pipeline", next(cctx, cmds))
	}
}

// hostOf names the server (or servers) a client talks to, as host:port,
// never with the user or password.
func hostOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		return strings.Join(addrs, ",")
	}
	return "the server"
}
