// Package storeurl opens any of Stem's stores from one string, so commands
// and programs can take the store as a flag:
//
//	stem.db, ./data/stem.db, sqlite:stem.db, sqlite:///abs/stem.db   SQLite file (the default)
//	postgres://user@host:5432/db?sslmode=disable                     Postgres (also postgresql://)
//	redis://host:6379/0, rediss://...                                Redis
//	redis+cluster://host:7000,host:7001?shards=16, rediss+cluster:// Redis Cluster
//	mem:                                                             in memory, gone at exit
//
// Store options that URLs cannot carry are taken from query parameters,
// which are removed before the URL reaches the driver: stem_schema, the
// Postgres schema (a Postgres identifier written unquoted: letters, digits
// and _, not starting with a digit, at most 63 bytes), and stem_prefix, the
// Redis key prefix (letters, digits and _ - . : / { }, at most 64 bytes).
// A Postgres URL that is a transaction pooler's (PgBouncer's with
// pool_mode=transaction, a managed Postgres's pooled URL) takes
// stem_pooler=transaction (pgstore.Options.TransactionPooler; session and
// none say there is none to care about, the default), and
// stem_listen_url, the same database's direct URL, escaped as a query
// value, on which the store LISTENs for notifications
// (pgstore.Options.ListenURL); without it, a store in pooler mode polls:
//
//	postgres://app@pooler:6432/app?stem_pooler=transaction&stem_listen_url=postgres%3A%2F%2Fapp%40db%3A5432%2Fapp
//
// A SQLite store written in the sqlite: form takes two: stem_sync, the
// durability mode: normal (the default) or full (sqlitestore.SyncFull), as
// in sqlite:stem.db?stem_sync=full; and stem_share_file=true
// (sqlitestore.Options.ShareFile), which lets Stem add its tables to a
// file another application's tables are in, as in
// sqlite:app.db?stem_share_file=true, where without it the file is
// refused. A plain path is taken as written, '?' and all. Any other value,
// a repeated parameter, a stem_ parameter the store does not take
// (misspelled, or another store's: it would otherwise reach the driver,
// which sends it to the server or drops it), or a ';' anywhere in the
// query (which Go's URL parser would silently drop with its parameter) is
// an error naming the parameter, and the nearest known one.
//
// Open creates a store that is not there (a SQLite file, a Postgres schema)
// and migrates an older one, as a worker wants. A tool passes
// Options.OpenExisting or Options.ReadOnly to OpenWith instead, so that a
// mistyped path or schema, another application's database or a store at
// another schema version is refused with storage.ErrNotStore and nothing is
// created or changed; Init is the explicit way to create or migrate a store.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/pgstore"
	"github.com/stemflow/stem/stores/redisstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// Options configures OpenWith. The zero value is Open's behaviour.
type Options struct {
	// OpenExisting opens only a Stem store that is already there at the
	// schema version this code knows, and never creates or migrates one
	// (no SQLite file, no Postgres schema or table): anything else is
	// refused with storage.ErrNotStore, naming the file or the server and
	// schema, and nothing is changed. mem: is always a new, empty store.
	OpenExisting bool
	// ReadOnly is OpenExisting for a tool that only reads. A SQLite file is
	// opened read-only (sqlitestore.Options.ReadOnly: no writer, no pragma
	// that writes, and write methods fail with sqlitestore.ErrReadOnly);
	// Postgres and Redis stores write nothing until a write method is
	// called, so there it means OpenExisting.
	ReadOnly bool
	// DialTimeout bounds connecting to a server, for each connection
	// attempt: Postgres's connect_timeout and Redis's dial_timeout, unless
	// the URL sets them. Zero leaves the drivers' defaults.
	DialTimeout time.Duration
	// Logger receives the stores' warnings (a Redis server's persistence
	// and eviction settings, for one); nil discards them.
	Logger *slog.Logger
}

