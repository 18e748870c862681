package ui_test

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// rawAttrs are the attributes that may hold a name as it is: the
// data-run-id the script and tests read, never shown.
var rawAttrs = regexp.MustCompile(`data-(run-id|key|schedule|worker)="[^"]*"`)

// Names a store holds from before the rules on names, with characters
// that do not show or reorder the text (a zero-width space, a
// right-to-left override), are shown with those characters as marked
// escapes, in the list's links, a run's heading, its parent link and its
// title, so two IDs never look the same.
func TestInvisibleCharactersAreShownEscaped(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stem.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	must(t, err)
	d := newDashOn(t, st, false)
	_, err = d.store.CreateRuns(t.Context(), []storage.NewRun{
		{ID: "ab1", Workflow: "nobody"}, {ID: "zwsp", Workflow: "nobody"}, {ID: "rlo", Workflow: "nobody"},
	})
	must(t, err)
	_, err = d.store.CreateRuns(t.Context(), []storage.NewRun{{ID: "rlo/child", Workflow: "nobody", ParentID: "rlo"}})
	must(t, err)
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	must(t, err)
	defer db.Close()
	const zwsp, rlo = "ab\u200b1", "ab\u202e1gpj.exe"
	for _, q := range []struct{ from, to string }{{"zwsp", zwsp}, {"rlo", rlo}, {"rlo/child", rlo + "/child"}} {
		_, err := db.Exec(`UPDATE runs SET id = ?, parent_id = CASE WHEN parent_id = 'rlo' THEN ? ELSE parent_id END WHERE id = ?`, q.to, rlo, q.from)
		must(t, err)
	}

	noRaw := func(res *response) {
		t.Helper()
		shown := rawAttrs.ReplaceAllString(res.body, "")
		hidden := func(r rune) bool { return storage.Invisible(r) && r != '\n' && r != '\t' && r != '\r' }
		if i := strings.IndexFunc(shown, hidden); i >= 0 {
			t.Errorf("%s shows %q raw: %s", res.req.URL, []rune(shown[i:])[0], shown[max(0, i-80):min(len(shown), i+80)])
		}
	}
	list := d.get("/runs").want(t, http.StatusOK)
	noRaw(list)
	list.contains(t, `>ab1</a>`,
		`>ab<span class="esc" title="U+200B, a character that does not show">\u200B</span>1</a>`,
		`>ab<span class="esc" title="U+202E, a character that does not show">\u202E</span>1gpj.exe</a>`)

	page := d.get("/"+runPath(rlo)).want(t, http.StatusOK)
	noRaw(page)
	page.contains(t, `<title>Run ab\u202E1gpj.exe · Stem</title>`,
		`<span class="mono run-id">ab<span class="esc" title="U+202E, a character that does not show">\u202E</span>1gpj.exe</span>`)
	child := d.get("/"+runPath(rlo+"/child")).want(t, http.StatusOK)
	noRaw(child)
	child.contains(t, `>ab<span class="esc" title="U+202E, a character that does not show">\u202E</span>1gpj.exe</a>`)
}
