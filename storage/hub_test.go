package storage_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stemflow/stem/storage"
)

func received(ch <-chan struct{}) (got, open bool) {
	select {
	case _, ok := <-ch:
		return true, ok
	default:
		return false, true
	}
}

func TestHubSignalsEverySubscriberOnceAndMerges(t *testing.T) {
	var h storage.Hub
	a := h.Subscribe(t.Context())
	b := h.Subscribe(t.Context())
	if got, _ := received(a); got {
		t.Fatal("a subscriber received a hint before any signal")
	}
	h.Signal()
	h.Signal() // merges into the pending hint: never blocks
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		if got, open := received(ch); !got || !open {
			t.Fatalf("subscriber %s: received %v, open %v; want one hint", name, got, open)
		}
		if got, _ := received(ch); got {
			t.Fatalf("subscriber %s received a second hint; two signals must merge into one pending", name)
		}
	}
}

func TestHubClosesOnContextEndAndOnClose(t *testing.T) {
	var h storage.Hub
	ctx, cancel := context.WithCancel(t.Context())
	gone := h.Subscribe(ctx)
	stays := h.Subscribe(t.Context())
	cancel()
	if _, ok := <-gone; ok {
		t.Fatal("the channel of a subscriber whose context ended is not closed")
	}
	h.Signal() // does not panic on the removed subscriber
	if got, open := received(stays); !got || !open {
		t.Fatal("the other subscriber missed the signal")
	}
	h.Close()
	if _, ok := <-stays; ok {
		t.Fatal("Close left a subscriber's channel open")
	}
	if _, ok := <-h.Subscribe(t.Context()); ok {
		t.Fatal("a subscription after Close is not closed at once")
	}
	done, stop := context.WithCancel(t.Context())
	stop()
	var fresh storage.Hub
	if _, ok := <-fresh.Subscribe(done); ok {
		t.Fatal("a subscription with an ended context is not closed at once")
	}
}

// TestHubFinished: every finished subscriber receives every ID in order; a
// full subscriber is told it missed IDs (Missed) without blocking the hub;
// cancelling a subscriber or closing the hub closes its channel.
func TestHubFinished(t *testing.T) {
	var h storage.Hub
	ctx, cancel := context.WithCancel(t.Context())
	a := h.SubscribeFinished(ctx)
	b := h.SubscribeFinished(t.Context())
	h.Finished("r1", "r2")
	for name, ch := range map[string]<-chan string{"a": a, "b": b} {
		if got := []string{<-ch, <-ch}; got[0] != "r1" || got[1] != "r2" {
			t.Fatalf("subscriber %s got %v, want r1 r2", name, got)
		}
	}
	for i := range storage.FinishedBuffer + 10 {
		h.Finished("x" + string(rune('a'+i%26))) // never blocks, though nobody reads
	}
	// What was dropped is not lost silently: Missed stands for it, and
	// the IDs sent after it are there.
	var got []string
	for len(b) > 0 {
		got = append(got, <-b)
	}
	if !slices.Contains(got, storage.Missed) || got[len(got)-1] != "x"+string(rune('a'+(storage.FinishedBuffer+9)%26)) {
		t.Fatalf("a subscriber that fell behind got %d IDs, %q last, Missed among them: %v; want Missed and the last ID sent", len(got), got[len(got)-1], slices.Contains(got, storage.Missed))
	}
	h.Finished("after")
	if id := <-b; id != "after" {
		t.Fatalf("after catching up the subscriber got %q, want the next ID", id)
	}
	cancel()
	for range a { // drains, then ends: closed by the cancellation
	}
	h.Close()
	for range b {
	}
	if _, open := <-h.SubscribeFinished(t.Context()); open {
		t.Fatal("a subscriber after Close got an open channel")
	}
}

// TestHubGap: a gap in the store's announcements reaches every finished
// subscriber as Missed, even one whose channel is full, and never blocks;
// ready subscribers are not told.
func TestHubGap(t *testing.T) {
	var h storage.Hub
	a := h.SubscribeFinished(t.Context())
	full := h.SubscribeFinished(t.Context())
	ready := h.Subscribe(t.Context())
	for range storage.FinishedBuffer {
		h.Finished("r")
	}
	for len(a) > 0 {
		<-a
	}
	h.Gap()
	if id := <-a; id != storage.Missed {
		t.Fatalf("after a gap the subscriber got %q, want Missed", id)
	}
	var last string
	for len(full) > 0 {
		last = <-full
	}
	if last != storage.Missed {
		t.Fatalf("a full subscriber's last ID after a gap is %q, want Missed", last)
	}
	select {
	case <-ready:
		t.Fatal("a gap in announcements of ends woke a ready subscriber")
	default:
	}
}
