package runtime

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// The deterministic helpers (Now, Random, UUID, SideEffect) record each
// value as a checkpoint of kind KindStep, under a key the runtime owns:
// it starts with '#', which no key a workflow passes may contain (see
// storage.CheckStepKey), and carries a second '#' before the call's
// number, so it is never a user key's iteration either ("#now#0",
// "#random#2", "#uuid#0", "#side/<name>#0"). The calls of each key number
// themselves by call order in the execution, as autoversion steps do, and
// the counts ride with the suspension state, so a replay that makes
// another number of calls before its suspension is caught. Reusing
// KindStep keeps every store and tool reading them as the steps they are:
// values computed once and replayed.
const (
	nowKey        = "#now"
	randomKey     = "#random"
	uuidKey       = "#uuid"
	sideEffectKey = "#side/"
)

// IsHelperKey reports whether a checkpoint key is one of the deterministic
// helpers' (Now, Random, UUID, SideEffect) rather than a step's: such keys
// begin with '#', which a workflow's own keys may not contain.
func IsHelperKey(key string) bool {
	return len(key) > 0 && key[0] == '#'
}

// Now returns the current time, recorded at the call: the first time the
// workflow's code reaches this call it reads the engine's clock and
// checkpoints the time; every replay of the run (after a crash, a sleep,
// on another worker) returns the recorded time. Each call is its own
// durable call, numbered by call order in the execution, so a loop gets a
// fresh time per iteration. Use it instead of time.Now in a workflow.
func (c *WorkflowContext) Now() time.Time {
	return mustRecord(c, nowKey, func(string) (time.Time, error) {
		return c.exec.engine.clock.Now().UTC().Round(0), nil
	})
}

// Random returns a random number, recorded at the call like Now's time:
// replays return the same number. Use it instead of math/rand in a
// workflow.
func (c *WorkflowContext) Random() uint64 {
	return mustRecord(c, randomKey, func(key string) (uint64, error) {
		var b [8]byte
		c.exec.draw(key, b[:])
		return binary.BigEndian.Uint64(b[:]), nil
	})
}

// UUID returns a random (version 4) UUID in its canonical text form,
// recorded at the call like Now's time: replays return the same UUID. Use
// it instead of uuid.New in a workflow.
func (c *WorkflowContext) UUID() string {
	return mustRecord(c, uuidKey, func(key string) (string, error) {
		var b [16]byte
		c.exec.draw(key, b[:])
		return formatUUID(b), nil
	})
}

// SideEffect returns the value fn computes, computed once: the first time
// the workflow's code reaches the call, fn runs on the workflow goroutine
// and its result, or its error, is checkpointed; every replay returns the
// recorded result without running fn. Calls of one name number themselves
// by call order, so SideEffect may sit in a loop. fn should be quick and
// must not act on the world in a way that matters if it runs again (a
// crash between fn and the checkpoint's write runs it again); outside
// effects belong in steps. The name follows the rules of a step's key
// (storage.CheckStepKey). A result that does not encode is recorded as
// the call's error.
func SideEffect[T any](c *WorkflowContext, name string, fn func() (T, error)) (T, error) {
	var zero T
	if err := storage.CheckStepKey(name); err != nil {
		return zero, err
	}
	return record(c, sideEffectKey+name, func(string) (T, error) { return fn() })
}

// mustRecord is record for the helpers that return no error: theirs can
// only come from a recorded value that no longer decodes, which holds the
// run (see decodeRecorded).
func mustRecord[T any](c *WorkflowContext, base string, fn func(key string) (T, error)) T {
	v, err := record(c, base, fn)
	if err != nil {
		panic(fmt.Sprintf("stem: %s: %v", base, err))
	}
	return v
}

// record makes the durable call numbered next under base: it returns the
// recorded value if the run has one, checked against the run's history as
// a step's is, or runs fn with the call's key and checkpoints what it
// returned.
func record[T any](c *WorkflowContext, base string, fn func(key string) (T, error)) (T, error) {
	var zero T
	x := c.exec
	x.checkStopped()
	key, err := x.useCallKey(base, true, asStep)
	if err != nil {
		return zero, err
	}
	if cp, ok := x.recall(key, callSync); ok {
		return decodeRecorded[T](x, cp)
	}
	x.frontier(key, callSync)
	x.replay.reach(x, key)
	p := x.engine.payloads
	out, err := fn(key)
	var output []byte
	if err == nil {
		output, err = p.encode("value of "+key, out)
	}
	if err != nil {
		cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindStep, Error: p.sealInfo(errorInfo(err))}, nil)
		return decodeCheckpoint[T](x, cp)
	}
	if cp, existed := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindStep, Output: output}, nil); existed {
		return decodeRecorded[T](x, cp)
	}
	return out, nil
}

// draw fills b with random bytes for the helper's call keyed key: from
// crypto/rand, or, with Config.RandomSeed, from a hash of the seed, the
// run's ID and the key.
func (x *execution) draw(key string, b []byte) {
	seed := x.engine.cfg.RandomSeed
	if seed == nil {
		rand.Read(b)
		return
	}
	h := sha256.New()
	h.Write(seed)
	h.Write([]byte{0})
	h.Write([]byte(x.lease.RunID))
	h.Write([]byte{0})
	h.Write([]byte(key))
	copy(b, h.Sum(nil))
}

// formatUUID makes b a version 4 UUID (RFC 9562) and returns its text.
func formatUUID(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
