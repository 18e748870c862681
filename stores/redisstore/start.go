package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/stemflow/stem/storage"
)

// hasPolicy reports whether a create needs createpolicy.lua: it has a
// start policy other than the defaults, an event or a start key.
func hasPolicy(r storage.NewRun) bool {
	return r.OnExisting != storage.ExistingReturn || r.OnEnded != storage.EndedReturn || r.Event != nil || r.Key != nil
}

// policyFields is how many script arguments describe a run for
// createpolicy.lua: the newRunFields of appendNewRun, then those of
// appendPolicies (start_run in scripts/lib/start.lua reads them).
const policyFields = newRunFields + 12

// createPolicies creates a batch of runs of which one at least has a start
// policy, an event or a start key (hasPolicy) in one call of
// createpolicy.lua, which judges each run's in the same atomic change
// that creates it (start_run in scripts/lib/start.lua): a start key's
// holder is joined, a run of the ID is returned, refuses the create, or
// is replaced (terminated as Terminate does and deleted with its
// descendants as Purge deletes a run, its family checked before any
// write), and the event is delivered as SendEvent would. The call carries
// a random operation ID, as SendEvent does, so that a script the client
// sends again returns its first results (with the runs as they are then)
// instead of joining, replacing or delivering a second time. It appends
// the results to out.
func (s *Store) createPolicies(ctx context.Context, keys []string, runs []storage.NewRun, out []storage.CreateResult) ([]storage.CreateResult, error) {
	args := make([]any, 0, 1+policyFields*len(runs))
	args = append(args, rand.Text())
	for _, r := range runs {
		args = appendNewRun(args, r)
		var err error
		if args, err = appendPolicies(args, r); err != nil {
			return nil, err
		}
	}
	v, err := s.run(ctx, createPolicyScript, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: create: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != len(runs) {
		return nil, fmt.Errorf("redisstore: create: unexpected reply")
	}
	for i, item := range list {
		res, ok := item.([]any)
		if !ok || len(res) != 6 {
			return nil, fmt.Errorf("redisstore: create %q: unexpected reply", runs[i].ID)
		}
		m, err := pairsToMap(res[1])
		if err != nil {
			return nil, err
		}
		rec, err := decodeRun(m)
		if err != nil {
			return nil, err
		}
		created, _ := res[0].(int64)
		joined, _ := res[3].(int64)
		delivered, _ := res[5].(int64)
		was := storage.RunStatus(str(res[2]))
		out = append(out, storage.CreateResult{
			Created:        created == 1,
			Run:            rec,
			Replaced:       was != "",
			ReplacedStatus: was,
			Joined:         joined == 1,
			Refused:        storage.StartRefusal(str(res[4])),
			Delivered:      delivered == 1,
		})
	}
	return out, nil
}

// appendPolicies appends the script arguments of a create's lease and
// policies after its appendNewRun ones: the lease's owner ("" for none)
// and length (µs), the policies for an existing and an ended run, the
// replacement's error, descendants' error (JSON, "" without terms) and
// marked cancellation reason, the event's topic ("" for none) and marked
// payload, the start key ("" for none), its debounce window (µs, rounded
// up, "" for none) and "1" to keep the window's first input.
func appendPolicies(args []any, r storage.NewRun) ([]any, error) {
	owner, leaseFor := "", ""
	if l := r.Lease; l != nil {
		owner, leaseFor = l.Owner, durMicros(l.For)
	}
	errJSON, childJSON, cancel := "", "", ""
	if t := r.Replace; t != nil {
		var err error
		if errJSON, err = encodeError(&t.Error); err != nil {
			return nil, err
		}
		if childJSON, err = encodeError(&t.ChildError); err != nil {
			return nil, err
		}
		cancel = markText(t.ChildCancel)
	}
	topic, payload := "", ""
	if ev := r.Event; ev != nil {
		topic, payload = ev.Topic, mark(ev.Payload)
	}
	key, debounce, keepFirst := "", "", ""
	if k := r.Key; k != nil {
		key = k.Key
		if k.Debounce > 0 {
			debounce = strconv.FormatInt(int64((k.Debounce+time.Microsecond-1)/time.Microsecond), 10)
		}
		if k.KeepFirst {
			keepFirst = "1"
		}
	}
	return append(args, owner, leaseFor, string(r.OnExisting), string(r.OnEnded), errJSON, childJSON, cancel,
		topic, payload, key, debounce, keepFirst), nil
}
