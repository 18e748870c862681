// Package storeurl opens any of Stem's stores from one string, so commands
// and programs can take the store as a flag:
//
//	stem.db, ./data/stem.db, sqlite:stem.db, sqlite:///abs/stem.db   SQLite file (the default)
//	postgres://user@host:5432/db?sslmode=disable                     Postgres (also postgresql://)
//	redis://host:6379/0, rediss://...                                Redis
//	mem:                                                             in memory, gone at exit
//
// Store options that URLs cannot carry (a Postgres schema, a Redis key
// prefix) are taken from the query parameters stem_schema and stem_prefix,
// which are removed before the URL reaches the driver.
//
// Open creates a SQLite file that does not exist, as a worker wants; a tool
// that only inspects a store passes Options.MustExist to OpenWith, so a
// mistyped path is refused with ErrNoStore instead of creating an empty
// store.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/pgstore"
	"github.com/stemflow/stem/stores/redisstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// ErrNoStore: Options.MustExist was set and the SQLite file does not exist.
// The error that wraps it names the path: "storeurl: no Stem store at
// PATH".
var ErrNoStore = errors.New("no Stem store")

// Options configures OpenWith. The zero value is Open's behaviour.
type Options struct {
	// MustExist refuses a SQLite path that names no file with ErrNoStore,
	// instead of creating the file, so nothing is written to the disk.
	// (A server's database must exist either way.)
	MustExist bool
	// DialTimeout bounds connecting to a server, for each connection
	// attempt: Postgres's connect_timeout and Redis's dial_timeout, unless
	// the URL sets them. Zero leaves the drivers' defaults.
	DialTimeout time.Duration
	// Logger receives the stores' warnings (a Redis server's persistence
	// and eviction settings, for one); nil discards them.
	Logger *slog.Logger
}

// Open opens the store the string names; see the package doc for the forms.
// A SQLite file that does not exist is created.
func Open(ctx context.Context, s string) (storage.Store, error) {
	return OpenWith(ctx, s, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, s string, opts Options) (storage.Store, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("storeurl: empty store URL")
	case s == "mem:" || s == "memory:":
		return memstore.New(memstore.Options{}), nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, schema, err := takeParam(s, "stem_schema", "connect_timeout", opts.DialTimeout)
		if err != nil {
			return nil, err
		}
		st, err := pgstore.Open(ctx, u, pgstore.Options{Schema: schema, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"):
		u, prefix, err := takeParam(s, "stem_prefix", "dial_timeout", opts.DialTimeout)
		if err != nil {
			return nil, err
		}
		st, err := redisstore.Open(ctx, u, redisstore.Options{Prefix: prefix, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case strings.HasPrefix(s, "sqlite://"):
		return openSQLite(strings.TrimPrefix(s, "sqlite://"), opts)
	case strings.HasPrefix(s, "sqlite:"):
		return openSQLite(strings.TrimPrefix(s, "sqlite:"), opts)
	case strings.Contains(s, "://"):
		return nil, fmt.Errorf("storeurl: unknown store scheme in %q (want a SQLite path, sqlite:, postgres://, redis:// or mem:)", redact(s))
	default:
		return openSQLite(s, opts)
	}
}

func openSQLite(path string, opts Options) (storage.Store, error) {
	if path == "" {
		return nil, fmt.Errorf("storeurl: empty SQLite path")
	}
	if opts.MustExist {
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("storeurl: %w at %s", ErrNoStore, path)
		case err != nil:
			return nil, fmt.Errorf("storeurl: %w", err)
		case fi.IsDir():
			return nil, fmt.Errorf("storeurl: %w at %s (it is a directory)", ErrNoStore, path)
		case fi.Size() == 0:
			return nil, fmt.Errorf("storeurl: %w at %s (the file is empty)", ErrNoStore, path)
		}
	}
	st, err := sqlitestore.Open(path, sqlitestore.Options{Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("storeurl: %w", err)
	}
	return st, nil
}

// takeParam removes the query parameter name from the URL and returns it;
// when timeout is set and the URL has no parameter timeoutParam, it adds
// one (in whole seconds, at least 1, which both drivers read).
func takeParam(s, name, timeoutParam string, timeout time.Duration) (string, string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("storeurl: malformed URL %q: %v", redact(s), err)
	}
	q := u.Query()
	v := q.Get(name)
	q.Del(name)
	if timeout > 0 && !q.Has(timeoutParam) {
		q.Set(timeoutParam, strconv.Itoa(max(1, int((timeout+time.Second-1)/time.Second))))
	}
	u.RawQuery = q.Encode()
	return u.String(), v, nil
}

// redact hides a password in a URL for error messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
