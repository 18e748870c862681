//go:build !otel

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Built without -tags otel, --otel and --metrics fail at once, before any
// store is opened, and say how to get them.
func TestTelemetryNotBuilt(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"--otel"}, {"--metrics", ":0"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%v) = %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "go run -tags otel ./example/orders --otel") {
			t.Errorf("run(%v) stderr does not say how to build with telemetry:\n%s", args, stderr.String())
		}
	}
}
