package runtime_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var (
	keyA = []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	keyB = []byte("bbbbbbbbbbbbbbbb")
	keyC = []byte("cccccccccccccccccccccccc")
)

func codecOf(t *testing.T, newest []byte, older ...[]byte) runtime.Codec {
	t.Helper()
	c, err := runtime.NewAESGCMCodec(newest, older...)
	must(t, err)
	return c
}

// codecEngine returns an engine on store with codec (nil: none) and the
// workflows of these tests: "greet" (a step, then the output), "fail" (a
// step that fails once then permanently) and "await" (a step, then an
// event).
func codecEngine(t *testing.T, store storage.Store, codec runtime.Codec, opts ...func(*runtime.Config)) *runtime.Engine {
	t.Helper()
	cfg := runtime.Config{Store: store, Codec: codec, PollInterval: 5 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := runtime.New(cfg)
	must(t, err)
	must(t, runtime.Register(e, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.Step(c, "say@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) { return "hello " + name, nil })
	}))
	must(t, runtime.Register(e, "fail", func(c *runtime.WorkflowContext, what string) (string, error) {
		return runtime.Step(c, "try@v1", runtime.StepOptions{Retries: 1, Backoff: time.Millisecond}, func(sc runtime.StepContext) (string, error) {
			if sc.Attempt() == 1 {
				return "", errors.New("first try at " + what)
			}
			return "", runtime.Permanent(errors.New("gave up on " + what))
		})
	}))
	must(t, runtime.Register(e, "await", func(c *runtime.WorkflowContext, name string) (string, error) {
		n, err := runtime.Step(c, "count@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) { return len(name), nil })
		if err != nil {
			return "", err
		}
		ev, err := runtime.WaitForEvent[string](c, "go", "go", 0)
		if err != nil {
			return "", err
		}
		return strings.Repeat(ev, n), nil
	}))
	return e
}

// result waits for run id of "greet" (or any string workflow) through e.
func result(t *testing.T, e *runtime.Engine, name, id string) (string, error) {
	t.Helper()
	return mustGet[string](t, e, name, id).Result(waitCtx(t))
}

// The AES-GCM codec marks what it seals with the ID of its newest key,
// which does not reveal the key, and opens what any of its keys sealed.
func TestAESGCMCodecKeyIDs(t *testing.T) {
	t.Parallel()
	idA, idB := runtime.AESGCMKeyID(keyA), runtime.AESGCMKeyID(keyB)
	if len(idA) != 16 || idA == idB || idA != runtime.AESGCMKeyID(keyA) {
		t.Fatalf("key IDs %q %q: want 16 hex digits, stable, one per key", idA, idB)
	}
	if strings.Contains(idA, hex.EncodeToString(keyA)[:8]) {
		t.Fatalf("key ID %q shows the key", idA)
	}
	rotated := codecOf(t, keyB, keyA)
	sealed, err := rotated.Encode([]byte(`"secret"`))
	must(t, err)
	rawB, _ := hex.DecodeString(idB)
	if json.Valid(sealed) || !bytes.Contains(sealed[:16], rawB) || bytes.Contains(sealed, []byte("secret")) {
		t.Fatalf("sealed %x: want a non-JSON frame carrying key ID %s", sealed, idB)
	}
	again, _ := rotated.Encode([]byte(`"secret"`))
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of one payload are equal: the nonce is not fresh")
	}
	oldSealed, err := codecOf(t, keyA).Encode([]byte(`"old"`))
	must(t, err)
	for _, c := range []struct {
		sealed []byte
		want   string
	}{{sealed, `"secret"`}, {oldSealed, `"old"`}} {
		if plain, err := rotated.Decode(c.sealed); err != nil || string(plain) != c.want {
			t.Fatalf("rotated codec opened %q, %v; want %s", plain, err, c.want)
		}
	}
	if _, err := codecOf(t, keyB).Decode(oldSealed); err == nil || !strings.Contains(err.Error(), runtime.AESGCMKeyID(keyA)) {
		t.Fatalf("a codec without the key opened it or did not name the key: %v", err)
	}
	if _, err := runtime.NewAESGCMCodec(keyA, []byte("short")); err == nil || !strings.Contains(err.Error(), "key 2 of 2") || strings.Contains(err.Error(), "short") {
		t.Fatalf("a bad older key: %v", err)
	}
}

// Any changed byte of a sealed payload (header, key ID, nonce, ciphertext,
// tag) fails to open; none opens to something else.
func TestAESGCMCodecTampering(t *testing.T) {
	t.Parallel()
	c := codecOf(t, keyA, keyB)
	sealed, err := c.Encode([]byte(`{"amount":100}`))
	must(t, err)
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if plain, err := c.Decode(bad); err == nil {
			t.Fatalf("byte %d changed: opened to %q", i, plain)
		}
	}
	if _, err := c.Decode(sealed[:len(sealed)-1]); err == nil {
		t.Fatal("a truncated payload opened")
	}
}

