package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stemflow/stem/storage"
)

// The LISTEN connection (notify.go) is a long poll: waiting for a
// notification has no deadline. What it sends is bounded like any call, and
// a quiet connection is pinged, so that a dead connection or a server that
// stopped answering is noticed and the listener reconnects.

// listenOn subscribes conn to channel, bounded by the call timeout.
func (s *Store) listenOn(ctx context.Context, conn *pgx.Conn, channel string) error {
	return s.connCall(ctx, func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		return err
	})
}

// waitNotification waits on the LISTEN connection for one notification.
// After a quiet call timeout it pings the server, bounded by the call
// timeout too, and returns the ping's error, if any.
func (s *Store) waitNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, s.pool.timeout)
		n, err := conn.WaitForNotification(wctx)
		quiet := err != nil && ctx.Err() == nil && wctx.Err() != nil
		cancel()
		if !quiet {
			return n, err
		}
		if err := s.connCall(ctx, conn.Ping); err != nil {
			return nil, err
		}
	}
}

// connCall runs fn, a call on a connection the store holds outside the
// pool's bounded methods (the LISTEN connection, a probe's), under the
// call timeout, recording an answer in the store's health and reporting
// the timeout as a *storage.NoAnswerError.
func (s *Store) connCall(ctx context.Context, fn func(context.Context) error) error {
	start := time.Now()
	cctx, cancel := storage.BoundCall(ctx, start.Add(s.pool.timeout))
	defer cancel()
	return s.pool.result(cctx, start, fn(cctx))
}

// listenerFailed reports a failure of the LISTEN connection. One that
// means the server does not answer goes to the store's health, which logs
// once per episode; the listener retries every few seconds meanwhile and
// says so at debug level only.
func (s *Store) listenerFailed(err error, backoff time.Duration) {
	if notAnswering(err) {
		s.health.Fail("listen", err)
		s.log.Debug("pgstore: notification listener failed; reconnecting", "err", err, "after", backoff)
		return
	}
	s.log.Warn("pgstore: notification listener failed; reconnecting", "err", err, "after", backoff)
}
