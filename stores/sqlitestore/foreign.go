package sqlitestore

import "time"

// Other processes may work the same file (each with a Store of its own).
// Their commits are noticed by the writer: SQLite's data_version, read on
// the writer's connection, changes when any other connection commits to
// the file, and only then (this Store's other connections only read). The
// writer reads it every foreignCheck, between two batches or while idle.
// When it changed, another process wrote: runs may have become ready
// (every ready subscriber is woken) and runs may have ended unheard (every
// finished subscriber is told it may have missed ends, storage.Missed, at
// most once per foreignGapEvery, so that callers awaiting thousands of
// runs read them no more often than a poll would while other processes
// write, and not at all while none does). So a Store hears every run's
// end, whichever process ends it (HearsEveryFinish), within foreignCheck
// of the commit, or foreignGapEvery while other processes keep writing.
const (
	foreignCheck    = 100 * time.Millisecond
	foreignGapEvery = time.Second
)

// foreignWatch is the writer's record of other connections' commits.
type foreignWatch struct {
	s       *Store
	version int64
	// gapAt is when finished subscribers were last told of a gap; owed
	// records a foreign commit not yet told, for lack of time since.
	gapAt time.Time
	owed  bool
	tick  *time.Ticker
}

func (s *Store) newForeignWatch(c *conn) *foreignWatch {
	f := &foreignWatch{s: s, tick: time.NewTicker(foreignCheck)}
	f.version, _ = f.read(c)
	return f
}

// read returns the connection's data_version.
func (f *foreignWatch) read(c *conn) (int64, error) {
	var v int64
	_, err := c.queryRow("PRAGMA data_version", func(r row) { v = r.int64(0) })
	return v, err
}

// check reads data_version and wakes the subscribers when another
// connection committed since the last check (or a gap is still owed).
func (f *foreignWatch) check(c *conn) {
	v, err := f.read(c)
	if err != nil {
		return // the next check, or the engines' poll, finds it
	}
	if v != f.version {
		f.version = v
		f.owed = true
		f.s.hub.Signal()
	}
	if f.owed {
		if now := time.Now(); now.Sub(f.gapAt) >= foreignGapEvery {
			f.gapAt, f.owed = now, false
			f.s.hub.Gap()
		}
	}
}

// due checks, between two batches, when a check is due: at most once a
// tick, so that a busy writer does not pay for a read per batch.
func (f *foreignWatch) due(c *conn) {
	select {
	case <-f.tick.C:
		f.check(c)
	default:
	}
}

// stop stops the watch's ticker.
func (f *foreignWatch) stop() { f.tick.Stop() }