// A store's engine reopened with another key: the runs it cannot open are
// errors matching ErrSealed that name the run and the key it needs,
// everywhere they are read, never a zero value.
func TestCodecWrongKeyIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	right := codecEngine(t, f.store, codecOf(t, keyA))
	stop := start(t, right)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, right, "greet", "ada", runtime.WithID("ok"))
	must(t, err)
	_, err = runtime.Start[string, string](ctx, right, "fail", "card", runtime.WithID("bad"))
	must(t, err)
	if got, err := result(t, right, "greet", "ok"); err != nil || got != "hello ada" {
		t.Fatalf("with the right key: %q, %v", got, err)
	}
	if _, err := result(t, right, "fail", "bad"); err == nil || err.Error() != "gave up on card" {
		t.Fatalf("with the right key: %v", err)
	}
	stop()

	idA := runtime.AESGCMKeyID(keyA)
	wrong := codecEngine(t, f.store, codecOf(t, keyB))
	got, err := result(t, wrong, "greet", "ok")
	var se *runtime.SealedError
	if !errors.Is(err, runtime.ErrSealed) || !errors.As(err, &se) || se.KeyID != idA || got != "" {
		t.Fatalf("Result with the wrong key: %q, %v; want an error matching ErrSealed naming key %s", got, err, idA)
	}
	if msg := err.Error(); !strings.Contains(msg, "run ok") || !strings.Contains(msg, idA) || !strings.Contains(msg, runtime.AESGCMKeyID(keyB)) {
		t.Fatalf("the error %q does not name the run, the key it needs and the key held", msg)
	}
	info, err := wrong.Get(ctx, "ok")
	must(t, err)
	if !errors.Is(info.OpenErr, runtime.ErrSealed) || info.Output != nil {
		t.Fatalf("Get with the wrong key: output %q, open error %v", info.Output, info.OpenErr)
	}
	if _, err := result(t, wrong, "fail", "bad"); !errors.Is(err, runtime.ErrSealed) || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("an errored run's sealed error with the wrong key: %v", err)
	}
	steps, err := wrong.ListSteps(ctx, "bad", 0)
	must(t, err)
	if len(steps) != 1 || !errors.Is(steps[0].OpenErr, runtime.ErrSealed) || !errors.Is(steps[0].Err, runtime.ErrSealed) ||
		steps[0].Status != runtime.StepFailed || len(steps[0].Attempts) != 2 || !strings.Contains(steps[0].Attempts[0].Error, idA) ||
		strings.Contains(steps[0].Attempts[0].Error, "first try") {
		t.Fatalf("steps with the wrong key: %+v", steps)
	}
	steps, err = wrong.ListSteps(ctx, "ok", 0)
	must(t, err)
	if len(steps) != 1 || !errors.Is(steps[0].OpenErr, runtime.ErrSealed) || steps[0].Output != nil || steps[0].Status != runtime.StepComplete {
		t.Fatalf("a complete step with the wrong key: %+v", steps)
	}
	xs, err := wrong.ListExecutions(ctx, "bad")
	must(t, err)
	if len(xs) != 1 || !errors.Is(xs[0].Err, runtime.ErrSealed) {
		t.Fatalf("executions with the wrong key: %+v", xs)
	}

	// A terminated run's sealed reason keeps its sentinel.
	_, err = runtime.Start[string, string](ctx, right, "await", "x", runtime.WithID("term"))
	must(t, err)
	must(t, right.Terminate(ctx, "term", "no longer wanted"))
	_, err = result(t, wrong, "await", "term")
	if !errors.Is(err, runtime.ErrSealed) || !errors.Is(err, runtime.ErrTerminated) || strings.Contains(err.Error(), "no longer wanted") {
		t.Fatalf("a terminated run's sealed reason with the wrong key: %v", err)
	}
}

