package memstore

import (
	"time"

	"github.com/stemflow/stem/storage"
)

// startKey names a start key (storage.StartKey): a key within a workflow.
type startKey struct{ workflow, key string }

// start judges one create (storage.NewRun) in the caller's critical
// section: its key, then the policy for the run its ID has, then the
// replacement and the event, as one change. It returns what it did.
func (s *Store) start(nr *storage.NewRun, now time.Time) storage.CreateResult {
	if nr.Key != nil {
		if h := s.holder(nr, now); h != nil {
			return s.join(h, nr, now)
		}
	}
	old := s.runs[nr.ID]
	if old == nil {
		return s.created(s.insert(nr, now), nr, now)
	}
	replace := false
	if !old.rec.Status.Finished() {
		switch nr.OnExisting {
		case storage.ExistingFail:
			return refused(old, storage.RefusedExists)
		case storage.ExistingReplace:
			replace = true
		}
	} else {
		switch nr.OnEnded {
		case storage.EndedReturn:
			if nr.Event != nil {
				// An ended run cannot take the event, and no new run
				// would.
				return refused(old, storage.RefusedEnded)
			}
		case storage.EndedReject:
			return refused(old, storage.RefusedEnded)
		case storage.EndedReuse:
			replace = true
		case storage.EndedReuseFailed:
			if old.rec.Status == storage.StatusComplete {
				return refused(old, storage.RefusedEnded)
			}
			replace = true
		}
	}
	if !replace {
		res := storage.CreateResult{}
		if nr.Event != nil {
			res.Delivered = s.send(old, nr.Event.Topic, clone(nr.Event.Payload), now)
		}
		res.Run = old.record()
		return res
	}
	family, ok := s.family(old)
	if !ok {
		return refused(old, storage.RefusedFamily)
	}
	was := old.rec.Status
	s.replace(old, family, nr.Replace, now)
	// The new run's tokens go on from the old one's (replace kept it in
	// s.retired), so the old holder's lease never matches a lease of the
	// new run.
	res := s.created(s.insert(nr, now), nr, now)
	res.Replaced, res.ReplacedStatus = true, was
	return res
}

// refused reports a create r's policy refused; nothing is written.
func refused(r *run, why storage.StartRefusal) storage.CreateResult {
	return storage.CreateResult{Refused: why, Run: r.record()}
}

// created reports the creation of r for nr, buffering nr's event for it.
func (s *Store) created(r *run, nr *storage.NewRun, now time.Time) storage.CreateResult {
	if nr.Event != nil {
		s.send(r, nr.Event.Topic, clone(nr.Event.Payload), now)
	}
	return storage.CreateResult{Created: true, Run: r.record()}
}

// holder returns the run that holds nr's key so that nr joins it, or nil
// when nr goes on to create: a singleton's holder until it finishes, a
// debounce window's run until it is claimed (while it is queued and not
// yet ready). A record whose run is gone, or was replaced, holds nothing.
func (s *Store) holder(nr *storage.NewRun, now time.Time) *run {
	h := s.keys[startKey{nr.Workflow, nr.Key.Key}]
	if h == nil || s.runs[h.rec.ID] != h {
		return nil
	}
	if nr.Key.Debounce == 0 {
		if h.rec.Status.Finished() {
			return nil
		}
		return h
	}
	if h.rec.Status != storage.StatusQueued || h.rec.ReadyAt == nil || !h.rec.ReadyAt.After(now) {
		return nil
	}
	return h
}

// join makes nr join the holder of its key: a debounce window's run takes
// nr's input and headers unless the key keeps the first, and nr's event
// goes to the holder. Nothing else of nr is written.
func (s *Store) join(h *run, nr *storage.NewRun, now time.Time) storage.CreateResult {
	if nr.Key.Debounce > 0 && !nr.Key.KeepFirst {
		h.rec.Input = clone(nr.Input)
		h.rec.Headers = cloneHeaders(nr.Headers)
		s.setAttrs(h, storage.NormalizeAttrs(nr.Attributes))
		h.rec.UpdatedAt = now
	}
	res := storage.CreateResult{Joined: true}
	if nr.Event != nil {
		res.Delivered = s.send(h, nr.Event.Topic, clone(nr.Event.Payload), now)
	}
	res.Run = h.record()
	return res
}

// family returns every descendant of r, through finished ones too, and
// reports whether r may be replaced: no unfinished descendant outlives it
// (abandons or is only cancelled with its parent), whose ID a child of
// the new run could take.
func (s *Store) family(r *run) ([]*run, bool) {
	var all []*run
	todo := []*run{r}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range s.children[p.rec.ID] {
			if !c.rec.Status.Finished() && c.rec.ParentPolicy != storage.ParentTerminate {
				return nil, false
			}
			all = append(all, c)
			todo = append(todo, c)
		}
	}
	return all, true
}

// replace ends r and its family (every descendant, from family) on the
// terms given and deletes them: r is terminated as Terminate would with
// terms' errors, and so is every unfinished descendant, which family found
// to end with its parent; each end is announced. Then they go, as Purge
// deletes runs, with the start keys they hold, but the lease token of each
// that was ever claimed stays in s.retired: fencing compares a run's ID and
// token, and a holder of a deleted run's lease, which may not have heard
// yet that it lost it, must not match the lease of a run made later in its
// place (the new run, or a child of it that takes a deleted child's ID).
func (s *Store) replace(r *run, family []*run, terms *storage.ReplaceTerms, now time.Time) {
	if !r.rec.Status.Finished() {
		e := terms.Error
		s.finish(r, storage.StatusTerminated, nil, &e, now)
	}
	for _, d := range family {
		if !d.rec.Status.Finished() {
			e := terms.ChildError
			s.finish(d, storage.StatusTerminated, nil, &e, now)
		}
	}
	family = append(family, r)
	for _, d := range family {
		if t := d.rec.Token; t > s.retired[d.rec.ID] {
			s.retired[d.rec.ID] = t
		}
	}
	s.forgetAll(family)
}
