package main

import "github.com/stemflow/stem/storage"

// releaseFigures are a store's figures at one worker in the last release,
// each against the store's own ceiling measured in the same run: W1 in
// each start style as a fraction of the one-connection commit rate, and
// W2's median in commit latencies (its p50 over the p50 of one commit).
// As ratios to the store's ceiling they carry from one machine to
// another far better than steps per second do.
type releaseFigures struct {
	Batch, Goroutines float64
	W2Commits         float64
}

// lastRelease is what `stem bench --workload ceiling,w1,w2 --concurrency
// 1` measured on each store at the last release, by the ceiling probe's
// description of one commit (storage.CommitProbe.Commit). stem bench at
// one worker prints them beside today's figures, so a change that slows
// one run at a time shows.
var lastRelease = struct {
	Build  string
	Stores map[string]releaseFigures
}{
	Build: "631d70a",
	Stores: map[string]releaseFigures{
		"one-row commits, synchronous=NORMAL": {Batch: 0.21, Goroutines: 0.18, W2Commits: 71},
		"one-row commits, synchronous=FULL":   {Batch: 0.62, Goroutines: 0.55, W2Commits: 19},
		"one-row commits":                     {Batch: 0.42, Goroutines: 0.46, W2Commits: 24},
		"trivial EVALSHA calls":               {Batch: 0.33, Goroutines: 0.27, W2Commits: 59},
	},
}

// compareRelease sets, at one worker, each w1 result's and the w2
// result's figures of the last release, and w2's median in commit
// latencies, from the one-connection probe one.
func compareRelease(results []benchResult, one storage.CommitProbe) {
	rel, ok := lastRelease.Stores[one.Commit]
	for i := range results {
		r := &results[i]
		switch r.Workload {
		case "w1":
			if !ok {
				continue
			}
			r.ReleaseCeilingRatio = rel.Goroutines
			if r.Start == "batch" {
				r.ReleaseCeilingRatio = rel.Batch
			}
		case "w2":
			if one.P50 > 0 {
				r.CommitLatencies = r.P50Ms / msOf(one.P50)
			}
			if ok {
				r.ReleaseCommitLatencies = rel.W2Commits
			}
		}
	}
}