// A sealed payload read by an engine without a codec is an error, not
// bytes taken for JSON.
func TestCodecSealedReadWithoutCodec(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sealer := codecEngine(t, f.store, codecOf(t, keyA))
	start(t, sealer)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, sealer, "greet", "ada", runtime.WithID("g"))
	must(t, err)
	_, err = runtime.Start[string, string](ctx, sealer, "fail", "card", runtime.WithID("f"))
	must(t, err)
	_, _ = result(t, sealer, "greet", "g")
	_, _ = result(t, sealer, "fail", "f")

	plain := codecEngine(t, f.store, nil)
	var se *runtime.SealedError
	if got, err := result(t, plain, "greet", "g"); !errors.As(err, &se) || !se.NoCodec || se.KeyID != runtime.AESGCMKeyID(keyA) || got != "" {
		t.Fatalf("Result without a codec: %q, %v", got, err)
	}
	if _, err := result(t, plain, "fail", "f"); !errors.As(err, &se) || !se.NoCodec || strings.Contains(err.Error(), "stem-sealed") {
		t.Fatalf("a sealed error without a codec: %v", err)
	}
	info, err := plain.Get(ctx, "g")
	must(t, err)
	if info.Output != nil || !errors.Is(info.OpenErr, runtime.ErrSealed) {
		t.Fatalf("Get without a codec: output %q, %v", info.Output, info.OpenErr)
	}
	steps, err := plain.ListSteps(ctx, "f", 0)
	must(t, err)
	if len(steps) != 1 || !errors.Is(steps[0].Err, runtime.ErrSealed) || strings.HasPrefix(steps[0].Attempts[0].Error, "stem-sealed:") {
		t.Fatalf("steps without a codec: %+v", steps)
	}
}

// Rotation: an engine given a new key and the old one still opens what the
// old key sealed, and seals everything new with the new key.
func TestCodecRotation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	old := codecEngine(t, f.store, codecOf(t, keyA))
	stop := start(t, old)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, old, "greet", "ada", runtime.WithID("before"))
	must(t, err)
	_, _ = result(t, old, "greet", "before")
	// A run half done under the old key: its step's checkpoint is sealed
	// with it, and it waits for an event.
	_, err = runtime.Start[string, string](ctx, old, "await", "abc", runtime.WithID("half"))
	must(t, err)
	eventually(t, "half waits", func() bool { return status(t, old, "half") == runtime.StatusWaiting })
	stop()

	rotated := codecEngine(t, f.store, codecOf(t, keyC, keyA))
	start(t, rotated)
	if got, err := result(t, rotated, "greet", "before"); err != nil || got != "hello ada" {
		t.Fatalf("the old key's output after rotation: %q, %v", got, err)
	}
	_, err = runtime.Start[string, string](ctx, rotated, "greet", "bob", runtime.WithID("after"))
	must(t, err)
	if got, err := result(t, rotated, "greet", "after"); err != nil || got != "hello bob" {
		t.Fatalf("a new run after rotation: %q, %v", got, err)
	}
	must(t, rotated.SendEvent(ctx, "half", "go", "z"))
	if got, err := result(t, rotated, "await", "half"); err != nil || got != "zzz" {
		t.Fatalf("the half-done run after rotation: %q, %v", got, err)
	}

	// What was written after the rotation is sealed with the new key only.
	newest := codecEngine(t, f.store, codecOf(t, keyC))
	if got, err := result(t, newest, "greet", "after"); err != nil || got != "hello bob" {
		t.Fatalf("the new key alone on a new run: %q, %v", got, err)
	}
	if got, err := result(t, newest, "await", "half"); err != nil || got != "zzz" {
		t.Fatalf("the new key alone on the half-done run's output: %q, %v", got, err)
	}
	if _, err := result(t, newest, "greet", "before"); !errors.Is(err, runtime.ErrSealed) {
		t.Fatalf("the new key alone on the old key's output: %v", err)
	}
	rec, err := f.store.GetRun(ctx, "after")
	must(t, err)
	idC, _ := hex.DecodeString(runtime.AESGCMKeyID(keyC))
	if !bytes.Contains(rec.Input[:16], idC) || !bytes.Contains(rec.Output[:16], idC) {
		t.Fatalf("a new run's payloads are not sealed with the newest key: %x %x", rec.Input, rec.Output)
	}
}

