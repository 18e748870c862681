package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/redis/go-redis/v9"
)

// trivialScript is the floor of any store operation: one EVALSHA round trip
// of a script that touches one key.
var trivialScript = redis.NewScript(`#!lua
return redis.call('INCR', KEYS[1])`)

// runParallel runs op b.N times spread over conc goroutines, each with its
// own index, and reports ops/s under the given name, with the CPU time the
// Redis server and this process spent per op, and the time the server
// spent running scripts per op: on a busy machine these vary far less
// than the rates. The server's figures count every client's commands, so
// they are the store's own only on a server the benchmark has to itself.
func runParallel(b *testing.B, c *redis.Client, conc int, unit string, op func(worker, i int) error) {
	b.Helper()
	server0, client0, script0 := serverCPU(b, c), processCPU(), scriptTime(b, c)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	b.ResetTimer()
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(w, int(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(float64((serverCPU(b, c)-server0).Nanoseconds())/1000/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64((processCPU()-client0).Nanoseconds())/1000/float64(b.N), "client-cpu-µs/op")
	b.ReportMetric(float64((scriptTime(b, c)-script0).Nanoseconds())/1000/float64(b.N), "script-µs/op")
}

// scriptTime is the time the Redis server has spent running EVALSHA
// commands, from INFO commandstats: the scripts' own cost, without the
// network's.
func scriptTime(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return time.Duration(us) * time.Microsecond
			}
		}
	}
	return 0
}

// serverCPU is the CPU time the Redis server has used, from INFO cpu.
func serverCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServerCeiling measures one EVALSHA round trip of a trivial
// script per operation: the ceiling any Redis store operation is under.
func BenchmarkServerCeiling(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			c := benchClient(b, conc)
			prefix := testPrefix(b)
			cleanupPrefix(b, c, prefix)
			ctx := context.Background()
			if err := trivialScript.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			runParallel(b, c, conc, "ops/s", func(w, _ int) error {
				return trivialScript.Run(ctx, c, []string{prefix + "n:" + strconv.Itoa(w)}).Err()
			})
		})
	}
}

// BenchmarkCheckpoint measures Store.Checkpoint: each caller holds the
// lease of its own run and writes checkpoints with one attempt each.
func BenchmarkCheckpoint(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			ctx := context.Background()
			c := benchClient(b, conc)
			prefix := testPrefix(b)
			cleanupPrefix(b, c, prefix)
			s, err := New(ctx, c, Options{Prefix: prefix, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			runs := make([]storage.NewRun, conc)
			for i := range runs {
				runs[i] = storage.NewRun{ID: fmt.Sprintf("run-%03d", i), Workflow: "bench", Input: []byte(`{"n":1}`)}
			}
			if _, err := s.CreateRuns(ctx, runs); err != nil {
				b.Fatal(err)
			}
			claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "bench", Workflows: []string{"bench"}, Limit: conc, LeaseFor: time.Hour})
			if err != nil || len(claimed) != conc {
				b.Fatalf("claim: %v, %d runs", err, len(claimed))
			}
			output := []byte(`{"ok":true,"value":"some step result"}`)
			now := time.Now()
			runParallel(b, c, conc, "checkpoints/s", func(w, i int) error {
				key := "step@v1#" + strconv.Itoa(i)
				_, err := s.Checkpoint(ctx, storage.CheckpointRequest{
					Lease:      claimed[w].Lease,
					LeaseFor:   time.Hour,
					Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: output},
					Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
				})
				return err
			})
		})
	}
}

