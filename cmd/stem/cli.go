package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storeurl"
)

const (
	// defaultStore is the store when neither --store nor $STEM_STORE names
	// one: the SQLite file a worker creates by default.
	defaultStore = "stem.db"
	// defaultLimit is the page size of runs.
	defaultLimit = 50
	// timeout bounds a whole command; dialTimeout each connection attempt.
	timeout     = 30 * time.Second
	dialTimeout = 5 * time.Second
	// sealedPrefix starts an error text sealed by a worker's codec (see
	// runtime.Codec); without the key it stays sealed.
	sealedPrefix = "stem-sealed:"
)

// run is the whole command; main only exits with its code: 0 done, 1 the
// command failed, 2 it was called wrongly or given bad input (nothing was
// opened), 3 stem check found runs the build could not continue, 4 stem
// check could not judge.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The Redis client logs every failed dial of its pool; the command
	// reports a failure in one line instead.
	redis.SetLogger(quietRedis{})

	g := &globals{store: os.Getenv("STEM_STORE")}
	top := flag.NewFlagSet("stem", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return 0
		}
		fmt.Fprintf(stderr, "stem: %v\n\n%s", flagError(top, err), usage())
		return 2
	}
	if top.NArg() == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	name, rest := top.Arg(0), top.Args()[1:]
	if name == "help" {
		return help(rest, stdout, stderr)
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintln(stderr, unknownCommand("stem", name))
		return 2
	}
	if len(cmd.subs) > 0 {
		sub, subArgs, code := pickSub(cmd, rest, stdout, stderr)
		if sub == nil {
			return code
		}
		cmd, rest = sub, subArgs
	}

	fs := flag.NewFlagSet("stem "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	do := cmd.setup(fs)
	pos, err := parseInterleaved(fs, rest)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, cmd.help(fs))
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "stem %s: %v\n\n%s", cmd.name, flagError(fs, err), cmd.help(fs))
		return 2
	case len(pos) < cmd.min:
		fmt.Fprintf(stderr, "stem %s: want %s\n\n%s", cmd.name, cmd.args, cmd.help(fs))
		return 2
	case len(pos) > cmd.max:
		fmt.Fprintf(stderr, "stem %s: unexpected argument %q\n\n%s", cmd.name, pos[cmd.max], cmd.help(fs))
		return 2
	}
	codec, err := g.codec()
	if err != nil {
		fmt.Fprintf(stderr, "stem %s: %v\n", cmd.name, err)
		return 2
	}

	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cmd.timeout, timeout))
	defer cancel()
	c := &call{ctx: ctx, g: g, codec: codec, in: stdin, out: newPrinter(stdout, g.json), errw: stderr, readOnly: cmd.readOnly}
	defer c.close()
	err = do(c, pos)
	if err == nil {
		return 0
	}
	var u usageError
	var o openError
	var in inputError
	var arg argError
	var code exitCode
	switch {
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "stem %s: %s\n\n%s", cmd.name, u.msg, cmd.help(fs))
		return 2
	case errors.As(err, &arg):
		fmt.Fprintf(stderr, "stem %s: %s\n(see \"stem %s -h\")\n", cmd.name, clean(arg.msg), cmd.name)
		return 2
	case errors.As(err, &in):
		fmt.Fprintf(stderr, "stem %s: %s\n", cmd.name, clean(in.msg))
		return 2
	case errors.As(err, &o):
		fmt.Fprintf(stderr, "stem: %s\n", clean(o.msg))
		return 1
	}
	prefix := "stem " + cmd.name
	if c.subject != "" {
		prefix += " " + c.subject
	}
	fmt.Fprintf(stderr, "%s: %s\n", clean(prefix), clean(c.describe(err)))
	return 1
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	store        string // "" means defaultStore
	storeSet     bool   // given as --store
	json         bool
	codecKey     string
	codecKeyFile string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.Func("store", "", func(s string) error {
		if s == "" {
			return errors.New("empty store")
		}
		g.store, g.storeSet = s, true
		return nil
	})
	fs.BoolVar(&g.json, "json", g.json, "")
	// --codec-key may be given again, and a value may list keys separated
	// by commas: newest first, in the order given.
	fs.Func("codec-key", "", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		if g.codecKey != "" {
			g.codecKey += ","
		}
		g.codecKey += s
		return nil
	})
	fs.Func("codec-key-file", "", func(s string) error {
		if g.codecKeyFile != "" && g.codecKeyFile != s {
			return errors.New("give --codec-key-file once: the file lists the keys, one a line, newest first")
		}
		g.codecKeyFile = s
		return nil
	})
}

