package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stemflow/stem/storage"
)

// TestPrefixEnd: the upper bound of an ID prefix's range is valid UTF-8,
// above every valid string with the prefix and at or below every valid
// string above them, including where storage.PrefixEnd's byte increment
// makes invalid UTF-8.
func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"order-1", "order-2", true},
		{"order-1~", "order-1\x7f", true},
		{"a\x7f", "a\u0080", true},
		{"order-1\u00e9", "order-1\u00ea", true},
		{"order-1\u00ff", "order-1\u0100", true},
		{"x\u07ff", "x\u0800", true},
		{"x\ud7ff", "x\ue000", true},
		{"x\uffff", "x\U00010000", true},
		{"x\U0010ffff", "y", true},
		{"x\U0010ffff\U0010ffff", "y", true},
		{"\U0010ffff", "", false},
		{"", "", false},
	} {
		got, ok := prefixEnd(c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("prefixEnd(%+q) = %+q, %v; want %+q, %v", c.prefix, got, ok, c.want, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if !utf8.ValidString(got) || got <= c.prefix {
			t.Errorf("prefixEnd(%+q) = %+q: not valid UTF-8 above the prefix", c.prefix, got)
		}
		// The greatest strings with the prefix stay below it.
		for _, tail := range []string{"", "\U0010ffff", "\u00ff\U0010ffff", "~"} {
			if s := c.prefix + tail; s >= got {
				t.Errorf("prefixEnd(%+q) = %+q, not above %+q", c.prefix, got, s)
			}
		}
	}
}

// TestBytewise: only collations that sort UTF-8 byte for byte bound an ID
// prefix by a range.
func TestBytewise(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		provider, locale, encoding string
		want                       bool
	}{
		{"c", "C", "UTF8", true},
		{"c", "POSIX", "UTF8", true},
		{"c", "C.UTF-8", "UTF8", true},
		{"c", "C.utf8", "UTF8", true},
		{"b", "C.UTF-8", "UTF8", true},
		{"c", "en_US.UTF-8", "UTF8", false},
		{"i", "und", "UTF8", false},
		{"i", "", "UTF8", false},
		{"c", "C", "LATIN1", false},
	} {
		if got := bytewise(c.provider, c.locale, c.encoding); got != c.want {
			t.Errorf("bytewise(%q, %q, %q) = %v, want %v", c.provider, c.locale, c.encoding, got, c.want)
		}
	}
}

// TestIDPrefixUnderAnyCollation: on a store whose run IDs have an ICU
// collation, which sorts neither byte for byte nor prefixes together
// ("order-1éz" sorts after "order-1ê", the end of the range of
// "order-1é", and "~x" after "\x7f", which ICU ignores), Open finds the prefix range unusable and ListRuns still lists
// exactly the runs whose ID begins with the prefix, in both orders and
// page by page. The test database's own collation bounds the range.
func TestIDPrefixUnderAnyCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if !s.bytewiseIDs.Load() {
		t.Fatalf("the test database's collation (C.UTF-8 here) is not taken as byte for byte")
	}
	var icu bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu')`).Scan(&icu); err != nil {
		t.Fatal(err)
	}
	if !icu {
		t.Skip("the server has no ICU collation")
	}
	if _, err := s.pool.Exec(ctx, `ALTER TABLE `+s.schema+`.runs ALTER COLUMN id TYPE text COLLATE "und-x-icu"`); err != nil {
		t.Fatal(err)
	}
	s2, err := New(ctx, s.pool.Pool, Options{Schema: s.schemaName})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.bytewiseIDs.Load() {
		t.Fatalf("an ICU collation is taken as byte for byte")
	}
	ids := []string{"order-1", "order-1\u00e9", "order-1\u00e9z", "order-1\u00ea", "ORDER-1x", "order-1~", "order-1~x",
		"order-2", "order-1\u00ff", "order-1\u00ffa", "order-", "p", "~x", "~"}
	var runs []storage.NewRun
	for _, id := range ids {
		runs = append(runs, storage.NewRun{ID: id, Workflow: "wf"})
	}
	if _, err := s2.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"order-1", "order-1\u00e9", "order-1~", "order-1\u00ff", "~", "ORDER", "q"} {
		var want []string
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		for _, desc := range []bool{false, true} {
			var got []string
			q := storage.ListRunsQuery{IDPrefix: prefix, Descending: desc, Limit: 2}
			for range len(ids) {
				page, err := s2.ListRuns(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page.Runs {
					got = append(got, r.ID)
				}
				if q.After = page.Next; q.After == "" {
					break
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("prefix %+q, descending %v: listed %+q, want %+q", prefix, desc, got, want)
			}
		}
	}
}

// seedListing creates n runs, r-000000 on, of four workflows wf-0 to wf-3
// (by ID, in turn), in batches, and gives them the statuses of a store
// that has run a while: of each hundred, 80 complete, 5 errored, 3
// running, 1 paused, 1 waiting, 10 queued. Run r-000003 (of wf-3) has
// 500 children, c-r-000003-000 to -499, of workflow child, queued.
func seedListing(tb testing.TB, s *Store, n int) {
	tb.Helper()
	ctx := context.Background()
	const batch = 1000
	runs := make([]storage.NewRun, 0, batch)
	flush := func() {
		if _, err := s.CreateRuns(ctx, runs); err != nil {
			tb.Fatal(err)
		}
		runs = runs[:0]
	}
	input := []byte(`{"customer":"c-0042","items":[1,2,3],"note":"an input of typical size"}`)
	for i := range n {
		id := fmt.Sprintf("r-%06d", i)
		runs = append(runs, storage.NewRun{ID: id, Workflow: fmt.Sprintf("wf-%d", i%4), Input: input})
		if i == 3 {
			for c := range 500 {
				runs = append(runs, storage.NewRun{ID: fmt.Sprintf("c-%s-%03d", id, c), Workflow: "child", ParentID: id, Input: input})
			}
		}
		if len(runs) >= batch {
			flush()
		}
	}
	if len(runs) > 0 {
		flush()
	}
	_, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.runs r SET status = v.status,
	ready_at = CASE WHEN v.status = 'queued' THEN r.ready_at END,
	ended_at = CASE WHEN v.status IN `+finished+` THEN r.created_at END,
	owner = CASE WHEN v.status = 'running' THEN 'seed' ELSE '' END,
	lease_until = CASE WHEN v.status = 'running' THEN now() + interval '1 hour' END
FROM (SELECT id, CASE
		WHEN k < 80 THEN 'complete' WHEN k < 85 THEN 'errored' WHEN k < 88 THEN 'running'
		WHEN k < 89 THEN 'paused' WHEN k < 90 THEN 'waiting' ELSE 'queued' END AS status
	FROM (SELECT id, right(id, 2)::int AS k FROM `+s.schema+`.runs WHERE id LIKE 'r-%') n) v
WHERE r.id = v.id AND v.status <> 'queued'`)
	if err != nil {
		tb.Fatal(err)
	}
}
