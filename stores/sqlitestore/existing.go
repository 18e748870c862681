package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stemflow/stem/storage"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrReadOnly is what every write method of a Store opened with
// Options.ReadOnly returns (wrapped, naming the operation and the file).
var ErrReadOnly = errors.New("the store was opened read-only")

// ErrForeignFile is what Open and StoredSchemaVersion return (wrapped,
// with storage.ErrNotStore, naming the file and some of its tables) for a
// SQLite database another application made: one with tables, none of them
// Stem's. Open adds Stem's tables to such a file only with
// Options.ShareFile.
var ErrForeignFile = errors.New("the file holds another application's tables and no Stem store")

// notStoreError is a storage.ErrNotStore that reads as its own message.
type notStoreError struct{ msg string }

func (e *notStoreError) Error() string { return e.msg }
func (e *notStoreError) Unwrap() error { return storage.ErrNotStore }

// foreignError is a storage.ErrNotStore and an ErrForeignFile.
type foreignError struct{ msg string }

func (e *foreignError) Error() string   { return e.msg }
func (e *foreignError) Unwrap() []error { return []error{storage.ErrNotStore, ErrForeignFile} }

// maxForeignNames is how many of a foreign file's tables its error names.
const maxForeignNames = 3

// refuseForeign is the error for the file at path that holds the tables
// named (the first few, sorted, of count tables) and no Stem store; hint,
// when set, says what to do.
func refuseForeign(path string, names []string, count int, hint string) error {
	list := strings.Join(names, ", ")
	if count > len(names) {
		list += fmt.Sprintf(" and %d more", count-len(names))
	}
	msg := fmt.Sprintf("sqlitestore: no Stem store at %s: the file was made by another application (it has tables, none of them Stem's: %s)", path, list)
	if hint != "" {
		msg += "; " + hint
	}
	return &foreignError{msg}
}

func notStore(format string, args ...any) error {
	return &notStoreError{"sqlitestore: " + fmt.Sprintf(format, args...)}
}

// fileKind is what a path holds, as far as a Store is concerned.
type fileKind int

const (
	fileMissing fileKind = iota // no file
	fileEmpty                   // an empty file, or a SQLite database without tables
	fileForeign                 // a SQLite database with tables, none of them Stem's
	fileStem                    // a Stem store (its version is reported with it)
)

// fileState is what inspect found at a path.
type fileState struct {
	kind    fileKind
	version int // a Stem store's schema version
	// tables counts a foreign file's tables; names are the first few of
	// them, sorted, for its error.
	tables int
	names  []string
}

// inspect finds out what path holds without creating or changing anything:
// the file is read through a read-only connection that sets no pragma that
// writes (not even journal_mode). A Stem store's version is its newest
// applied migration. Open (unless Options.ShareFile), OpenExisting,
// ReadOnly and StoredSchemaVersion, and through it the stem command's
// init, all judge a file by it.
func inspect(ctx context.Context, path string, opts Options) (fileState, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileState{kind: fileMissing}, nil
	case err != nil:
		return fileState{}, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	case fi.IsDir():
		return fileState{}, notStore("no Stem store at %s: it is a directory", path)
	case fi.Size() == 0:
		return fileState{kind: fileEmpty}, nil
	}
	dsn, err := readOnlyDSN(path, opts)
	if err != nil {
		return fileState{}, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fileState{}, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var tables, stem int
	q := `SELECT count(*), count(*) FILTER (WHERE name = 'stem_schema_migrations') FROM sqlite_schema WHERE type = 'table'`
	_, err = retryBusy(ctx, storage.LoggerOr(opts.Logger), func() (struct{}, error) {
		return struct{}{}, db.QueryRowContext(ctx, q).Scan(&tables, &stem)
	})
	var se *sqlite.Error
	switch {
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB:
		return fileState{}, notStore("no Stem store at %s: the file is not a SQLite database", path)
	case err != nil:
		return fileState{}, fmt.Errorf("sqlitestore: open %s: reading the schema: %w", path, err)
	case tables == 0:
		return fileState{kind: fileEmpty}, nil
	case stem == 0:
		st := fileState{kind: fileForeign, tables: tables}
		if st.names, err = tableNames(ctx, db); err != nil {
			return fileState{}, fmt.Errorf("sqlitestore: open %s: reading the schema: %w", path, err)
		}
		return st, nil
	}
	st := fileState{kind: fileStem}
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM stem_schema_migrations`).Scan(&st.version); err != nil {
		return fileState{}, fmt.Errorf("sqlitestore: open %s: reading the schema version: %w", path, err)
	}
	return st, nil
}

// tableNames returns the first few tables of a database, sorted.
func tableNames(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name LIMIT ?`, maxForeignNames)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// checkExisting refuses, with storage.ErrNotStore, a path that does not
// hold a Stem store at the schema version this code knows: Options.ReadOnly
// and Options.OpenExisting never create, migrate or convert a file.
func checkExisting(ctx context.Context, path string, opts Options) error {
	st, err := inspect(ctx, path, opts)
	if err != nil {
		return err
	}
	switch st.kind {
	case fileMissing:
		return notStore("no Stem store at %s: the file does not exist", path)
	case fileEmpty:
		return notStore("no Stem store at %s: the file is empty", path)
	case fileForeign:
		return refuseForeign(path, st.names, st.tables, "")
	}
	return checkVersion(path, st.version)
}

