package stemotel_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The package depends on the OpenTelemetry API only, leaving the SDK to
// the application, and the runtime on no OpenTelemetry module at all.
func TestDependencies(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	for pkg, forbidden := range map[string]string{
		"github.com/stemflow/stem/stemotel": "go.opentelemetry.io/otel/sdk",
		"github.com/stemflow/stem/runtime":  "go.opentelemetry.io/",
	} {
		out, err := exec.Command(goCmd, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %v", pkg, deps)
		}
		for _, d := range deps {
			if d == strings.TrimSuffix(forbidden, "/") || strings.HasPrefix(d, strings.TrimSuffix(forbidden, "/")+"/") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}
