package sqlitestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
)

// BenchmarkOneWorker puts one worker's figures beside this file system's
// own cost of a commit, measured in the same iteration so that a machine
// whose disk others share moves them together: W1 (1000 runs of 10 trivial
// steps, started by one batch, worked by an engine of one worker) and W2
// (one 10-step run at a time, start to result) on a fresh store, as `stem
// bench` runs them, between measures of the single-row commit rate (as
// BenchmarkInsertCeiling: a fresh file with the store's pragmas, whose log
// grows with every commit) taken before W1, between the two and after W2.
// Beside steps/s and p50/p90 it reports W1 against the commit rate around
// it (w1-x-ceiling, the goal is 1 or more), W2's p50 in commit latencies
// around it (w2-p50-commits, the goal is 11 or less), the same against
// the store's own ceiling (ProbeCommits on the bench store before W1, as
// `stem bench --workload ceiling,w1,w2` measures it: w1-x-probe,
// w2-p50-probe-commits, with the probe's p50 commit latency), and the read
// system
// calls the process made per W1 run with the bytes they fetched from the
// disk rather than the page cache (reads/run and disk-read-B/run, from
// /proc/self/io where there is one).
//
//	go test -run '^$' -bench BenchmarkOneWorker/sync=FULL -benchtime 1x -count 3 ./stores/sqlitestore
func BenchmarkOneWorker(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode.String(), func(b *testing.B) {
			var rate, w1, w1x, reads, diskReads, p50, p90, p50x float64
			var probeRate, probeP50, w1xp, p50xp float64
			n := 0
			for b.Loop() {
				dir := b.TempDir()
				files := 0
				ceiling := func() float64 {
					files++
					return ceilingRate(b, filepath.Join(dir, fmt.Sprintf("ceiling%d.db", files)), mode, time.Second/2)
				}
				c1 := ceiling()
				s, err := Open(filepath.Join(dir, "bench.db"), Options{Synchronous: mode})
				if err != nil {
					b.Fatal(err)
				}
				e, err := runtime.New(runtime.Config{Store: s, Workers: 1})
				if err != nil {
					b.Fatal(err)
				}
				if err := loadgen.Register(e); err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				probe, err := s.ProbeCommits(ctx, 1, time.Second/2)
				if err != nil {
					b.Fatal(err)
				}
				pr := float64(probe.Commits) / probe.Elapsed.Seconds()
				probeRate += pr
				probeP50 += probe.P50.Seconds()
				done := make(chan error, 1)
				go func() { done <- e.Run(ctx) }()
				const runs, steps = 1000, 10
				r0, b0 := procIO()
				d, err := loadgen.Steps(ctx, e, loadgen.Batch, runs, steps)
				if err != nil {
					b.Fatal(err)
				}
				r1, b1 := procIO()
				reads += float64(r1-r0) / runs
				diskReads += float64(b1-b0) / runs
				c2 := ceiling()
				lat, err := loadgen.Latency(ctx, e, 5, 50, steps)
				if err != nil {
					b.Fatal(err)
				}
				c3 := ceiling()
				cancel()
				<-done
				e.Close()
				s.Close()
				rate += (c1 + c2 + c3) / 3
				sps := runs * steps / d.Seconds()
				w1 += sps
				w1x += sps / ((c1 + c2) / 2)
				w1xp += sps / pr
				q50 := loadgen.Percentile(lat, 0.5).Seconds()
				p50 += q50
				p90 += loadgen.Percentile(lat, 0.9).Seconds()
				p50x += q50 * (c2 + c3) / 2
				p50xp += q50 / probe.P50.Seconds()
				n++
			}
			k := float64(n)
			b.ReportMetric(rate/k, "commits/s")
			b.ReportMetric(1e6*k/rate, "commit-µs")
			b.ReportMetric(w1/k, "w1-steps/s")
			b.ReportMetric(w1x/k, "w1-x-ceiling")
			b.ReportMetric(p50/k*1e3, "w2-p50-ms")
			b.ReportMetric(p90/k*1e3, "w2-p90-ms")
			b.ReportMetric(p50x/k, "w2-p50-commits")
			b.ReportMetric(probeRate/k, "probe-commits/s")
			b.ReportMetric(probeP50/k*1e6, "probe-p50-µs")
			b.ReportMetric(w1xp/k, "w1-x-probe")
			b.ReportMetric(p50xp/k, "w2-p50-probe-commits")
			if reads > 0 {
				b.ReportMetric(reads/k, "reads/run")
				b.ReportMetric(diskReads/k, "disk-read-B/run")
			}
		})
	}
}

// ceilingRate commits one-row transactions on a fresh file at path, opened
// with the store's pragmas, for about d, and returns commits per second.
func ceilingRate(b *testing.B, path string, mode Synchronous, d time.Duration) float64 {
	st, done := ceilingInsert(b, path, mode)
	defer done()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := st.Exec("run-1", ceilingPayload); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// procIO returns how many read system calls the process has made (syscr
// in /proc/self/io) and how many bytes it caused to be read from the disk
// (read_bytes), or zeros where that file is missing.
func procIO() (syscalls, diskBytes int64) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			syscalls = n
		case "read_bytes":
			diskBytes = n
		}
	}
	return syscalls, diskBytes
}
