package stemotel

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/storage"
)

func TestStepName(t *testing.T) {
	for key, want := range map[string]string{
		"pack@v1#0":   "pack@v1",
		"pack@v1#12":  "pack@v1",
		"pack@v1":     "pack@v1",
		"pack@v1#":    "pack@v1#",
		"pack#x":      "pack#x",
		"#3":          "#3",
		"a#1#2":       "a#1",
		"charge@v2#7": "charge@v2",
	} {
		if got := stepName(key); got != want {
			t.Errorf("stepName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestMergeHeaders(t *testing.T) {
	own := map[string]string{"tenant": "acme", "traceparent": "old"}
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	h, dropped := mergeHeaders(own, map[string]string{"traceparent": tp, "baggage": "k=v"})
	if len(dropped) != 0 || !maps.Equal(h, map[string]string{"tenant": "acme", "traceparent": tp, "baggage": "k=v"}) {
		t.Errorf("merged %v, dropped %v", h, dropped)
	}
	if own["traceparent"] != "old" {
		t.Error("the run's own headers were changed")
	}

	// A baggage too large to store beside the rest is left out, the
	// trace context kept.
	big := "k=" + strings.Repeat("v", storage.MaxHeadersBytes)
	h, dropped = mergeHeaders(own, map[string]string{"traceparent": tp, "baggage": big})
	if !slices.Equal(dropped, []string{"baggage"}) || !maps.Equal(h, map[string]string{"tenant": "acme", "traceparent": tp}) {
		t.Errorf("merged %v, dropped %v", h, dropped)
	}

	// Nothing fits beside sixteen headers of the run's own.
	full := map[string]string{}
	for i := range storage.MaxHeaders {
		full[string(rune('a'+i))] = "x"
	}
	h, dropped = mergeHeaders(full, map[string]string{"traceparent": tp})
	if !slices.Equal(dropped, []string{"traceparent"}) || !maps.Equal(h, full) {
		t.Errorf("merged %v, dropped %v", h, dropped)
	}
}
