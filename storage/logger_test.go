package storage_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
)

// TestLoggerOrDefault: with no logger configured, a store's warnings and
// errors reach slog.Default() (with their attributes and groups), and its
// info and debug records do not.
func TestLoggerOrDefault(t *testing.T) {
	// Not parallel: it replaces the process's default logger.
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	log := storage.LoggerOr(nil).With("store", "test").WithGroup("g")
	log.Debug("debug line")
	log.Info("info line")
	log.Warn("server not answering", "host", "h:1")
	log.Error("claim refused", "policy", "allkeys-lru")
	got := buf.String()
	for _, want := range []string{
		`level=WARN msg="server not answering" store=test g.host=h:1`,
		`level=ERROR msg="claim refused" store=test g.policy=allkeys-lru`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("default logger output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "info line") || strings.Contains(got, "debug line") {
		t.Errorf("default logger passed info or debug:\n%s", got)
	}

	var own bytes.Buffer
	l := slog.New(slog.NewTextHandler(&own, nil))
	if storage.LoggerOr(l) != l {
		t.Error("LoggerOr replaced a configured logger")
	}
}