// Enabling a codec on a store written without one: its plaintext runs
// still read and resume, and what is written from then on is sealed.
func TestCodecOnPlaintextStore(t *testing.T) {
	t.Parallel()
	f := setup(t)
	plain := codecEngine(t, f.store, nil)
	stop := start(t, plain)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, plain, "greet", "ada", runtime.WithID("done"))
	must(t, err)
	_, _ = result(t, plain, "greet", "done")
	_, err = runtime.Start[string, string](ctx, plain, "await", "abcd", runtime.WithID("half"))
	must(t, err)
	eventually(t, "half waits", func() bool { return status(t, plain, "half") == runtime.StatusWaiting })
	_, err = runtime.Start[string, string](ctx, plain, "fail", "card", runtime.WithID("failed"))
	must(t, err)
	_, _ = result(t, plain, "fail", "failed")
	stop()

	sealed := codecEngine(t, f.store, codecOf(t, keyA))
	start(t, sealed)
	if got, err := result(t, sealed, "greet", "done"); err != nil || got != "hello ada" {
		t.Fatalf("a plaintext output with a codec: %q, %v", got, err)
	}
	if _, err := result(t, sealed, "fail", "failed"); err == nil || err.Error() != "gave up on card" {
		t.Fatalf("a plaintext error with a codec: %v", err)
	}
	must(t, sealed.SendEvent(ctx, "half", "go", "y"))
	if got, err := result(t, sealed, "await", "half"); err != nil || got != "yyyy" {
		t.Fatalf("a plaintext run resumed with a codec: %q, %v", got, err)
	}
	rec, err := f.store.GetRun(ctx, "half")
	must(t, err)
	if json.Valid(rec.Output) || bytes.Contains(rec.Output, []byte("yyyy")) {
		t.Fatalf("the output written with the codec is in the clear: %q", rec.Output)
	}
	steps, err := sealed.ListSteps(ctx, "half", 0)
	must(t, err)
	if len(steps) != 2 || string(steps[0].Output) != "4" || string(steps[1].Output) != `"y"` || steps[0].OpenErr != nil || steps[1].OpenErr != nil {
		t.Fatalf("steps of the resumed run: %+v", steps)
	}
}

// tamperStore flips one byte of every run's stored output as it is read.
type tamperStore struct {
	storage.Store
	at int // from the end
}

func (s tamperStore) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	r, err := s.Store.GetRun(ctx, id)
	if len(r.Output) > s.at {
		r.Output = bytes.Clone(r.Output)
		r.Output[len(r.Output)-1-s.at] ^= 0x20
	}
	return r, err
}

// A sealed payload changed in the store is an error, not a value.
func TestCodecTamperedPayloadIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	codec := codecOf(t, keyA)
	e := codecEngine(t, f.store, codec)
	start(t, e)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, e, "greet", "ada", runtime.WithID("g"))
	must(t, err)
	_, _ = result(t, e, "greet", "g")
	rec, err := f.store.GetRun(ctx, "g")
	must(t, err)
	for _, at := range []int{0, len(rec.Output) - 6} { // the tag; the key ID
		reader := codecEngine(t, tamperStore{Store: f.store, at: at}, codec)
		got, err := result(t, reader, "greet", "g")
		if !errors.Is(err, runtime.ErrSealed) || got != "" {
			t.Fatalf("byte %d from the end changed: %q, %v", at, got, err)
		}
	}
}

