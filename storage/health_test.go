package storage_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestHealthLogsOncePerEpisode: a server that stops answering is reported
// once however many calls fail, its recovery once, with the count of failed
// calls; an answer to a call sent before the episode began does not end
// it; a second episode is reported again.
func TestHealthLogsOncePerEpisode(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := storage.NewHealth(slog.New(slog.NewTextHandler(&buf, nil)), "teststore: server at h:1")
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	h.OK(time.Now()) // answering all along: nothing to say
	if buf.Len() != 0 {
		t.Fatalf("an answer with no episode logged %q", buf.String())
	}
	before := time.Now()
	time.Sleep(time.Millisecond) // the episode begins strictly after before
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { h.Fail("claim", errors.New("i/o timeout")) })
	}
	wg.Wait()
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=WARN") || !strings.Contains(l[0], "teststore: server at h:1 not answering since") || !strings.Contains(l[0], "op=claim") {
		t.Fatalf("five failures logged %q, want one warning naming the server and op", l)
	}
	h.OK(before)
	if l := lines(); len(l) != 1 {
		t.Fatalf("an answer to a call sent before the episode ended it: %q", l)
	}
	h.OK(time.Now())
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], "level=WARN") || !strings.Contains(l[1], "answering again after") || !strings.Contains(l[1], "failed_calls=5") {
		t.Fatalf("recovery logged %q, want one warning with failed_calls=5", l)
	}
	h.OK(time.Now())
	h.Fail("checkpoint", errors.New("refused"))
	if l := lines(); len(l) != 3 || !strings.Contains(l[2], "op=checkpoint") {
		t.Fatalf("a second episode logged %q, want a third line", l)
	}
}
