package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// An operator's command seals payloads only with a key some live worker
// holds, and reads which from the workers' records: a store that drops a
// worker's key IDs makes every sealed write look unreadable (and is
// refused), one that mixes them up lets through a write no worker can
// open, which then waits forever.
var workerKeyCases = []testCase{
	{"workers/a worker's codec key IDs and missing key IDs are kept in order, replaced by a put, and none reads as nil", testWorkerKeyIDs},
	{"workers/malformed key IDs are invalid and change nothing", testWorkerKeyIDsMalformed},
}

func testWorkerKeyIDs(f *fixture) {
	a, b := worker("w-a"), worker("w-b")
	a.KeyIDs = []string{"9f86d081884c7d65", "2c26b46b68ffc68f", "kms:alias/stem-2026_1.x"}
	b.KeyIDs = []string{"2c26b46b68ffc68f"}
	b.MissingKeyIDs = []string{"9f86d081884c7d65"}
	f.putWorker(a, time.Minute)
	f.putWorker(b, time.Minute)
	f.wantWorkers("after two puts", f.stamped(a, time.Minute), f.stamped(b, time.Minute))

	// A put replaces the lists; an empty one reads as nil, as no list.
	f.clock.Advance(time.Second)
	a.KeyIDs, a.MissingKeyIDs = []string{}, []string{"2c26b46b68ffc68f"}
	b.KeyIDs, b.MissingKeyIDs = []string{"9f86d081884c7d65", "2c26b46b68ffc68f"}, []string{}
	f.putWorker(a, time.Minute)
	f.putWorker(b, time.Minute)
	wantA, wantB := f.stamped(a, time.Minute), f.stamped(b, time.Minute)
	wantA.KeyIDs, wantB.MissingKeyIDs = nil, nil
	f.wantWorkers("after both are put again", wantA, wantB)
}

func testWorkerKeyIDsMalformed(f *fixture) {
	good := worker("w-good")
	good.KeyIDs = []string{"9f86d081884c7d65"}
	f.putWorker(good, time.Minute)
	before := f.workers()
	var calls []badCall
	bad := func(what string, edit func(w *storage.Worker)) {
		r := storage.PutWorkerRequest{Worker: worker("w-good"), TTL: time.Minute}
		r.Worker.InFlight = 99 // a put that went through would show
		edit(&r.Worker)
		calls = append(calls, badCall{"PutWorker with " + what, r.Validate(), func() error {
			return f.store.PutWorker(f.ctx, r)
		}})
	}
	many := make([]string, storage.MaxWorkerKeyIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("%016x", i)
	}
	bad("an empty key ID", func(w *storage.Worker) { w.KeyIDs = []string{"9f86d081884c7d65", ""} })
	bad("a key ID with a space", func(w *storage.Worker) { w.KeyIDs = []string{"key one"} })
	bad("a key ID with a newline", func(w *storage.Worker) { w.KeyIDs = []string{"9f86\nd081"} })
	bad("a key ID with NUL", func(w *storage.Worker) { w.KeyIDs = []string{"9f86\x00d081"} })
	bad("a key ID of non-ASCII text", func(w *storage.Worker) { w.KeyIDs = []string{"clé"} })
	bad("a key ID too long", func(w *storage.Worker) { w.KeyIDs = []string{strings.Repeat("k", storage.MaxKeyIDLen+1)} })
	bad("too many key IDs", func(w *storage.Worker) { w.KeyIDs = many })
	bad("a malformed missing key ID", func(w *storage.Worker) { w.MissingKeyIDs = []string{"\x7f"} })
	bad("too many missing key IDs", func(w *storage.Worker) { w.MissingKeyIDs = many })
	f.wantRefused(calls)
	if after := f.workers(); !reflect.DeepEqual(after, before) {
		f.t.Fatalf("malformed puts changed the workers:\nbefore %+v\nafter  %+v", before, after)
	}
}
