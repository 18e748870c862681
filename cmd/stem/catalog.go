package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
)

func catalog(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, _ []string) error {
		e, err := c.open()
		if err != nil {
			return err
		}
		cat, err := e.Catalog(c.ctx)
		if err != nil {
			return err
		}
		if c.out.json {
			return c.out.encode(jsonCatalogOf(cat))
		}
		w := c.out.w
		ups, events := cat.Updates()
		if len(cat.Workflows) == 0 && len(cat.Events) == 0 {
			_, err := fmt.Fprintln(w, "no workflows or event topics recorded (a worker records those it registers when it runs)")
			return err
		}
		fmt.Fprintln(w, "workflows")
		if len(cat.Workflows) == 0 {
			fmt.Fprintln(w, "  none recorded")
		}
		for _, wf := range cat.Workflows {
			fmt.Fprintf(w, "  %s  version %d  (worker %s, %s)\n", wf.Name, wf.Version, wf.Worker, stamp(wf.UpdatedAt))
			fmt.Fprintf(w, "    input   %s\n", schema(wf.InputSchema))
			fmt.Fprintf(w, "    output  %s\n", schema(wf.OutputSchema))
		}
		fmt.Fprintln(w, "\nevent topics")
		if len(events) == 0 {
			fmt.Fprintln(w, "  none recorded")
		}
		for _, ev := range events {
			fmt.Fprintf(w, "  %s  (worker %s, %s)\n", ev.Topic, ev.Worker, stamp(ev.UpdatedAt))
			fmt.Fprintf(w, "    payload  %s\n", schema(ev.PayloadSchema))
		}
		if len(ups) > 0 {
			fmt.Fprintln(w, "\nupdates (stem update)")
		}
		for _, u := range ups {
			validator := ""
			if u.Schema.Validator {
				validator = "  has a validator: stem update sends it only with --unvalidated"
			}
			fmt.Fprintf(w, "  %s  (worker %s, %s)%s\n", u.Name, u.Worker, stamp(u.UpdatedAt), validator)
			fmt.Fprintf(w, "    request  %s\n", schema(u.Schema.Request))
			fmt.Fprintf(w, "    reply    %s\n", schema(u.Schema.Reply))
		}
		return nil
	}
}

// schema shows a JSON Schema on one line, briefly: {name string, tags
// []string} for an object, the type for the rest.
func schema(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(no schema: not checked)"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return truncate(string(raw), 120)
	}
	return truncate(brief(v, 0), 120)
}

func brief(v any, depth int) string {
	m, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(v)
		return string(b)
	}
	if ref, ok := m["$ref"].(string); ok {
		return ref[strings.LastIndexByte(ref, '/')+1:]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok {
			parts := make([]string, len(alts))
			for i, a := range alts {
				parts[i] = brief(a, depth)
			}
			return strings.Join(parts, " | ")
		}
	}
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	parts := make([]string, 0, len(types))
	for _, t := range types {
		switch {
		case t == "object" && depth < 2:
			props, _ := m["properties"].(map[string]any)
			keys := make([]string, 0, len(props))
			for k := range props {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			fields := make([]string, len(keys))
			for i, k := range keys {
				fields[i] = k + " " + brief(props[k], depth+1)
			}
			if extra, ok := m["additionalProperties"].(map[string]any); ok && len(keys) == 0 {
				parts = append(parts, "{string: "+brief(extra, depth+1)+"}")
				continue
			}
			parts = append(parts, "{"+strings.Join(fields, ", ")+"}")
		case t == "array" && m["items"] != nil:
			parts = append(parts, "[]"+brief(m["items"], depth+1))
		default:
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		if _, ok := m["enum"]; ok {
			b, _ := json.Marshal(m["enum"])
			return "one of " + string(b)
		}
		return "any"
	}
	return strings.Join(parts, " | ")
}
