package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// waitWorker waits until the fixture's engine is recorded in the store.
func (f *fixture) waitWorker() {
	f.t.Helper()
	f.eventually(func(out string) bool { return strings.Contains(out, "test-worker") }, "workers")
}

// wantRefused checks that a command was refused for its codec key, naming
// the key it would seal with and the keys the live workers hold.
func wantRefused(t *testing.T, what, stderr, seal string, held ...string) {
	t.Helper()
	if !strings.Contains(stderr, "refused, nothing written") || !strings.Contains(stderr, seal) {
		t.Fatalf("%s: stderr %q does not refuse key ID %s", what, stderr, seal)
	}
	for _, id := range held {
		if !strings.Contains(stderr, id) {
			t.Fatalf("%s: stderr %q does not name key ID %s, which the workers hold", what, stderr, id)
		}
	}
}

// A command given a codec key that no live worker holds writes nothing,
// and says which key it would seal with and which the workers hold; the
// workers' key works.
func TestWrongCodecKeyRefused(t *testing.T) {
	codec, err := runtime.NewAESGCMCodec(newKey)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, codec, true)
	f.waitWorker()
	wrong, right := hex.EncodeToString(oldKey), hex.EncodeToString(newKey)
	wrongID, rightID := runtime.AESGCMKeyID(oldKey), runtime.AESGCMKeyID(newKey)

	_, stderr := f.cli(1, "--codec-key", wrong, "start", "greet", `{"name":"ada"}`, "--id", "g-wrong")
	wantRefused(t, "start", stderr, wrongID, rightID)
	if _, err := f.e.Get(f.ctx, "g-wrong"); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Fatalf("a refused start stored the run: %v", err)
	}
	f.cli(0, "--codec-key", right, "start", "greet", `{"name":"ada"}`, "--id", "g-right")
	waitStatus(t, f.e, "g-right", runtime.StatusComplete)

	f.cli(0, "--codec-key", right, "start", "approve", `"bob"`, "--id", "a-1")
	waitStatus(t, f.e, "a-1", runtime.StatusWaiting)
	_, stderr = f.cli(1, "--codec-key", wrong, "send", "a-1", "approval", "false")
	wantRefused(t, "send", stderr, wrongID, rightID)
	_, stderr = f.cli(1, "--codec-key", wrong, "emit", "approval", "false")
	wantRefused(t, "emit", stderr, wrongID, rightID)
	_, stderr = f.cli(1, "--codec-key", wrong, "terminate", "a-1")
	wantRefused(t, "terminate", stderr, wrongID, rightID)
	if info, err := f.e.Get(f.ctx, "a-1"); err != nil || info.Status != runtime.StatusWaiting {
		t.Fatalf("after refused writes, a-1 is %+v, %v; want it waiting still", info, err)
	}
	// Had a refused event been stored, the run would take it first.
	f.cli(0, "--codec-key", right, "send", "a-1", "approval", "true")
	waitStatus(t, f.e, "a-1", runtime.StatusComplete)
	if out, _ := f.cli(0, "--codec-key", right, "show", "a-1"); !strings.Contains(out, `"approved"`) {
		t.Fatalf("a-1 after the right key's event:\n%s", out)
	}

	_, stderr = f.cli(1, "--codec-key", wrong, "schedule", "create", "s", "greet", "@daily", `{"name":"ada"}`)
	wantRefused(t, "schedule create", stderr, wrongID, rightID)
	if _, err := schedule.Get(f.ctx, f.e, "s"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("a refused schedule create stored it: %v", err)
	}
}

// A live worker without a codec holds no key: a sealed write is refused.
// With no live worker recorded, it goes ahead with a warning: a fresh
// deployment may start runs before its workers.
func TestCodecKeyWithoutWorkers(t *testing.T) {
	f := newFixture(t, nil, true)
	f.waitWorker()
	key, keyID := hex.EncodeToString(oldKey), runtime.AESGCMKeyID(oldKey)
	_, stderr := f.cli(1, "--codec-key", key, "start", "greet", `{"name":"bob"}`, "--id", "g-1")
	wantRefused(t, "start", stderr, keyID, "no codec key")
	if _, err := f.e.Get(f.ctx, "g-1"); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Fatalf("a refused start stored the run: %v", err)
	}

	f.stop() // its record goes with it
	_, stderr = f.cli(0, "--codec-key", key, "start", "greet", `{"name":"ada"}`, "--id", "g-1")
	if !strings.Contains(stderr, "warning") || !strings.Contains(stderr, keyID) {
		t.Fatalf("stderr %q: want a warning naming key ID %s", stderr, keyID)
	}
	if _, err := f.e.Get(context.Background(), "g-1"); err != nil {
		t.Fatal(err)
	}

	// A schedule whose input is sealed with a key no live worker holds is
	// not triggered.
	f.cli(0, "--codec-key", key, "schedule", "create", "s", "greet", "@daily", `{"name":"ada"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.waitWorker()
	_, stderr = f.cli(1, "schedule", "trigger", "s")
	wantRefused(t, "schedule trigger", stderr, keyID, "no codec key")
	if s, err := schedule.Get(ctx, f.e, "s"); err != nil || s.LastRunID != "" {
		t.Fatalf("after a refused trigger: %+v, %v", s, err)
	}
}

// stem workers shows the key IDs each worker holds, and warns of a worker
// that met a run sealed with a key it lacks.
func TestWorkersMissingKey(t *testing.T) {
	codec, err := runtime.NewAESGCMCodec(newKey)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, codec, true)
	f.waitWorker()
	// Sealed with the old key past the command's check, as an
	// application's own client would.
	store, err := sqlitestore.Open(f.path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	old, err := runtime.NewAESGCMCodec(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := runtime.New(runtime.Config{Store: store, Codec: old})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.StartJSON(context.Background(), "greet", "g-old", []byte(`{"name":"ada"}`)); err != nil {
		t.Fatal(err)
	}
	oldID, newID := runtime.AESGCMKeyID(oldKey), runtime.AESGCMKeyID(newKey)
	warning := "warning: worker test-worker cannot open runs sealed with key ID " + oldID + " (it holds key IDs " + newID + "): give it that key"
	f.eventually(func(out string) bool { return strings.Contains(out, warning) }, "workers")
	js, _ := f.cli(0, "--json", "workers")
	var doc struct {
		Workers []struct {
			KeyIDs        []string `json:"key_ids"`
			MissingKeyIDs []string `json:"missing_key_ids"`
		}
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Workers) != 1 ||
		!slices.Equal(doc.Workers[0].KeyIDs, []string{newID}) || !slices.Equal(doc.Workers[0].MissingKeyIDs, []string{oldID}) {
		t.Fatalf("workers --json (%v):\n%s", err, js)
	}
}
