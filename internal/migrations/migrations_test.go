package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	ok := fstest.MapFS{
		"m/002_more.up.sql": {Data: []byte("B")},
		"m/001_init.up.sql": {Data: []byte("A")},
	}
	ms, err := Load(ok, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "init" || ms[1].SQL != "B" {
		t.Fatalf("Load: %+v %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"not numbered 001": {"m/001_a.up.sql": {}, "m/003_c.up.sql": {}},
		"duplicate":        {"m/001_a.up.sql": {}, "m/001_b.up.sql": {}},
		"not named":        {"m/1_a.sql": {}},
		"no migrations":    {"m/.keep": {}},
	} {
		want := map[string]string{"not numbered 001": "without gaps", "duplicate": "without gaps", "not named": "not named", "no migrations": "not named"}[name]
		if _, err := Load(fsys, "m"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", name, err, want)
		}
	}
}
