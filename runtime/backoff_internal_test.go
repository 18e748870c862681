package runtime

import (
	"testing"
	"time"
)

// A delay d waits between d*(1-Jitter) and d: d/2 to d by default, d
// exactly with NoJitter, 0 to d with a Jitter of 1.
func TestBackoffJitter(t *testing.T) {
	const d = time.Second
	for _, tc := range []struct {
		jitter   float64
		min, max time.Duration
	}{
		{0, d / 2, d},
		{DefaultJitter, d / 2, d},
		{NoJitter, d, d},
		{0.1, d - d/10, d},
		{1, 0, d},
	} {
		opts := StepOptions{Backoff: d, MaxBackoff: time.Hour, Jitter: tc.jitter}
		if err := opts.check(); err != nil {
			t.Fatalf("Jitter %v: %v", tc.jitter, err)
		}
		for range 200 {
			if got := backoff(opts, 1); got < tc.min || got > tc.max {
				t.Fatalf("Jitter %v: first retry after %v, want %v to %v", tc.jitter, got, tc.min, tc.max)
			}
		}
	}
	if got := backoff(StepOptions{Backoff: d, MaxBackoff: 3 * d, Jitter: NoJitter}, 3); got != 3*d {
		t.Fatalf("third retry after %v, want the cap 3s", got)
	}
}