// legacySeal seals plain as NewAESGCMCodec did before key IDs: nonce and
// ciphertext, no frame.
func legacySeal(t *testing.T, key, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	must(t, err)
	aead, err := cipher.NewGCM(block)
	must(t, err)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, nil)
}

// Payloads sealed before key IDs are opened by a codec holding their key;
// an engine without it hands their runs back and reports them as sealed.
func TestCodecLegacyPayloads(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := waitCtx(t)
	_, err := f.store.CreateRuns(ctx, []storage.NewRun{{ID: "legacy", Workflow: "greet", Input: legacySeal(t, keyA, []byte(`"old"`))}})
	must(t, err)

	wrong := codecEngine(t, f.store, codecOf(t, keyB))
	stopWrong := start(t, wrong)
	eventually(t, "the run is handed back", func() bool {
		info, err := wrong.Get(ctx, "legacy")
		return err == nil && info.Status == runtime.StatusWaiting && info.ReadyAt != nil
	})
	stopWrong()
	if info, _ := wrong.Get(ctx, "legacy"); info.Err != nil {
		t.Fatalf("the run errored: %v", info.Err)
	}

	right := codecEngine(t, f.store, codecOf(t, keyB, keyA))
	start(t, right)
	if got, err := result(t, right, "greet", "legacy"); err != nil || got != "hello old" {
		t.Fatalf("a legacy input opened by the rotated codec: %q, %v", got, err)
	}

	// A legacy output read without the key.
	_, err = f.store.CreateRuns(ctx, []storage.NewRun{{ID: "done", Workflow: "other", Input: []byte(`1`)}})
	must(t, err)
	runs, err := f.store.Claim(ctx, storage.ClaimRequest{Owner: "tool", Workflows: []string{"other"}, Limit: 1, LeaseFor: time.Minute})
	must(t, err)
	must(t, f.store.Complete(ctx, storage.CompleteRequest{Lease: runs[0].Lease, Status: storage.StatusComplete, Output: legacySeal(t, keyA, []byte(`"x"`))}))
	for _, e := range []*runtime.Engine{codecEngine(t, f.store, nil), codecEngine(t, f.store, codecOf(t, keyB))} {
		info, err := e.Get(ctx, "done")
		must(t, err)
		if info.Output != nil || !errors.Is(info.OpenErr, runtime.ErrSealed) {
			t.Fatalf("a legacy output without its key: %q, %v", info.Output, info.OpenErr)
		}
	}
	if info, err := right.Get(ctx, "done"); err != nil || string(info.Output) != `"x"` {
		t.Fatalf("a legacy output with its key: %q, %v", info.Output, err)
	}
}

// writeLog counts an engine's store writes to the run.
type writeLog struct {
	storage.Store
	writes   atomic.Int32
	releases atomic.Int32
	replays  atomic.Int32
}

func (w *writeLog) LoadReplay(ctx context.Context, id string) (storage.Replay, error) {
	w.replays.Add(1)
	return w.Store.LoadReplay(ctx, id)
}

func (w *writeLog) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	w.writes.Add(1)
	return w.Store.Checkpoint(ctx, req)
}

func (w *writeLog) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	w.writes.Add(1)
	return w.Store.RecordAttempts(ctx, req)
}

func (w *writeLog) Complete(ctx context.Context, req storage.CompleteRequest) error {
	w.writes.Add(1)
	return w.Store.Complete(ctx, req)
}

func (w *writeLog) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if req.Checkpoint != nil || req.Wait != nil || req.Refuse != nil {
		w.writes.Add(1)
	} else {
		w.releases.Add(1)
	}
	return w.Store.Suspend(ctx, req)
}

// warnings records the messages logged at warn level.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{w, as}
}
func (w *warnings) WithGroup(string) slog.Handler { return w }

type withAttrs struct {
	*warnings
	as []slog.Attr
}

func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{w.warnings, append(slices.Clone(w.as), as...)}
}

