package runtime

import "testing"

// A select's checkpoint is the bare index when no loser held its event,
// as it always was, and JSON naming the losers that did otherwise; a
// replay with fewer cases, or a malformed checkpoint, is refused.
func TestSelectCheckpoint(t *testing.T) {
	for _, o := range []selectOutcome{{Case: 2}, {Case: 0, Held: []int{1, 3}}} {
		got, err := decodeSelect(o.encode(), 4)
		if err != nil || got.Case != o.Case || len(got.Held) != len(o.Held) {
			t.Fatalf("%+v encoded as %s decodes as %+v, %v", o, o.encode(), got, err)
		}
	}
	if s := string(selectOutcome{Case: 2}.encode()); s != "2" {
		t.Fatalf("a select without held losers is stored as %q, want the bare index", s)
	}
	for _, bad := range []string{"4", "-1", "x", `{"case":1,"held":[1]}`, `{"case":1,"held":[4]}`, `{"case":5}`} {
		if o, err := decodeSelect([]byte(bad), 4); err == nil {
			t.Errorf("checkpoint %s of a 4-case select decodes as %+v, want an error", bad, o)
		}
	}
}
