package redisstore

import (
	"context"
	"embed"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// The Lua scripts live in scripts/: one file per script, whose body defines
// main, and in scripts/lib/ the parts they share. Each file starts with a
// comment saying what it reads of KEYS and ARGV and what it replies.
//
// A script as sent to Redis is assembled from them (see assemble): the
// "#!lua" shebang, lib/header.lua, lib/clock.lua when the script reads the
// clock, the helpers the body uses (the local functions of lib/util.lua,
// lib/keys.lua, lib/attrs.lua, lib/state.lua, lib/events.lua, lib/holder.lua,
// lib/runs.lua, lib/family.lua, lib/start.lua and lib/workers.lua), the
// body, and the epilogue. Comment
// lines are dropped. New loads every script once (SCRIPT LOAD) and each
// call is an EVALSHA; go-redis sends the text again should the server
// have lost its script cache.
//
// The shebang makes Redis 7 treat each script as one that may write, so the
// server refuses it up front when out of memory instead of failing a write
// halfway through (a script does not roll back). Each body validates
// everything it needs before its first write for the same reason.
//
// A script that only reads starts its file with the shebang
// "#!lua flags=no-writes", which assemble keeps in place of the plain one:
// the server then runs it even when out of memory under noeviction (it
// refuses writes, not reads), so GetRun, ListRuns, CountRuns, ListSteps,
// LoadReplay, ListExecutions, GetCatalog and NextWake still answer on a
// full server. Such a script may call no command that writes or publishes
// (Redis refuses it at the call), so it must never set WOKE. Like every
// script it is loaded by SCRIPT LOAD and called by EVALSHA (the flags are
// part of its text), and it names in KEYS the keys it is given, building
// the others from the prefix as the other scripts do: this store's prefix
// keeps them in one slot.
//
// A script whose only writes are deletions may start with
// "#!lua flags=allow-oom" instead: the server runs it when out of memory
// too, and deleting frees memory. listworkers.lua is one, so that
// ListWorkers, which drops expired records as it lists, still answers on
// a full server. Such a script must never write anything else.
//
// Conventions: ARGV[1] is the key prefix, ARGV[2] the clock override in
// microseconds since the epoch ("" means the server's TIME). Every time is
// an integer number of microseconds, formatted with f() before it reaches a
// command: Lua's own number-to-string conversion keeps 14 digits only.
// Replies start with a status word (OK, NOTFOUND, INVALID, LEASELOST,
// BADARG, ...).
//
//go:embed scripts/*.lua scripts/lib/*.lua
var luaFiles embed.FS

// The scripts, one per file of scripts/.
var (
	createScript     = newScript("create")
	listScript       = newScript("list")
	countScript      = newScript("count")
	stepsScript      = newScript("steps")
	claimScript      = newScript("claim")
	nextWakeScript   = newScript("nextwake")
	checkpointScript = newScript("checkpoint")
	attemptsScript   = newScript("attempts")
	suspendScript    = newScript("suspend")
	takeEventScript  = newScript("takeevent")
	completeScript   = newScript("complete")
	terminateScript  = newScript("terminate")
	pauseScript      = newScript("pause")
	cancelScript     = newScript("cancel")
	resumeScript     = newScript("resume")
	restartScript    = newScript("restart")
	continueScript   = newScript("continue")
	emitScript       = newScript("emit")
	sendScript       = newScript("send")
	executionsScript = newScript("executions")
	putCatalogScript = newScript("putcatalog")
	getCatalogScript = newScript("getcatalog")
)

// allScripts are the scripts New loads.
var allScripts = []*redis.Script{
	createScript, listScript, countScript, stepsScript, claimScript, nextWakeScript, checkpointScript, attemptsScript,
	suspendScript, takeEventScript, completeScript, terminateScript, pauseScript, cancelScript, resumeScript,
	restartScript, continueScript, emitScript, sendScript, executionsScript, putCatalogScript, getCatalogScript,
}

// shebang starts every script whose file has no shebang of its own; see
// the comment on luaFiles.
const shebang = "#!lua"

// quietEnd ends a script that never makes a run ready: it has no wake-up
// to publish (lib/epilogue.lua ends the others).
const quietEnd = "return main()"

// The parts every script, or every script that needs them, is built of.
var (
	luaHeader   = luaCode("lib/header.lua")
	luaClock    = luaCode("lib/clock.lua")
	luaEpilogue = luaCode("lib/epilogue.lua")
)

// luaHelper is a local function a script body may call.
type luaHelper struct {
	name string
	src  string
}

// helpers in definition order: each may call only those before it. A script
// gets only the helpers it uses, because Redis runs a script's whole text on
// every call and each local function costs a closure allocation.
var helpers = loadHelpers("util", "keys", "attrs", "state", "events", "holder", "runs", "family", "start", "workers")

// scriptNames names each script, for the store's health log.
var scriptNames = map[*redis.Script]string{}

// readOnlyScripts are the scripts declared no-writes, which a store that
// waits for replicas sends without WAIT.
var readOnlyScripts = map[*redis.Script]bool{}

// newScript assembles scripts/<name>.lua.
func newScript(name string) *redis.Script {
	src := readLua(name + ".lua")
	sc := redis.NewScript(assemble(src))
	scriptNames[sc] = name
	if readOnly(src) {
		readOnlyScripts[sc] = true
	}
	return sc
}

// splitShebang returns the "#!lua ..." first line of a script file, or the
// plain shebang when it has none, and the rest of the file.
func splitShebang(src string) (bang, body string) {
	if !strings.HasPrefix(src, "#!") {
		return shebang, src
	}
	bang, body, _ = strings.Cut(src, "\n")
	return strings.TrimSpace(bang), body
}

// readOnly reports whether a script's shebang declares it no-writes.
func readOnly(text string) bool {
	bang, _, _ := strings.Cut(text, "\n")
	_, flags, ok := strings.Cut(bang, "flags=")
	if !ok {
		return false
	}
	flags, _, _ = strings.Cut(flags, " ")
	for f := range strings.SplitSeq(flags, ",") {
		if f == "no-writes" {
			return true
		}
	}
	return false
}

// readLua returns the text of a file under scripts/; the files are part of
// the binary, so a missing one is a bug caught by any test.
func readLua(name string) string {
	b, err := luaFiles.ReadFile(path.Join("scripts", name))
	if err != nil {
		panic(fmt.Sprintf("redisstore: %v", err))
	}
	return string(b)
}

// luaCode is a file under scripts/ without its comment lines.
func luaCode(name string) string { return code(readLua(name)) }

// code drops the blank lines and the lines that are only a comment ("--"),
// so that neither reaches the server nor makes callsHelper see a call that
// a comment merely mentions. Comments after code on a line stay, so they
// must not name helpers with their parentheses.
func code(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		b.WriteString(strings.TrimSuffix(line, "\n"))
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// loadHelpers reads scripts/lib/<file>.lua for each file, in order, and
// splits each at its top-level "local function" lines into helpers.
func loadHelpers(files ...string) []luaHelper {
	const start = "local function "
	var hs []luaHelper
	for _, file := range files {
		name := "lib/" + file + ".lua"
		first := len(hs)
		for line := range strings.Lines(luaCode(name)) {
			if rest, ok := strings.CutPrefix(line, start); ok {
				fn, _, ok := strings.Cut(rest, "(")
				if !ok {
					panic("redisstore: " + name + ": malformed function line " + line)
				}
				hs = append(hs, luaHelper{name: fn})
			} else if len(hs) == first {
				panic("redisstore: " + name + ": code outside a local function: " + line)
			}
			hs[len(hs)-1].src += line
		}
	}
	for i := range hs {
		hs[i].src = strings.TrimSuffix(hs[i].src, "\n")
	}
	return hs
}

// assemble builds a script's text: the shebang (the file's own, or the
// plain one) and header, the clock when the script reads it, the helpers
// the body uses (directly or through other helpers), the body, and the
// epilogue that publishes a wake-up when the script may make a run ready
// (sets WOKE), or a plain return otherwise. A read-only script that sets
// WOKE is a bug, caught when the package loads.
func assemble(src string) string {
	bang, body := splitShebang(src)
	body = code(body)
	used := make([]bool, len(helpers))
	text := withHelpers(body, used)
	end := quietEnd
	if strings.Contains(text, "WOKE = true") {
		if readOnly(bang) {
			panic("redisstore: a no-writes script sets WOKE, whose epilogue publishes: " + bang)
		}
		end = luaEpilogue
		text = withHelpers(text+"\n"+end, used)
	}
	var b strings.Builder
	b.WriteString(bang)
	b.WriteByte('\n')
	b.WriteString(luaHeader)
	b.WriteByte('\n')
	if strings.Contains(text, "NOW") {
		b.WriteString(luaClock)
		b.WriteByte('\n')
	}
	for i, h := range helpers {
		if used[i] {
			b.WriteString(h.src)
			b.WriteByte('\n')
		}
	}
	b.WriteString(body)
	b.WriteByte('\n')
	b.WriteString(end)
	b.WriteByte('\n')
	return b.String()
}

// withHelpers marks in used every helper that text calls, directly or
// through other helpers, and returns text with their sources appended.
func withHelpers(text string, used []bool) string {
	for changed := true; changed; {
		changed = false
		for i := len(helpers) - 1; i >= 0; i-- {
			if !used[i] && callsHelper(text, helpers[i].name) {
				used[i] = true
				text += "\n" + helpers[i].src
				changed = true
			}
		}
	}
	return text
}

// callsHelper reports whether Lua text calls the named function.
func callsHelper(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name+"(")
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isIdentByte(text[j-1]) {
			return true
		}
		i = j + 1
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// run calls a script (EVALSHA) with the prefix and clock as ARGV[1] and
// ARGV[2], followed by args, bounded by the call timeout. The claim script
// is refused while the server's maxmemory-policy may evict keys (see
// claimAllowed).
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if sc == claimScript {
		if err := s.claimAllowed(ctx); err != nil {
			return nil, err
		}
	}
	argv := make([]any, 0, len(args)+2)
	argv = append(argv, s.keys.prefix, s.clockArg())
	argv = append(argv, args...)
	start := time.Now()
	cctx, cancel := s.bound(ctx)
	defer cancel()
	var v any
	var err error
	if s.waitReplicas > 0 && !readOnlyScripts[sc] {
		v, err = s.runWaited(cctx, sc, keys, argv)
	} else {
		v, err = sc.Run(cctx, s.client, keys, argv...).Result()
	}
	if err = s.outcome(cctx, start, scriptNames[sc]+" script", err); err != nil {
		return nil, s.wrapErr(err)
	}
	return v, nil
}

// status splits a script's reply into its status word and the rest, and
// maps the error words to the contract's sentinels.
func status(op, id string, v any) ([]any, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("redisstore: %s: unexpected reply %v", op, v)
	}
	word, _ := list[0].(string)
	switch word {
	case "NOTFOUND":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrRunNotFound)
	case "INVALID":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrInvalidState)
	case "LEASELOST":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrLeaseLost)
	case "BADARG":
		return nil, fmt.Errorf("redisstore: %s %q: %w", op, id, storage.ErrInvalidArgument)
	}
	return list, nil
}