// BenchmarkRunPath drives each run through the store calls a worker makes
// for a 10-step workflow: create, claim, load checkpoints, ten checkpoints,
// complete. It reports the store's share of the framework's targets:
// steps/s and the median wall time of one run.
func BenchmarkRunPath(b *testing.B) {
	const steps = 10
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			ctx := context.Background()
			c := benchClient(b, conc)
			prefix := testPrefix(b)
			cleanupPrefix(b, c, prefix)
			s, err := New(ctx, c, Options{Prefix: prefix, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			output := []byte(`{"ok":true,"value":"some step result"}`)
			durations := make([]time.Duration, b.N)
			runParallel(b, c, conc, "runs/s", func(w, i int) error {
				start := time.Now()
				wf := "bench-" + strconv.Itoa(w)
				id := fmt.Sprintf("run-%d-%09d", w, i)
				if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: wf, Input: []byte(`{"n":1}`)}}); err != nil {
					return err
				}
				claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "bench", Workflows: []string{wf}, Limit: 1, LeaseFor: time.Minute})
				if err != nil {
					return err
				}
				if len(claimed) != 1 {
					return fmt.Errorf("claimed %d runs", len(claimed))
				}
				l := claimed[0].Lease
				if _, err := s.LoadReplay(ctx, id); err != nil {
					return err
				}
				for k := range steps {
					key := "step@v1#" + strconv.Itoa(k)
					now := time.Now()
					if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{
						Lease: l, LeaseFor: time.Minute,
						Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: output},
						Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
					}); err != nil {
						return err
					}
				}
				if err := s.Complete(ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: output}); err != nil {
					return err
				}
				durations[i] = time.Since(start)
				return nil
			})
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms/run")
			b.ReportMetric(float64(steps*b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// benchClient is a client whose pool fits conc callers.
func benchClient(b *testing.B, conc int) *redis.Client {
	o, err := redis.ParseURL(redisURL(b))
	if err != nil {
		b.Fatal(err)
	}
	o.PoolSize = max(conc, 10)
	c := redis.NewClient(o)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// BenchmarkClaim measures Store.Claim of one run at a time from a backlog
// of ready runs, by conc callers at once. With versions, the runs record
// workflow version 2 and each claim names the versions a worker of
// version 2 takes (0 and 2), as the runtime's claims do; with stranded,
// 300 older runs of version 1, which no claim takes, wait ahead of them.
func BenchmarkClaim(b *testing.B) {
	for _, c := range []struct {
		name              string
		version, stranded int
	}{
		{"plain", 0, 0},
		{"versions", 2, 0},
		{"stranded", 2, 300},
	} {
		for _, conc := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/conc=%d", c.name, conc), func(b *testing.B) {
				ctx := context.Background()
				rc := benchClient(b, conc)
				prefix := testPrefix(b)
				cleanupPrefix(b, rc, prefix)
				s, err := New(ctx, rc, Options{Prefix: prefix, Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var runs []storage.NewRun
				for i := range c.stranded {
					runs = append(runs, storage.NewRun{ID: fmt.Sprintf("old-%09d", i), Workflow: "bench", Version: 1})
				}
				for i := range b.N {
					runs = append(runs, storage.NewRun{ID: fmt.Sprintf("run-%09d", i), Workflow: "bench", Input: []byte(`{"n":1}`), Version: c.version})
				}
				if _, err := s.CreateRuns(ctx, runs); err != nil {
					b.Fatal(err)
				}
				req := storage.ClaimRequest{Owner: "bench", Workflows: []string{"bench"}, Limit: 1, LeaseFor: time.Hour}
				if c.version != 0 {
					req.Versions = map[string][]int{"bench": {0, c.version}}
				}
				runParallel(b, rc, conc, "claims/s", func(_, _ int) error {
					got, err := s.Claim(ctx, req)
					if err == nil && len(got) != 1 {
						err = fmt.Errorf("claimed %d runs", len(got))
					}
					return err
				})
			})
		}
	}
}

// BenchmarkCreate measures CreateRuns of one run at a time: a plain
// create (create.lua), which start policies must leave as fast as it was,
// and creates that take createpolicy.lua, one with a policy and an event
// (signal-with-start of a new ID) and one with a singleton key.
func BenchmarkCreate(b *testing.B) {
	for _, tc := range []struct {
		name string
		run  func(id, wf string) storage.NewRun
	}{
		{"plain", func(id, wf string) storage.NewRun {
			return storage.NewRun{ID: id, Workflow: wf, Input: []byte(`{"n":1}`)}
		}},
		{"policy+event", func(id, wf string) storage.NewRun {
			return storage.NewRun{ID: id, Workflow: wf, Input: []byte(`{"n":1}`), OnExisting: storage.ExistingFail,
				Event: &storage.Event{Topic: "t", Payload: []byte(`{"ok":true}`)}}
		}},
		{"key", func(id, wf string) storage.NewRun {
			return storage.NewRun{ID: id, Workflow: wf, Input: []byte(`{"n":1}`), Key: &storage.StartKey{Key: id}}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c := benchClient(b, 1)
			prefix := testPrefix(b)
			cleanupPrefix(b, c, prefix)
			s, err := New(ctx, c, Options{Prefix: prefix, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			runParallel(b, c, 1, "creates/s", func(_, i int) error {
				_, err := s.CreateRuns(ctx, []storage.NewRun{tc.run(fmt.Sprintf("run-%09d", i), "bench")})
				return err
			})
		})
	}
}