var globalFlags = []string{"store", "json", "codec-key", "codec-key-file"}

func (g *globals) storeURL() string {
	if g.store == "" {
		return defaultStore
	}
	return g.store
}

// storeName is the store as errors name it: the path, or the URL without
// its password.
func (g *globals) storeName() string {
	s := g.storeURL()
	if !strings.Contains(s, "://") {
		return strings.TrimPrefix(s, "sqlite:")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.Scheme == "sqlite" {
		return u.Host + u.Path
	}
	return u.Redacted()
}

// codec returns the payload codec the key flags or $STEM_CODEC_KEY name,
// or nil without a key. Each names one key or several, newest first: the
// codec seals with the first and opens what any of them sealed, so a
// command keeps reading a store whose workers are rotating keys.
func (g *globals) codec() (runtime.Codec, error) {
	if g.codecKey != "" && g.codecKeyFile != "" {
		return nil, errors.New("give --codec-key or --codec-key-file, not both")
	}
	var keys [][]byte
	var err error
	switch {
	case g.codecKey != "":
		keys, err = decodeKey(g.codecKey, "--codec-key")
	case g.codecKeyFile != "":
		b, rerr := os.ReadFile(g.codecKeyFile)
		if rerr != nil {
			return nil, fmt.Errorf("--codec-key-file: %v", rerr)
		}
		keys, err = decodeKey(string(b), "the file "+g.codecKeyFile)
		if err != nil && validKeyLen(len(b)) {
			keys, err = [][]byte{b}, nil // the raw key bytes
		}
	case os.Getenv("STEM_CODEC_KEY") != "":
		keys, err = decodeKey(os.Getenv("STEM_CODEC_KEY"), "$STEM_CODEC_KEY")
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return runtime.NewAESGCMCodec(keys[0], keys[1:]...)
}

func validKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// decodeKey reads the AES keys in s, newest first: separated by commas or
// on lines of their own (blank lines and lines starting with # are
// skipped), each written as hex or base64 (tried in that order). A key
// itself never appears in an error.
func decodeKey(s, from string) ([][]byte, error) {
	var fields []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f != "" {
				fields = append(fields, f)
			}
		}
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s holds no codec key", from)
	}
	keys := make([][]byte, len(fields))
next:
	for i, f := range fields {
		which := "the codec key in " + from
		if len(fields) > 1 {
			which = fmt.Sprintf("codec key %d of %d in %s", i+1, len(fields), from)
		}
		if b, err := hex.DecodeString(f); err == nil && validKeyLen(len(b)) {
			keys[i] = b
			continue
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(f); err == nil {
				if !validKeyLen(len(b)) {
					return nil, fmt.Errorf("%s is %d bytes; want 16, 24 or 32", which, len(b))
				}
				keys[i] = b
				continue next
			}
		}
		return nil, fmt.Errorf("%s is neither hex nor base64 of 16, 24 or 32 bytes", which)
	}
	return keys, nil
}

