package storage

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CommitProber is implemented by stores that can measure their server's
// ceiling: how many of the cheapest durable writes the server (or, for an
// embedded store, the file) takes per second, and how long one takes, over
// the store's own connections and with its own settings. A store's figures
// (steps per second, a run's latency) mean most next to this one, measured
// in the same run on the same machine: 'stem bench' prints both. A store
// with nothing under it to measure (memstore) does not implement it.
//
// ProbeCommits commits from conns connections at once for d and reports
// what it measured. A store that has fewer connections to commit from
// (SQLite's one writer, a pool smaller than conns) uses what it has and
// says so in CommitProbe.Conns. It writes only scratch data of its own,
// which it creates and removes before it returns, also when it fails; it
// never reads or changes runs, so it may run beside workers, which then
// share the server with it (and both figures are lower). While it runs it
// holds the connections it commits from. Two probes of one store at once
// may fail, as one removes the scratch data the other writes to.
//
// conns must be 1 or more and d more than zero (see CheckProbe).
type CommitProber interface {
	ProbeCommits(ctx context.Context, conns int, d time.Duration) (CommitProbe, error)
}

// CommitProbe is what a CommitProber measured.
type CommitProbe struct {
	// Commit is what one commit was, as a report names it in the plural:
	// "one-row commits", "trivial EVALSHA calls".
	Commit string
	// Conns is how many connections committed at once.
	Conns int
	// Commits is how many commits ended within Elapsed.
	Commits int64
	// Elapsed is the time from the first timed commit's start to the last
	// one's end.
	Elapsed time.Duration
	// P50 and P99 are the median and the 99th percentile of one commit's
	// latency, as its connection saw it.
	P50, P99 time.Duration
}

// PerSecond returns the commits per second, or 0 when nothing was
// measured.
func (p CommitProbe) PerSecond() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Commits) / p.Elapsed.Seconds()
}

// CheckProbe checks ProbeCommits's arguments: conns 1 or more, d more than
// zero.
func CheckProbe(conns int, d time.Duration) error {
	switch {
	case conns < 1:
		return invalid("probe commits", "%d connections, want 1 or more", conns)
	case d <= 0:
		return invalid("probe commits", "duration %v, want more than zero", d)
	}
	return nil
}

// MeasureCommits is the measuring loop of a ProbeCommits: commit is called
// from conns goroutines at once, goroutine i passing i (the connection it
// commits on), over and over until d has passed since the first timed
// call. Each goroutine first calls it once untimed, so that connections are
// dialled and statements prepared before the clock starts. The first error
// stops every goroutine and is returned. The result has no Commit; the
// store names it.
func MeasureCommits(ctx context.Context, conns int, d time.Duration, commit func(ctx context.Context, conn int) error) (CommitProbe, error) {
	if err := CheckProbe(conns, d); err != nil {
		return CommitProbe{}, err
	}
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { errs[i] = commit(ctx, i) })
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return CommitProbe{}, err
	}
	lat := make([][]time.Duration, conns)
	var failed atomic.Bool
	began := time.Now()
	end := began.Add(d)
	for i := range conns {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(end) || failed.Load() || ctx.Err() != nil {
					return
				}
				if err := commit(ctx, i); err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if err := firstError(errs); err != nil {
		return CommitProbe{}, err
	}
	if err := ctx.Err(); err != nil {
		return CommitProbe{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	p := CommitProbe{Conns: conns, Commits: int64(len(all)), Elapsed: elapsed}
	if n := len(all); n > 0 {
		p.P50, p.P99 = all[n/2], all[min(n-1, n*99/100)]
	}
	return p, nil
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
