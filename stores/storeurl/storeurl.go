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
package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/pgstore"
	"github.com/stemflow/stem/stores/redisstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// Open opens the store the string names; see the package doc for the forms.
func Open(ctx context.Context, s string) (storage.Store, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("storeurl: empty store URL")
	case s == "mem:" || s == "memory:":
		return memstore.New(memstore.Options{}), nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, schema, err := takeParam(s, "stem_schema")
		if err != nil {
			return nil, err
		}
		st, err := pgstore.Open(ctx, u, pgstore.Options{Schema: schema})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"):
		u, prefix, err := takeParam(s, "stem_prefix")
		if err != nil {
			return nil, err
		}
		st, err := redisstore.Open(ctx, u, redisstore.Options{Prefix: prefix})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case strings.HasPrefix(s, "sqlite://"):
		return openSQLite(strings.TrimPrefix(s, "sqlite://"))
	case strings.HasPrefix(s, "sqlite:"):
		return openSQLite(strings.TrimPrefix(s, "sqlite:"))
	case strings.Contains(s, "://"):
		return nil, fmt.Errorf("storeurl: unknown store scheme in %q (want a SQLite path, sqlite:, postgres://, redis:// or mem:)", redact(s))
	default:
		return openSQLite(s)
	}
}

func openSQLite(path string) (storage.Store, error) {
	if path == "" {
		return nil, fmt.Errorf("storeurl: empty SQLite path")
	}
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		return nil, fmt.Errorf("storeurl: %w", err)
	}
	return st, nil
}

// takeParam removes the query parameter name from the URL and returns it.
func takeParam(s, name string) (string, string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("storeurl: malformed URL %q: %v", redact(s), err)
	}
	q := u.Query()
	v := q.Get(name)
	q.Del(name)
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