// quietRedis discards the Redis client's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// call is one command's run: its flags, its output, and the store and
// engine, opened on first use so a refused call opens nothing.
type call struct {
	ctx    context.Context
	g      *globals
	codec  runtime.Codec
	in     io.Reader // what a JSON argument "-" reads
	out    *printer
	errw   io.Writer // the command's standard error, for warnings
	store  storage.Store
	engine *runtime.Engine
	// readOnly opens the store read-only (the command only reads);
	// otherwise it is opened read-write, but only if it exists already.
	readOnly bool
	// subject is what the command acts on (a run ID, a workflow, a topic),
	// named by its errors.
	subject string
}

// openError is a store that could not be opened; it is reported without
// the command's name.
type openError struct{ msg string }

func (o openError) Error() string { return o.msg }

// usageError is a call that is wrong whatever the store holds: exit 2 with
// the command's usage.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// inputError is input the command cannot use (a file that is not there or
// does not parse): exit 2 with one line that says which and what, without
// the usage.
type inputError struct{ msg string }

func (i inputError) Error() string { return i.msg }

// argError is an argument the command cannot use although the call is
// right (a JSON argument that does not parse, a @FILE that cannot be
// read): exit 2 with one line that says what, and a pointer to the
// command's help rather than the whole usage, which would bury it.
type argError struct{ msg string }

func (a argError) Error() string { return a.msg }