// shareHint is what the error of Open on another application's file
// tells the caller to do.
const shareHint = "give Stem a file of its own, or set Options.ShareFile (stem_share_file=true in a sqlite: store URL) to add Stem's tables beside the application's"

// checkNotForeign refuses, with storage.ErrNotStore and ErrForeignFile, a
// file that holds another application's tables and no Stem store: Open
// would otherwise add Stem's tables beside them unannounced.
func checkNotForeign(ctx context.Context, path string, opts Options) error {
	st, err := inspect(ctx, path, opts)
	if err != nil || st.kind != fileForeign {
		return err
	}
	return refuseForeign(path, st.names, st.tables, shareHint)
}

// checkVersion refuses a Stem store at a schema version other than this
// code's.
func checkVersion(path string, version int) error {
	switch latest := SchemaVersion(); {
	case version > latest:
		return notStore("the Stem store at %s is at schema version %d, newer than this program knows (%d); upgrade the program", path, version, latest)
	case version < latest:
		return notStore("the Stem store at %s is at schema version %d, this program uses version %d; run `stem init` or a worker of this version to migrate it", path, version, latest)
	}
	return nil
}

// StoredSchemaVersion reports the schema version of the Stem store at path
// without creating or changing anything: 0 when there is no file, or an
// empty one (where Open would create a store). A file another application
// made (a SQLite database with tables, none of them Stem's) is refused with
// storage.ErrNotStore and ErrForeignFile, naming some of its tables; a
// directory and a file that is not a SQLite database with
// storage.ErrNotStore. A version newer than SchemaVersion is reported as it
// is.
func StoredSchemaVersion(ctx context.Context, path string) (int, error) {
	if err := checkPath(path); err != nil {
		return 0, err
	}
	st, err := inspect(ctx, path, Options{})
	if err != nil {
		return 0, err
	}
	if st.kind == fileForeign {
		return 0, refuseForeign(path, st.names, st.tables, "")
	}
	return st.version, nil
}

// checkPath refuses what is not the path of a database file.
func checkPath(path string) error {
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return fmt.Errorf("sqlitestore: open %q: %w: want the path of a database file (for a store in memory, use memstore)", path, storage.ErrInvalidArgument)
	}
	return nil
}

// readOnlyDSN is the connection string of a read-only connection: a file:
// URI with mode=ro, so SQLite opens the file read-only and never creates
// it, and only the pragmas that write nothing (busy_timeout, query_only).
// On a database in WAL mode SQLite still creates the -wal and -shm files
// beside it when they are missing, as any reader does.
func readOnlyDSN(path string, opts Options) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(max(opts.BusyTimeout, 0).Milliseconds(), 10)+")")
	q.Add("_pragma", "query_only(1)")
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String(), nil
}

// openReadOnly finishes Open for Options.ReadOnly: the read pool only, on
// read-only connections; no writer, no checkpointer.
func (s *Store) openReadOnly() (*Store, error) {
	dsn, err := readOnlyDSN(s.path, s.opts)
	if err != nil {
		return nil, err
	}
	s.rdb, err = sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
	}
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	s.reads.init(s.rdb, s.opts.ReadConns)
	// Close waits for these as it would for the writer and checkpointer.
	close(s.writerDone)
	close(s.ckptDone)
	return s, nil
}

// refuseReadOnly is the error of a write on a read-only Store.
func (s *Store) refuseReadOnly(op string) error {
	return fmt.Errorf("sqlitestore: %s: %w (%s)", op, ErrReadOnly, s.path)
}
