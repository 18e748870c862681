package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

var (
	oldKey = []byte("0123456789abcdef0123456789abcdef")
	newKey = []byte("fedcba9876543210")
)

// storedRun reads a run's record and checkpoints straight from the store.
func (f *fixture) storedRun(id string) (storage.RunRecord, []storage.StepRecord) {
	f.t.Helper()
	store, err := sqlitestore.Open(f.path, sqlitestore.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer store.Close()
	rec, err := store.GetRun(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := store.ListSteps(f.ctx, storage.StepsQuery{RunID: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec, h.Steps
}

// sealedWith reports whether b is a payload sealed with key.
func sealedWith(b, key []byte) bool {
	id, _ := hex.DecodeString(runtime.AESGCMKeyID(key))
	return len(b) > 16 && !json.Valid(b) && bytes.Contains(b[:16], id)
}

// The codec key flags, the key file and $STEM_CODEC_KEY take several keys,
// newest first: the command seals what it writes with the newest and
// opens what any of them sealed.
func TestCodecKeyRotation(t *testing.T) {
	codec, err := runtime.NewAESGCMCodec(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, codec, true)
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	oldHex, newB64 := hex.EncodeToString(oldKey), base64.StdEncoding.EncodeToString(newKey)

	// A command that has only the old key seals the input with it; the
	// worker, rotated, opens it and seals the rest with the new key.
	f.cli(0, "--codec-key", oldHex, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	if rec, _ := f.storedRun("g-1"); !sealedWith(rec.Input, oldKey) || !sealedWith(rec.Output, newKey) {
		t.Fatalf("input %x, output %x: want them sealed with the old and the new key", rec.Input, rec.Output)
	}

	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("# newest first\n"+newB64+"\n\n"+oldHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--codec-key", newB64, "--codec-key", oldHex, "show", "g-1"},
		{"show", "g-1", "--codec-key", newB64 + "," + oldHex},
		{"--codec-key-file", keyFile, "show", "g-1"},
	} {
		if out, _ := f.cli(0, args...); !strings.Contains(out, `"hello ada"`) || strings.Contains(out, "sealed") {
			t.Fatalf("stem %v:\n%s", args, out)
		}
	}
	t.Setenv("STEM_CODEC_KEY", newB64+", "+oldHex)
	if out, _ := f.cli(0, "show", "g-1"); !strings.Contains(out, `"hello ada"`) || strings.Contains(out, "sealed") {
		t.Fatalf("with two keys in $STEM_CODEC_KEY:\n%s", out)
	}

	// start, send and emit seal with the newest key given.
	f.cli(0, "start", "approve", `"bo"`, "--id", "a-1")
	waitStatus(t, f.e, "a-1", runtime.StatusWaiting)
	f.cli(0, "send", "a-1", "approval", "true")
	waitStatus(t, f.e, "a-1", runtime.StatusComplete)
	f.cli(0, "start", "approve", `"cy"`, "--id", "a-2")
	waitStatus(t, f.e, "a-2", runtime.StatusWaiting)
	f.cli(0, "emit", "approval", "false")
	waitStatus(t, f.e, "a-2", runtime.StatusComplete)
	for _, id := range []string{"a-1", "a-2"} {
		rec, steps := f.storedRun(id)
		if !sealedWith(rec.Input, newKey) || len(steps) != 2 || !sealedWith(steps[1].Output, newKey) {
			t.Fatalf("run %s: input %x, steps %+v: want the input and the event sealed with the newest key", id, rec.Input, steps)
		}
	}
	t.Setenv("STEM_CODEC_KEY", "")
}

// Without the key, or with the wrong one, stem show says what it cannot
// open and why: the key ID it needs, never the plaintext and never a
// blank.
func TestShowSealedNamesTheKey(t *testing.T) {
	codec, err := runtime.NewAESGCMCodec(newKey)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, codec, true)
	f.eventually(func(out string) bool { return strings.Contains(out, "greet") }, "workflows")
	newHex := hex.EncodeToString(newKey)
	f.cli(0, "--codec-key", newHex, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	waitStatus(t, f.e, "g-1", runtime.StatusComplete)
	f.cli(0, "--codec-key", newHex, "start", "refuse", "1", "--id", "r-1")
	waitStatus(t, f.e, "r-1", runtime.StatusErrored)
	newID, oldID := runtime.AESGCMKeyID(newKey), runtime.AESGCMKeyID(oldKey)

	out, _ := f.cli(0, "show", "g-1")
	if !strings.Contains(out, "detail     (sealed: pass the workers' --codec-key to read it) key ID "+newID) ||
		!has(out, "say@v1 step complete (sealed: pass the workers' --codec-key to read it) key ID "+newID) || strings.Contains(out, "hello") {
		t.Fatalf("show without the key:\n%s", out)
	}
	out, _ = f.cli(0, "show", "g-1", "--codec-key", hex.EncodeToString(oldKey))
	if !strings.Contains(out, "detail     (sealed: sealed with key ID "+newID+", which this engine's codec does not hold (it holds "+oldID+"))") ||
		strings.Contains(out, "hello") {
		t.Fatalf("show with the wrong key:\n%s", out)
	}
	out, _ = f.cli(0, "show", "r-1", "--codec-key", hex.EncodeToString(oldKey))
	if !strings.Contains(out, "error: (sealed error: sealed with key ID "+newID) || strings.Contains(out, "out of stock") {
		t.Fatalf("show of a sealed error with the wrong key:\n%s", out)
	}

	out, _ = f.cli(0, "--json", "show", "g-1")
	var shown struct {
		Run struct {
			Output       json.RawMessage `json:"output"`
			OutputSealed bool            `json:"output_sealed"`
			Sealed       string          `json:"sealed"`
		} `json:"run"`
		Steps []struct {
			OutputSealed bool   `json:"output_sealed"`
			Sealed       string `json:"sealed"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	if shown.Run.Output != nil || !shown.Run.OutputSealed || !strings.Contains(shown.Run.Sealed, newID) ||
		len(shown.Steps) != 1 || !shown.Steps[0].OutputSealed || !strings.Contains(shown.Steps[0].Sealed, newID) {
		t.Fatalf("show --json without the key: %s", out)
	}
}

// A bad key among several is named by its place, never shown.
func TestCodecKeyListErrors(t *testing.T) {
	f := newFixture(t, nil, false)
	newHex := hex.EncodeToString(newKey)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# no keys yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--codec-key", newHex + ",abcd", "runs"}, "codec key 2 of 2 in --codec-key is 3 bytes; want 16, 24 or 32"},
		{"", []string{"--codec-key", newHex, "--codec-key", "not a key!", "runs"}, "codec key 2 of 2 in --codec-key is neither hex nor base64"},
		{newHex + ",zz!", []string{"runs"}, "codec key 2 of 2 in $STEM_CODEC_KEY is neither hex nor base64"},
		{"", []string{"--codec-key-file", empty, "runs"}, "holds no codec key"},
		{"", []string{"--codec-key-file", empty, "--codec-key-file", empty + "2", "runs"}, "give --codec-key-file once"},
	} {
		t.Setenv("STEM_CODEC_KEY", c.env)
		if _, errOut := f.cli(2, c.args...); !strings.Contains(errOut, c.want) || strings.Contains(errOut, newHex) {
			t.Fatalf("stem %v ($STEM_CODEC_KEY %q): %q, want %q", c.args, c.env, errOut, c.want)
		}
	}
}