// exitCode ends a command that has said all it has to say with a code of
// its own.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// open opens the store and a client engine on it. The store must be a Stem
// store at the schema version this program knows: open never creates,
// migrates or converts one (stem init does), and a command that only reads
// opens it read-only.
func (c *call) open() (*runtime.Engine, error) {
	if c.engine != nil {
		return c.engine, nil
	}
	opts := storeurl.Options{DialTimeout: dialTimeout, Logger: slog.New(slog.DiscardHandler)}
	if c.readOnly {
		opts.ReadOnly = true
	} else {
		opts.OpenExisting = true
	}
	st, err := storeurl.OpenWith(c.ctx, c.g.storeURL(), opts)
	if err != nil {
		return nil, c.openError(err)
	}
	e, err := runtime.New(runtime.Config{Store: st, Codec: c.codec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.Close()
		return nil, openError{trimPrefixes(err.Error())}
	}
	c.store, c.engine = st, e
	return e, nil
}

// openError says in one line why the store could not be opened. A store
// that is not there, or not Stem's, is named by the message itself.
func (c *call) openError(err error) error {
	if errors.Is(err, storage.ErrNotStore) {
		// The stores' messages say what is missing; the sentinel's own
		// text adds nothing.
		msg := strings.Replace(trimPrefixes(err.Error()), storage.ErrNotStore.Error()+": ", "", 1)
		msg = strings.TrimSuffix(msg, ": "+storage.ErrNotStore.Error())
		msg = c.initHint(msg)
		if !c.g.storeSet && os.Getenv("STEM_STORE") == "" {
			msg += " (name your workers' store with --store or $STEM_STORE)"
		}
		return openError{oneLine(msg)}
	}
	return openError{fmt.Sprintf("cannot open the store %s: %s", c.g.storeName(), oneLine(trimPrefixes(err.Error())))}
}

// initHint points a refusal of a store that is not there, or at an older
// schema, to stem init, which creates or migrates it. The stores' own
// words are for programs ("a worker's Open creates it"); an operator's
// next step is a command. Another application's database and a newer
// schema are left as they are: stem init would refuse them too.
func (c *call) initHint(msg string) string {
	run := `"stem init"`
	if c.g.storeSet {
		run = fmt.Sprintf(`"stem init --store %s"`, shellQuote(c.g.storeName()))
	}
	for _, missing := range []string{": the file does not exist", ": the file is empty"} {
		if strings.HasSuffix(msg, missing) {
			return msg + "; run " + run + " first to create one"
		}
	}
	for _, r := range [][2]string{
		{" (a worker's Open creates it)", "; run " + run + " first to create one"},
		{"a worker's Open (or Migrate) upgrades it", "run " + run + " (or a worker of this version) to migrate it"},
		{"open it once without OpenExisting (as a worker does), which upgrades it in place,", "run " + run + " (or a worker of this version) to upgrade it in place,"},
	} {
		if strings.Contains(msg, r[0]) {
			return strings.Replace(msg, r[0], r[1], 1)
		}
	}
	return msg
}

func (c *call) close() {
	if c.engine != nil {
		c.engine.Close()
	}
	if c.store != nil {
		c.store.Close()
	}
}

// describe turns an error into one line for an operator, without the
// layers' prefixes ("sqlitestore: get run: stem: run not found").
func (c *call) describe(err error) string {
	switch {
	case errors.Is(err, runtime.ErrRunNotFound):
		return "run not found in " + c.g.storeName()
	case errors.Is(err, runtime.ErrInvalidState):
		if c.engine != nil && c.subject != "" {
			if r, gerr := c.engine.Get(c.ctx, c.subject); gerr == nil {
				return fmt.Sprintf("not allowed: the run is %s", r.Status)
			}
		}
		return "not allowed in the run's state"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer from the store %s within %v", c.g.storeName(), timeout)
	}
	msg := err.Error()
	for _, s := range []error{runtime.ErrDecode, runtime.ErrPayloadTooLarge, runtime.ErrUnknownWorkflow, runtime.ErrUnknownQueue, runtime.ErrInvalidArgument, runtime.ErrClosed} {
		if errors.Is(err, s) {
			if i := strings.Index(msg, s.Error()); i >= 0 {
				msg = msg[i:]
			}
			break
		}
	}
	msg = strings.TrimPrefix(msg, runtime.ErrInvalidArgument.Error()+": ")
	return oneLine(trimPrefixes(msg))
}

// trimPrefixes removes the package prefixes errors collect on their way up.
func trimPrefixes(s string) string {
	for {
		t := s
		for _, p := range []string{"storeurl: ", "sqlitestore: ", "pgstore: ", "redisstore: ", "memstore: ", "stem: "} {
			t = strings.TrimPrefix(t, p)
		}
		if t == s {
			return s
		}
		s = t
	}
}

// pickSub finds the subcommand of cmd that args name: the first argument
// that is not one of stem's own flags (those may come before it), and
// returns it with the other arguments. Without one (an unknown one, or a
// flag of the subcommand before it), it says so and returns the exit code.
func pickSub(cmd *command, args []string, stdout, stderr io.Writer) (*command, []string, int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, cmd.help(flag.NewFlagSet(cmd.name, flag.ContinueOnError)))
			return nil, nil, 0
		}
		if a == "--" {
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !slices.Contains(globalFlags, name) {
				fmt.Fprintf(stderr, "stem %s: give the subcommand before the flag %s: stem %s SUBCOMMAND ... (%s)\n\n%s", cmd.name, a, cmd.name, cmd.subNames(), cmd.help(flag.NewFlagSet(cmd.name, flag.ContinueOnError)))
				return nil, nil, 2
			}
			if !hasValue && name != "json" {
				i++ // the flag's value
			}
			continue
		}
		sub := cmd.sub(a)
		if sub == nil {
			fmt.Fprintln(stderr, unknownSub(cmd, a))
			return nil, nil, 2
		}
		return sub, append(slices.Clone(args[:i]), args[i+1:]...), 0
	}
	fmt.Fprintf(stderr, "stem %s: want a subcommand: %s\n\n%s", cmd.name, cmd.subNames(), cmd.help(flag.NewFlagSet(cmd.name, flag.ContinueOnError)))
	return nil, nil, 2
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments ("show order-1 --json"), and returns the latter. An
// argument after "--", or one that is a negative number (a JSON payload),
// is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			return append(pos, args[1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' || json.Valid([]byte(a)) {
			pos = append(pos, a)
			args = args[1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := args[:len(args)-len(rest)]; len(used) > 0 && used[len(used)-1] == "--" {
			return append(pos, rest...), nil
		}
		args = rest
	}
	return pos, nil
}
