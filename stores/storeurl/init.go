package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/pgstore"
	"github.com/stemflow/stem/stores/redisstore"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// InitReport says what Init found and did.
type InitReport struct {
	// Store names the store: the SQLite path, or the URL without its
	// password.
	Store string
	// From is the schema version Init found, 0 when there was no store;
	// To is the version it left, the one this code knows. From == To:
	// the store was already current and Init changed nothing.
	From, To int
}

// String says what Init did, in one line: "created a Stem store at
// stem.db (schema version 2)", "migrated the Stem store at stem.db from
// schema version 1 to 2", or "the Stem store at stem.db is already current
// (schema version 2)".
func (r InitReport) String() string {
	switch {
	case r.From == 0:
		return fmt.Sprintf("created a Stem store at %s (schema version %d)", r.Store, r.To)
	case r.From < r.To:
		return fmt.Sprintf("migrated the Stem store at %s from schema version %d to %d", r.Store, r.From, r.To)
	}
	return fmt.Sprintf("the Stem store at %s is already current (schema version %d)", r.Store, r.To)
}

// Init creates the store the string names (see the package doc), or
// migrates the one there to the schema version this code knows, and says
// which it did; a current store is left as it is. It is what a worker's
// Open does, made explicit for an operator, with one difference: what
// holds another application's data (a SQLite database, a Postgres schema
// with tables, none of them Stem's) is refused with storage.ErrNotStore and
// left unchanged, unless a sqlite: URL says stem_share_file=true. mem: has nothing to initialise and is refused. Only
// DialTimeout and Logger of opts are used.
func Init(ctx context.Context, s string, opts Options) (InitReport, error) {
	opts.OpenExisting, opts.ReadOnly = false, false
	switch {
	case s == "":
		return InitReport{}, fmt.Errorf("storeurl: init: empty store URL")
	case s == "mem:" || s == "memory:":
		return InitReport{}, fmt.Errorf("storeurl: init: %s is a new, empty store each time it is opened: there is nothing to create or migrate", s)
	case isPostgres(s):
		return initPostgres(ctx, s, opts)
	case isRedis(s) || redisstore.IsClusterURL(s):
		return initRedis(ctx, s, opts)
	}
	su, err := sqlitePath(s)
	if err != nil {
		return InitReport{}, err
	}
	r := InitReport{Store: su.path, To: sqlitestore.SchemaVersion()}
	if r.From, err = sqlitestore.StoredSchemaVersion(ctx, su.path); err != nil && !(su.share && errors.Is(err, sqlitestore.ErrForeignFile)) {
		return InitReport{}, fmt.Errorf("storeurl: %w", err)
	}
	st, err := sqlitestore.Open(su.path, sqlitestore.Options{Synchronous: su.sync, ShareFile: su.share, OpenExisting: r.From == r.To, Logger: opts.Logger})
	if err != nil {
		return InitReport{}, fmt.Errorf("storeurl: %w", err)
	}
	if err := st.Close(); err != nil {
		return InitReport{}, fmt.Errorf("storeurl: %w", err)
	}
	return r, nil
}

// initPostgres reads the schema's version (its newest migration), opens
// the store as a worker does (which creates and migrates the schema), and
// reads the version again.
func initPostgres(ctx context.Context, s string, opts Options) (InitReport, error) {
	u, po, err := pgParams(s, opts.DialTimeout)
	if err != nil {
		return InitReport{}, err
	}
	schema := cmp.Or(po.Schema, pgstore.DefaultSchema)
	r := InitReport{Store: redact(s)}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return InitReport{}, fmt.Errorf("storeurl: init: %w", err)
	}
	if po.TransactionPooler && !strings.Contains(u, "default_query_exec_mode") {
		// Behind a transaction pooler: prepare no named statement.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return InitReport{}, fmt.Errorf("storeurl: init: connecting to %s: %w", pgHost(u), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	foreign := false
	if r.From, foreign, err = pgVersion(ctx, conn, schema); err != nil {
		return InitReport{}, fmt.Errorf("storeurl: init: schema %s on %s: %w", schema, pgHost(u), err)
	}
	if foreign {
		return InitReport{}, fmt.Errorf("storeurl: init: %w: the schema %s on %s holds tables, none of them Stem's; name another schema with stem_schema", storage.ErrNotStore, schema, pgHost(u))
	}
	po.Schema, po.Logger = schema, opts.Logger
	st, err := pgstore.Open(ctx, u, po)
	if err != nil {
		return InitReport{}, fmt.Errorf("storeurl: %w", err)
	}
	st.Close()
	if r.To, _, err = pgVersion(ctx, conn, schema); err != nil {
		return InitReport{}, fmt.Errorf("storeurl: init: schema %s on %s: %w", schema, pgHost(u), err)
	}
	return r, nil
}

// pgVersion returns the version of the Stem store in schema (its newest
// applied migration; 0 when the schema or its migrations table is
// missing), and whether the schema holds tables but no Stem store.
func pgVersion(ctx context.Context, conn *pgx.Conn, schema string) (version int, foreign bool, err error) {
	var tables int
	var hasMigrations bool
	err = conn.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(table_name = 'migrations'), false)
		FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables, &hasMigrations)
	if err != nil || tables == 0 {
		return 0, false, err
	}
	if !hasMigrations {
		return 0, true, nil
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+pgx.Identifier{schema, "migrations"}.Sanitize()).Scan(&version)
	return version, false, err
}

// pgHost is the server a Postgres URL names, for errors.
func pgHost(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return "the server"
}

// initRedis opens the store as a worker does, which marks the prefix as a
// Stem store (its version key) unless it is one. Redis stores have one
// version of their key layout so far (redisstore's version key holds 1): a
// prefix that opens as an existing store is current, any other is created.
func initRedis(ctx context.Context, s string, opts Options) (InitReport, error) {
	r := InitReport{Store: redact(s), From: 1, To: 1}
	st, err := OpenWith(ctx, s, Options{OpenExisting: true, DialTimeout: opts.DialTimeout, Logger: opts.Logger})
	switch {
	case errors.Is(err, storage.ErrNotStore):
		r.From = 0
	case err != nil:
		return InitReport{}, err
	default:
		st.Close()
	}
	if st, err = OpenWith(ctx, s, opts); err != nil {
		return InitReport{}, err
	}
	st.Close()
	return r, nil
}
