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
// 1 --runs 300` measured on each store at the last release, by the
// ceiling probe's description of one commit (storage.CommitProbe.Commit):
// medians of three rounds on a 2-core machine that also ran the servers.
// stem bench at one worker prints them beside today's figures, so a
// change that slows one run at a time shows.
var lastRelease = struct {
	Build  string
	Stores map[string]releaseFigures
}{
	Build: "631d70a",
	Stores: map[string]releaseFigures{
		"one-row commits, synchronous=NORMAL": {Batch: 0.23, Goroutines: 0.19, W2Commits: 75},
		"one-row commits, synchronous=FULL":   {Batch: 0.57, Goroutines: 0.59, W2Commits: 20},
		"one-row commits":                     {Batch: 0.32, Goroutines: 0.32, W2Commits: 40},
		"trivial EVALSHA calls":               {Batch: 0.37, Goroutines: 0.31, W2Commits: 45},
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
