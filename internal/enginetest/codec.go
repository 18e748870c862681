package enginetest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

var codecScenarios = []scenario{
	{"codec/an engine with the wrong key hands the run back untouched; the right key's completes it", testCodecWrongKeyHandsBack},
	{"codec/Result with the wrong key is an error matching ErrSealed, not a zero value", testCodecWrongKeyResult},
	{"codec/rotation: the old key still opens, new writes use the newest", testCodecRotation},
	{"codec/enabling a codec on a plaintext store keeps its runs working", testCodecOnPlaintext},
}

var (
	codecKeyA = []byte("0123456789abcdef0123456789abcdef")
	codecKeyB = []byte("fedcba9876543210")
)

// codecEngine returns an engine on the fixture's store with codec (nil:
// none) and the workflow "count.wait": a step, then an event, returning the
// event's payload repeated as many times as the input is long.
func (f *fixture) codecEngine(codec runtime.Codec) *runtime.Engine {
	f.t.Helper()
	e, err := runtime.New(runtime.Config{
		Store: f.store, Codec: codec, LeaseDuration: 5 * time.Second,
		PollInterval: 10 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond,
	})
	f.must(err)
	f.must(runtime.Register(e, "count.wait", func(c *runtime.WorkflowContext, in string) (string, error) {
		n, err := runtime.Step(c, "count@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return len(in), nil })
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

func (f *fixture) codec(newest []byte, older ...[]byte) runtime.Codec {
	f.t.Helper()
	c, err := runtime.NewAESGCMCodec(newest, older...)
	f.must(err)
	return c
}

// countWait starts run id of count.wait on e (running) and waits until it
// waits for its event.
func (f *fixture) countWait(e *runtime.Engine, id, in string) *runtime.Run[string] {
	f.t.Helper()
	run, err := runtime.Start[string, string](f.ctx, e, "count.wait", in, runtime.WithID(id))
	f.must(err)
	f.waitStatus(e, id, runtime.StatusWaiting)
	return run
}

func (f *fixture) result(e *runtime.Engine, id string) (string, error) {
	f.t.Helper()
	run, err := runtime.Get[string](f.ctx, e, "count.wait", id)
	f.must(err)
	return run.Result(f.ctx)
}

func testCodecWrongKeyHandsBack(f *fixture) {
	right := f.codecEngine(f.codec(codecKeyA))
	stop := f.start(right)
	f.countWait(right, "r1", "abc")
	stop()
	// The event arrives sealed with key A while no engine runs: the run is
	// ready, its input and checkpoints all sealed with A.
	f.must(right.SendEvent(f.ctx, "r1", "go", "x"))
	before := f.steps(right, "r1", 0)

	wrong := f.codecEngine(f.codec(codecKeyB))
	stopWrong := f.start(wrong)
	f.eventually("the wrong key's engine hands the run back", func() bool {
		info := f.info(wrong, "r1")
		return info.Status == runtime.StatusWaiting && info.ReadyAt != nil
	})
	stopWrong()
	info := f.info(right, "r1")
	if info.Err != nil || info.Status.Finished() || info.Recoveries != 0 {
		f.t.Fatalf("after the wrong key's engine: %+v", info)
	}
	after := f.steps(right, "r1", 0)
	if len(after) != len(before) {
		f.t.Fatalf("steps changed: %+v, were %+v", after, before)
	}
	for i := range after {
		if after[i].Key != before[i].Key || after[i].Status != before[i].Status || len(after[i].Attempts) != len(before[i].Attempts) ||
			string(after[i].Output) != string(before[i].Output) {
			f.t.Fatalf("step %d changed: %+v, was %+v", i, after[i], before[i])
		}
	}

	f.start(right)
	if got, err := f.result(right, "r1"); err != nil || got != "xxx" {
		f.t.Fatalf("with the right key: %q, %v; want xxx", got, err)
	}
}

func testCodecWrongKeyResult(f *fixture) {
	right := f.codecEngine(f.codec(codecKeyA))
	stop := f.start(right)
	f.countWait(right, "r1", "ab")
	f.must(right.SendEvent(f.ctx, "r1", "go", "y"))
	if got, err := f.result(right, "r1"); err != nil || got != "yy" {
		f.t.Fatalf("with the right key: %q, %v", got, err)
	}
	stop()
	wrong := f.codecEngine(f.codec(codecKeyB))
	got, err := f.result(wrong, "r1")
	if !errors.Is(err, runtime.ErrSealed) || got != "" || !strings.Contains(err.Error(), runtime.AESGCMKeyID(codecKeyA)) || !strings.Contains(err.Error(), "r1") {
		f.t.Fatalf("with the wrong key: %q, %v; want an error matching ErrSealed naming the run and key %s", got, err, runtime.AESGCMKeyID(codecKeyA))
	}
	if got, err := f.result(f.codecEngine(nil), "r1"); !errors.Is(err, runtime.ErrSealed) || got != "" {
		f.t.Fatalf("without a codec: %q, %v", got, err)
	}
}

func testCodecRotation(f *fixture) {
	old := f.codecEngine(f.codec(codecKeyA))
	stop := f.start(old)
	f.countWait(old, "r1", "abcd")
	stop()

	rotated := f.codecEngine(f.codec(codecKeyB, codecKeyA))
	f.start(rotated)
	f.must(rotated.SendEvent(f.ctx, "r1", "go", "z"))
	if got, err := f.result(rotated, "r1"); err != nil || got != "zzzz" {
		f.t.Fatalf("a run begun under the old key, after rotation: %q, %v", got, err)
	}
	// Its output was sealed with the newest key: the new key alone opens
	// it, the old alone does not.
	if got, err := f.result(f.codecEngine(f.codec(codecKeyB)), "r1"); err != nil || got != "zzzz" {
		f.t.Fatalf("the newest key alone: %q, %v", got, err)
	}
	if _, err := f.result(f.codecEngine(f.codec(codecKeyA)), "r1"); !errors.Is(err, runtime.ErrSealed) {
		f.t.Fatalf("the old key alone on the output written after rotation: %v", err)
	}
	rec, err := f.store.GetRun(f.ctx, "r1")
	f.must(err)
	id := runtime.AESGCMKeyID(codecKeyB)
	if raw, _ := hex.DecodeString(id); len(rec.Output) < 13 || !bytes.Contains(rec.Output[:13], raw) {
		f.t.Fatalf("the output is not sealed with the newest key %s: %x", id, rec.Output)
	}
}

func testCodecOnPlaintext(f *fixture) {
	plain := f.codecEngine(nil)
	stop := f.start(plain)
	f.countWait(plain, "done", "a")
	f.must(plain.SendEvent(f.ctx, "done", "go", "p"))
	if got, err := f.result(plain, "done"); err != nil || got != "p" {
		f.t.Fatalf("without a codec: %q, %v", got, err)
	}
	f.countWait(plain, "half", "abc")
	stop()

	sealed := f.codecEngine(f.codec(codecKeyA))
	f.start(sealed)
	if got, err := f.result(sealed, "done"); err != nil || got != "p" {
		f.t.Fatalf("a plaintext run's output with a codec: %q, %v", got, err)
	}
	f.must(sealed.SendEvent(f.ctx, "half", "go", "s"))
	if got, err := f.result(sealed, "half"); err != nil || got != "sss" {
		f.t.Fatalf("a plaintext run resumed with a codec: %q, %v", got, err)
	}
	rec, err := f.store.GetRun(f.ctx, "half")
	f.must(err)
	if strings.Contains(string(rec.Output), "sss") {
		f.t.Fatalf("the output written with the codec is in the clear: %q", rec.Output)
	}
}