// Open opens the store the string names; see the package doc for the forms.
// A store that is not there is created, and an older one migrated.
func Open(ctx context.Context, s string) (storage.Store, error) {
	return OpenWith(ctx, s, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, s string, opts Options) (storage.Store, error) {
	existing := opts.OpenExisting || opts.ReadOnly
	switch {
	case s == "":
		return nil, fmt.Errorf("storeurl: empty store URL")
	case s == "mem:" || s == "memory:":
		return memstore.New(memstore.Options{}), nil
	case isPostgres(s):
		u, po, err := pgParams(s, opts.DialTimeout)
		if err != nil {
			return nil, err
		}
		po.OpenExisting, po.Logger = existing, opts.Logger
		st, err := pgstore.Open(ctx, u, po)
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case redisstore.IsClusterURL(s):
		u, prefix, err := takeParam(s, "stem_prefix", checkPrefix, "dial_timeout", opts.DialTimeout)
		if err != nil {
			return nil, err
		}
		st, err := redisstore.OpenCluster(ctx, u, redisstore.ClusterOptions{Options: redisstore.Options{Prefix: prefix, OpenExisting: existing, Logger: opts.Logger}})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	case isRedis(s):
		u, prefix, err := takeParam(s, "stem_prefix", checkPrefix, "dial_timeout", opts.DialTimeout)
		if err != nil {
			return nil, err
		}
		st, err := redisstore.Open(ctx, u, redisstore.Options{Prefix: prefix, OpenExisting: existing, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("storeurl: %w", err)
		}
		return st, nil
	}
	su, err := sqlitePath(s)
	if err != nil {
		return nil, err
	}
	st, err := sqlitestore.Open(su.path, sqlitestore.Options{Synchronous: su.sync, ShareFile: su.share, OpenExisting: opts.OpenExisting, ReadOnly: opts.ReadOnly, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("storeurl: %w", err)
	}
	return st, nil
}

// pgParams removes a Postgres store's parameters from its URL, stem_schema,
// stem_pooler and stem_listen_url, and returns the options they set, with
// connect_timeout added as takeParam does.
func pgParams(s string, timeout time.Duration) (string, pgstore.Options, error) {
	var o pgstore.Options
	u, schema, err := takeParam(s, "stem_schema", checkSchema, "connect_timeout", timeout)
	if err != nil {
		return "", o, err
	}
	u, pooler, err := takeParam(u, "stem_pooler", func(v string) error {
		if v != "transaction" && v != "session" && v != "none" {
			return errors.New("want transaction (a transaction pooler, as PgBouncer's with pool_mode=transaction), session or none")
		}
		return nil
	}, "", 0)
	if err != nil {
		return "", o, err
	}
	u, listen, err := takeParam(u, "stem_listen_url", func(v string) error {
		if !isPostgres(v) {
			return errors.New("want the database's direct postgres:// URL, escaped as a query parameter value")
		}
		return nil
	}, "", 0)
	if err != nil {
		return "", o, err
	}
	o.Schema, o.TransactionPooler, o.ListenURL = schema, pooler == "transaction", listen
	return u, o, nil
}

func isPostgres(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

func isRedis(s string) bool {
	return strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://")
}

// sqliteURL is what a SQLite store string says: the file, and the
// options its sqlite: form's parameters set.
type sqliteURL struct {
	path  string
	sync  sqlitestore.Synchronous // stem_sync
	share bool                    // stem_share_file
}

// sqlitePath reads a SQLite store string, or returns an error for a URL of
// a scheme no store has.
func sqlitePath(s string) (sqliteURL, error) {
	var path string
	switch {
	case strings.HasPrefix(s, "sqlite://"):
		path = strings.TrimPrefix(s, "sqlite://")
	case strings.HasPrefix(s, "sqlite:"):
		path = strings.TrimPrefix(s, "sqlite:")
	case strings.Contains(s, "://"):
		return sqliteURL{}, fmt.Errorf("storeurl: unknown store scheme in %q (want a SQLite path, sqlite:, postgres://, redis://, redis+cluster:// or mem:)", redact(s))
	default:
		if scheme, rest, ok := strings.Cut(s, ":"); ok && len(scheme) > 1 {
			if near := storage.Nearest(scheme, []string{"sqlite", "postgres", "postgresql", "redis", "rediss", "mem"}); near == scheme {
				return sqliteURL{}, fmt.Errorf("storeurl: %q: a %s store is written %s://HOST/…", redact(s), scheme, scheme)
			} else if near != "" {
				return sqliteURL{}, fmt.Errorf("storeurl: unknown store scheme %q in %q: did you mean %s:? (a SQLite file whose name has a ':' is written sqlite:%s:%s)",
					scheme+":", redact(s), near, scheme, rest)
			}
		}
		path = s
	}
	if base, query, ok := strings.Cut(path, "?"); ok && path != s {
		return sqliteParams(base, query)
	}
	if path == "" {
		return sqliteURL{}, fmt.Errorf("storeurl: empty SQLite path")
	}
	return sqliteURL{path: path, sync: sqlitestore.SyncNormal}, nil
}

// sqliteParams reads the query of a sqlite: store string, whose
// parameters are stem_sync and stem_share_file, and returns them with the
// path before it.
func sqliteParams(path, query string) (sqliteURL, error) {
	u, sync, err := takeParam("sqlite:x?"+query, "stem_sync", func(v string) error {
		if v != "normal" && v != "full" {
			return errors.New("want normal or full")
		}
		return nil
	}, "", 0)
	if err != nil {
		return sqliteURL{}, err
	}
	u, share, err := takeParam(u, "stem_share_file", func(v string) error {
		if v != "true" && v != "false" {
			return errors.New("want true or false")
		}
		return nil
	}, "", 0)
	if err != nil {
		return sqliteURL{}, err
	}
	if _, rest, _ := strings.Cut(u, "?"); rest != "" {
		k, _, _ := strings.Cut(rest, "=")
		return sqliteURL{}, fmt.Errorf("storeurl: unknown query parameter %q of a SQLite store (it takes stem_sync=normal or full, and stem_share_file=true or false)", k)
	}
	if path == "" {
		return sqliteURL{}, fmt.Errorf("storeurl: empty SQLite path")
	}
	r := sqliteURL{path: path, sync: sqlitestore.SyncNormal, share: share == "true"}
	if sync == "full" {
		r.sync = sqlitestore.SyncFull
	}
	return r, nil
}

// takeParam removes the query parameter name from the URL and returns its
// value ("" when absent), which check must accept; when timeout is set and
// the URL has no parameter timeoutParam, it adds one (in whole seconds, at
// least 1, which both drivers read). The other parameters reach the driver
// as they were written.
func takeParam(s, name string, check func(string) error, timeoutParam string, timeout time.Duration) (string, string, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return "", "", fmt.Errorf("storeurl: malformed URL %q: %v", redact(s), err)
	}
	var kept []string
	var value string
	found, hasTimeout := false, false
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return "", "", fmt.Errorf("storeurl: malformed query parameter name %q", k)
		}
		if key != name {
			if strings.HasPrefix(strings.ToLower(key), "stem_") && stemParams[key] != stemParams[name] {
				return "", "", unknownStemParam(key, name)
			}
			if strings.Contains(part, ";") {
				return "", "", fmt.Errorf("storeurl: the query parameter %s holds a ';', which the driver would drop with the parameter; separate parameters with & (or write a literal ';' as %%3B)", key)
			}
			hasTimeout = hasTimeout || key == timeoutParam
			kept = append(kept, part)
			continue
		}
		if found {
			return "", "", fmt.Errorf("storeurl: the query parameter %s is given more than once", name)
		}
		found = true
		if value, err = url.QueryUnescape(v); err != nil {
			return "", "", fmt.Errorf("storeurl: %s=%s: malformed escape", name, v)
		}
		if err := check(value); err != nil {
			return "", "", fmt.Errorf("storeurl: %s=%q: %v", name, value, err)
		}
	}
	if timeout > 0 && !hasTimeout {
		kept = append(kept, timeoutParam+"="+strconv.Itoa(max(1, int((timeout+time.Second-1)/time.Second))))
	}
	u.RawQuery = strings.Join(kept, "&")
	return u.String(), value, nil
}

// stemParams are the stem_ query parameters, each with the store that
// takes it.
var stemParams = map[string]string{"stem_schema": "a Postgres store", "stem_pooler": "a Postgres store", "stem_listen_url": "a Postgres store",
	"stem_prefix": "a Redis store", "stem_sync": "a SQLite store", "stem_share_file": "a SQLite store"}

// unknownStemParam refuses a stem_ parameter that the store taking name
// does not take: a misspelled or misplaced store option would otherwise
// reach the driver (pgx sends it to the server as a setting) or be
// dropped, and the store open somewhere else than meant.
func unknownStemParam(key, name string) error {
	store := stemParams[name]
	var takes []string
	for p, s := range stemParams {
		if s == store {
			takes = append(takes, p)
		}
	}
	slices.Sort(takes)
	msg := fmt.Sprintf("storeurl: unknown query parameter %q", key)
	if other, ok := stemParams[strings.ToLower(key)]; ok && other != store {
		msg += fmt.Sprintf(": it is a parameter of %s", other)
	} else if near := storage.Nearest(strings.ToLower(key), takes); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	}
	list := takes[len(takes)-1]
	if len(takes) > 1 {
		list = strings.Join(takes[:len(takes)-1], ", ") + " and " + list
	}
	return fmt.Errorf("%s (%s takes %s; parameters starting with stem_ are Stem's, not the driver's)", msg, store, list)
}

// checkSchema accepts a Postgres identifier as it may be written unquoted.
func checkSchema(v string) error {
	ok := v != "" && len(v) <= 63 && !('0' <= v[0] && v[0] <= '9')
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	if !ok {
		return errors.New("want a Postgres schema name: letters, digits and _, not starting with a digit, at most 63 bytes")
	}
	return nil
}

// checkPrefix accepts a Redis key prefix of printable characters that have
// no meaning in Redis's key patterns or a shell.
func checkPrefix(v string) error {
	ok := v != "" && len(v) <= 64
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = strings.IndexByte("_-.:/{}", c) >= 0 || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	if !ok {
		return errors.New("want a Redis key prefix: letters, digits and _ - . : / { }, at most 64 bytes")
	}
	return nil
}

// redact hides a password in a URL for error messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
