package sqlitestore

import (
	"regexp"
	"strconv"
	"testing"
)

// nullParams binds every numbered parameter of query (?1, ?2, …) to NULL,
// as many as the store binds, for EXPLAIN.
func nullParams(query string) []any {
	var args []any
	for _, m := range regexp.MustCompile(`\?([0-9]+)`).FindAllStringSubmatch(query, -1) {
		if i, _ := strconv.Atoi(m[1]); i > len(args) {
			args = append(args, make([]any, i-len(args))...)
		}
	}
	return args
}

// queryPlan returns the lines of SQLite's plan for query, with args bound.
func queryPlan(t testing.TB, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return plan
}
