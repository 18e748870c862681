package benchwork

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// SoakDuration is how long Soak runs: $STEM_SOAK (a Go duration), or 3m
// when unset (two samples past the first retention), unless asked for the
// 10-minute soak.
func SoakDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("STEM_SOAK")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Minute
}

// Soak runs steady load on store for SoakDuration: a goroutine per run,
// at most workers in flight, each a ten-step run started and awaited, with
// the engine's retention at retention and its sweep every retention/4. It
// reports the store's size (size, in bytes) and the process's resident
// memory at the start of the steady state (once one retention has passed,
// so the store holds a full retention's worth of runs) and at the end, and
// the runs per second. The sizes should not grow.
func Soak(b *testing.B, store storage.Store, workers int, retention time.Duration, size func() (int64, error)) {
	b.Helper()
	e := newEngine(b, runtime.Config{Store: store, Workers: workers, ClaimBatch: workers,
		Retention: retention, SweepInterval: retention / 4})
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	total := SoakDuration()
	b.ResetTimer()
	for range b.N {
		began := time.Now()
		var started int64
		sem := make(chan struct{}, workers)
		errs := make(chan error, 1)
		var firstSize, firstRSS int64
		sample := time.NewTimer(retention + retention/2)
		end := time.After(total)
	loop:
		for {
			select {
			case <-end:
				break loop
			case <-sample.C:
				sz, err := size()
				if err != nil {
					b.Fatal(err)
				}
				rss := residentBytes()
				if firstSize == 0 {
					firstSize, firstRSS = sz, rss
					b.Logf("steady state at %v: store %s, RSS %s", time.Since(began).Round(time.Second), mib(sz), mib(rss))
				} else {
					b.Logf("at %v: store %s, RSS %s", time.Since(began).Round(time.Second), mib(sz), mib(rss))
				}
				sample.Reset(max(total/10, retention))
			case err := <-errs:
				b.Fatal(err)
			case sem <- struct{}{}:
				started++
				i := int(started)
				go func() {
					defer func() { <-sem }()
					r, err := runtime.Start[int, int](ctx, e, Workflow, i)
					if err == nil {
						var got int
						got, err = r.Result(ctx)
						if err == nil && got != tenStepsOf(i) {
							err = fmt.Errorf("run %d returned %d", i, got)
						}
					}
					if err != nil && ctx.Err() == nil {
						select {
						case errs <- err:
						default:
						}
					}
				}()
			}
		}
		elapsed := time.Since(began)
		sz, err := size()
		if err != nil {
			b.Fatal(err)
		}
		rss := residentBytes()
		b.Logf("end at %v: store %s (steady start %s), RSS %s (steady start %s), %d runs", elapsed.Round(time.Second), mib(sz), mib(firstSize), mib(rss), mib(firstRSS), started)
		b.ReportMetric(float64(started)/elapsed.Seconds(), "runs/s")
		b.ReportMetric(float64(firstSize)/(1<<20), "store-start-MiB")
		b.ReportMetric(float64(sz)/(1<<20), "store-end-MiB")
		b.ReportMetric(float64(firstRSS)/(1<<20), "rss-start-MiB")
		b.ReportMetric(float64(rss)/(1<<20), "rss-end-MiB")
	}
	debug.FreeOSMemory()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// residentBytes is the process's resident set size now, from
// /proc/self/statm (0 where there is none).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