func (w *withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(w.as...)
	return w.warnings.Handle(ctx, r)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// An engine that claims a run it cannot open (its input, or a checkpoint
// on replay) hands it back untouched, again on every claim, and says why
// once.
func TestCodecHandsBackRunItCannotOpen(t *testing.T) {
	t.Parallel()
	f, clock := setupClock(t)
	plain := codecEngine(t, f.store, nil, func(c *runtime.Config) { c.Clock = clock })
	stop := start(t, plain)
	ctx := waitCtx(t)
	_, err := runtime.Start[string, string](ctx, plain, "await", "ab", runtime.WithID("half"))
	must(t, err)
	eventually(t, "half waits", func() bool { return status(t, plain, "half") == runtime.StatusWaiting })
	stop()
	// Sealed with key A: a queued run's input, and an event delivered to a
	// run whose input and first checkpoint are plaintext (so it is found
	// sealed on replay).
	sealer := codecEngine(t, f.store, codecOf(t, keyA), func(c *runtime.Config) { c.Clock = clock })
	_, err = runtime.Start[string, string](ctx, sealer, "greet", "ada", runtime.WithID("queued"))
	must(t, err)
	must(t, sealer.SendEvent(ctx, "half", "go", "q"))
	before := map[string]storage.RunRecord{}
	attempts := func(id string) (n int) {
		steps, err := sealer.ListSteps(ctx, id, 0)
		must(t, err)
		for _, s := range steps {
			n += len(s.Attempts)
		}
		return n
	}
	attemptsBefore := map[string]int{}
	for _, id := range []string{"half", "queued"} {
		before[id], err = f.store.GetRun(ctx, id)
		must(t, err)
		attemptsBefore[id] = attempts(id)
	}

	log := &warnings{}
	w := &writeLog{Store: f.store}
	wrong := codecEngine(t, w, codecOf(t, keyB), func(c *runtime.Config) {
		c.Clock, c.Logger = clock, slog.New(log)
	})
	stopWrong := start(t, wrong)
	for round := 1; round <= 3; round++ {
		eventually(t, "both runs handed back", func() bool { return w.releases.Load() >= int32(2*round) })
		clock.Advance(time.Minute) // ready again: the poll claims them again
	}
	if n := w.writes.Load(); n != 0 {
		t.Fatalf("the engine wrote %d times to runs it cannot open", n)
	}
	for id, was := range before {
		r, err := f.store.GetRun(ctx, id)
		must(t, err)
		if r.Error != nil || r.Status.Finished() || !bytes.Equal(r.Input, was.Input) || r.Recoveries != 0 || r.Execution != was.Execution {
			t.Fatalf("run %s changed: %+v", id, r)
		}
		if n := attempts(id); n != attemptsBefore[id] {
			t.Fatalf("run %s has %d attempts, had %d", id, n, attemptsBefore[id])
		}
	}
	msgs := log.all()
	perRun := map[string]int{}
	for _, m := range msgs {
		for id := range before {
			if strings.Contains(m, "run="+id+" ") || strings.HasSuffix(m, "run="+id) {
				perRun[id]++
				if !strings.Contains(m, runtime.AESGCMKeyID(keyA)) {
					t.Fatalf("the warning does not name the key it needs: %s", m)
				}
			}
		}
	}
	if perRun["half"] != 1 || perRun["queued"] != 1 {
		t.Fatalf("warnings %q: want one per run", msgs)
	}

	// The right key's engine finds both as they were and completes them.
	// The wrong one stops first: still working, it would take the runs
	// back whenever they are ready, and on a busy machine it may win every
	// such claim.
	stopWrong()
	right := codecEngine(t, f.store, codecOf(t, keyA), func(c *runtime.Config) { c.Clock = clock })
	start(t, right)
	clock.Advance(time.Minute)
	if got, err := result(t, right, "await", "half"); err != nil || got != "qq" {
		t.Fatalf("half with the right key: %q, %v", got, err)
	}
	if got, err := result(t, right, "greet", "queued"); err != nil || got != "hello ada" {
		t.Fatalf("queued with the right key: %q, %v", got, err)
	}
}
