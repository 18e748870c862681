package storage_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

func TestParseAttrFilter(t *testing.T) {
	types := map[string]storage.AttrType{"total": storage.AttrNumber, "placed": storage.AttrTime, "express": storage.AttrBool}
	for text, want := range map[string]storage.AttrFilter{
		"customer=C-7":                      {Op: storage.OpEq, Value: storage.StringAttr("customer", "C-7")},
		"customer=a=b":                      {Op: storage.OpEq, Value: storage.StringAttr("customer", "a=b")},
		"order^=88":                         {Op: storage.OpPrefix, Value: storage.StringAttr("order", "88")},
		"total>=100":                        {Op: storage.OpGe, Value: storage.NumberAttr("total", 100)},
		"total<1e3":                         {Op: storage.OpLt, Value: storage.NumberAttr("total", 1000)},
		"total>-2.5":                        {Op: storage.OpGt, Value: storage.NumberAttr("total", -2.5)},
		"total<=0":                          {Op: storage.OpLe, Value: storage.NumberAttr("total", 0)},
		"placed<2026-11-28":                 {Op: storage.OpLt, Value: storage.TimeAttr("placed", time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))},
		"placed>=2026-11-28T10:00:00+01:00": {Op: storage.OpGe, Value: storage.TimeAttr("placed", time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))},
		"express=true":                      {Op: storage.OpEq, Value: storage.BoolAttr("express", true)},
		"customer=":                         {Op: storage.OpEq, Value: storage.StringAttr("customer", "")},
	} {
		got, err := storage.ParseAttrFilter(text, types)
		if err != nil {
			t.Errorf("ParseAttrFilter(%q): %v", text, err)
			continue
		}
		if got.Op != want.Op || !got.Value.Equal(want.Value) {
			t.Errorf("ParseAttrFilter(%q) = %v, want %v", text, got, want)
		}
	}
	for text, words := range map[string]string{
		"customer":                             "want NAME OP VALUE",
		"=C-7":                                 "want NAME OP VALUE",
		"total=ten":                            "is a number",
		"placed>yesterday":                     "is a time",
		"express=yes":                          "true or false",
		"customer>C":                           "compares only numbers and times",
		"total^=1":                             "compares only strings",
		"customer^=":                           "empty prefix",
		"bad name=1":                           "attribute name",
		"customer=" + strings.Repeat("x", 300): "over the limit of 256",
	} {
		_, err := storage.ParseAttrFilter(text, types)
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), words) {
			t.Errorf("ParseAttrFilter(%q) = %v, want ErrInvalidArgument saying %q", text, err, words)
		}
	}
}

func TestMergeAttrs(t *testing.T) {
	have := storage.NormalizeAttrs([]storage.Attr{storage.StringAttr("b", "1"), storage.NumberAttr("a", 1)})
	got, err := storage.MergeAttrs(have, []storage.Attr{storage.BoolAttr("b", true), storage.StringAttr("c", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "a" || got[1].Type != storage.AttrBool || got[2].Str != "x" {
		t.Fatalf("MergeAttrs = %v", got)
	}
	if len(have) != 2 || have[1].Type != storage.AttrString {
		t.Fatalf("MergeAttrs changed its input: %v", have)
	}
	var full []storage.Attr
	for i := range storage.MaxAttributes {
		full = append(full, storage.NumberAttr(string(rune('a'+i%26))+string(rune('a'+i/26)), 1))
	}
	full = storage.NormalizeAttrs(full)
	if _, err := storage.MergeAttrs(full, []storage.Attr{storage.StringAttr("zz", "x")}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a merge past the limit = %v, want ErrInvalidArgument", err)
	}
}

func TestListRunsQueryPast(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id string, d time.Duration) *storage.RunRecord {
		return &storage.RunRecord{ID: id, CreatedAt: at.Add(d)}
	}
	q := storage.ListRunsQuery{Order: storage.OrderCreated, After: storage.CreatedCursor(at.Add(time.Second), "m")}
	for _, tc := range []struct {
		r         *storage.RunRecord
		asc, desc bool
	}{
		{rec("a", 2*time.Second), true, false},
		{rec("z", 0), false, true},
		{rec("n", time.Second), true, false},
		{rec("l", time.Second), false, true},
		{rec("m", time.Second), false, false},
		// Below the microsecond, a time compares as stores keep it.
		{rec("l", time.Second+300*time.Nanosecond), false, true},
	} {
		q.Descending = false
		if got := q.Past(tc.r); got != tc.asc {
			t.Errorf("ascending Past(%s at %v) = %v", tc.r.ID, tc.r.CreatedAt, got)
		}
		q.Descending = true
		if got := q.Past(tc.r); got != tc.desc {
			t.Errorf("descending Past(%s at %v) = %v", tc.r.ID, tc.r.CreatedAt, got)
		}
	}
	if c := q.NextCursor(rec("k", 1500*time.Nanosecond)); c != storage.CreatedCursor(at.Add(time.Microsecond), "k") {
		t.Errorf("NextCursor = %q, want the creation time to the microsecond", c)
	}
}
