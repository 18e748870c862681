package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// await fails the test unless ch receives before a generous deadline. The
// deadline only stops a broken test from hanging; it measures nothing.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no notification", what)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// awaitListening waits until the store's listener is subscribed and returns
// its backend PID.
func awaitListening(t *testing.T, s *Store, not uint32) uint32 {
	t.Helper()
	select {
	case <-s.listener.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("listener never subscribed")
	}
	for range 3000 {
		if pid := s.listener.pid.Load(); pid != 0 && pid != not {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("listener never (re)connected")
	return 0
}

// TestNotifyAcrossStores: a write through one store wakes the subscribers
// of another store on the same schema, as it would another process.
func TestNotifyAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := newTestStore(t, Options{})
	b := newTestStore(t, Options{Schema: unquote(a.schema)})
	ch := a.Notifications(ctx)
	awaitListening(t, a, 0)
	drain(ch)

	if _, err := b.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "create")

	claimed, err := b.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", err, claimed)
	}
	if _, err := b.Suspend(ctx, storage.SuspendRequest{Lease: claimed[0].Lease, LeaseFor: time.Minute,
		Wait: &storage.Wait{Key: "e@v1", Topic: "topic"}}); err != nil {
		t.Fatal(err)
	}
	drain(ch)
	if ids, err := b.Emit(ctx, storage.EmitRequest{Topic: "topic", Payload: []byte("x")}); err != nil || len(ids) != 1 {
		t.Fatalf("emit: %v %v", err, ids)
	}
	await(t, ch, "emit")
}

// TestListenerReconnects kills the listening connection's backend; the
// listener reconnects and notifications flow again, and a subscriber to
// runs' ends is told it may have missed some (storage.Missed), and only
// then: not at the first subscription.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := newTestStore(t, Options{ListenerRetry: 100 * time.Millisecond})
	b := newTestStore(t, Options{Schema: unquote(a.schema), DisableNotify: false})
	ch := a.Notifications(ctx)
	ends := a.Finished(ctx)
	pid := awaitListening(t, a, 0)
	select {
	case id := <-ends:
		t.Fatalf("a new subscriber to ends got %q before anything ended or was missed", id)
	default:
	}
	var killed bool
	if err := a.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate listener: %v %v", err, killed)
	}
	awaitListening(t, a, pid)
	select {
	case id := <-ends:
		if id != storage.Missed {
			t.Fatalf("after the listener came back a subscriber to ends got %q, want storage.Missed", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("after the listener came back a subscriber to ends was not told it may have missed some")
	}
	drain(ch)
	if _, err := b.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "create after reconnect")
}

// TestNotificationsClose: channels close when their context ends and when
// the store closes.
func TestNotificationsClose(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	ch1 := s.Notifications(ctx)
	ch2 := s.Notifications(t.Context())
	cancel()
	for range ch1 {
	}
	s.Close()
	for range ch2 {
	}
	if _, ok := <-s.Notifications(t.Context()); ok {
		t.Fatal("Notifications after Close received a value")
	}
}

// TestDisableNotify: no listener, no hints; the channel still closes.
func TestDisableNotify(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{DisableNotify: true})
	ctx, cancel := context.WithCancel(t.Context())
	ch := s.Notifications(ctx)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("a notification with DisableNotify")
	default:
	}
	s.listener.mu.Lock()
	started := s.listener.started
	s.listener.mu.Unlock()
	if started {
		t.Fatal("listener started with DisableNotify")
	}
	cancel()
	for range ch {
	}
}
