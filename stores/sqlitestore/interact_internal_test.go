package sqlitestore

import (
	"strings"
	"testing"
)

// Every statement of updates and streams reads its run by ID and then the
// run's rows by an index that leads with the run: none scans a table or
// sorts ("USE TEMP B-TREE"). ReadStream's values are one range of
// stream_values' key from the offset asked, ListUpdates' one range of
// updates_seq, and a new update's seq is read from updates_seq's last
// entry of the run. Deleting a run's updates and streams seeks them by
// run.
func TestInteractPlans(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"send update", sendUpdateQuery, []string{"SEARCH u USING INDEX sqlite_autoindex_updates_1 (run_ref=? AND id=?)"}},
		{"insert update", insertUpdate, []string{"USING COVERING INDEX updates_seq (run_ref=?)"}},
		{"reply", replyUpdate, []string{"(run_ref=? AND id=?)"}},
		{"has update", hasUpdate, []string{"(run_ref=? AND id=?)"}},
		{"get update", getUpdateQuery, []string{"SEARCH u USING INDEX sqlite_autoindex_updates_1 (run_ref=? AND id=?)"}},
		{"list updates", listUpdatesQuery, []string{"SEARCH u USING INDEX updates_seq (run_ref=? AND seq>?)"}},
		{"read stream", readStreamQuery, []string{
			"SEARCH s USING PRIMARY KEY (run_ref=? AND name=?)",
			"SEARCH v USING PRIMARY KEY (run_ref=? AND stream=? AND position>? AND position<?)",
		}},
		{"unbuffer updates", unbufferUpdates, []string{"SEARCH events USING COVERING INDEX events_run_topic (run_ref=? AND topic>? AND topic<?)"}},
		{"rebuffer updates", rebufferUpdates, []string{
			"SEARCH u USING INDEX updates_seq (run_ref=?)",
			"SEARCH c USING INDEX sqlite_autoindex_checkpoints_1 (run_ref=? AND execution=?)",
		}},
		{"list streams", listStreamsQuery, []string{"SEARCH s USING PRIMARY KEY (run_ref=?)"}},
		{"delete updates", `DELETE FROM updates WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"SEARCH updates USING"}},
		{"delete streams", `DELETE FROM streams WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"SEARCH streams USING PRIMARY KEY (run_ref=?)"}},
		{"delete values", `DELETE FROM stream_values WHERE run_ref IN (SELECT value FROM json_each(?1))`, []string{"SEARCH stream_values USING PRIMARY KEY (run_ref=?)"}},
	} {
		plan := queryPlan(t, s, c.query, nullParams(c.query)...)
		all := strings.Join(plan, "\n")
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "json_each") || strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s scans or sorts:\n%s", c.name, all)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s plan does not use %q:\n%s", c.name, w, all)
			}
		}
	}
}
