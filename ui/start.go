package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/stemflow/stem/internal/jsonschema"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// The start form: a page per workflow, generated from the JSON Schema of
// its input that its workers recorded in the catalog, that starts a run
// once the server has checked the input against the schema.

// startPath is the path of a workflow's start form from the mount point.
func startPath(workflow string) string {
	return "start?" + url.Values{"workflow": {workflow}}.Encode()
}

// The kinds of a start form's fields.
const (
	fieldText     = "text"
	fieldDateTime = "datetime"
	fieldInteger  = "integer"
	fieldNumber   = "number"
	fieldBool     = "bool"
	fieldSelect   = "select"
	fieldJSON     = "json"
)

// startField is one field of a start form: a property of the input, or
// the whole input.
type startField struct {
	// Name is the property's; "" for the whole input. Input is the form
	// field's name and ID is its element's.
	Name, Input, ID string
	Kind            string
	Label           string
	// Hint says what the field takes, in words; Description is the
	// schema's own.
	Hint, Description string
	Required          bool
	// Options are an enum's values (JSON texts), or a nullable bool's.
	Options []startOption
	// Min and Max bound a number field, as the browser checks it.
	Min, Max string
	// Value is what the form holds; Checked a checkbox's state.
	Value   string
	Checked bool
	// Error says what is wrong with the value, next to the field.
	Error string
	// enum is the values an enum takes, to check.
	enum []string
}

// startOption is one choice of a select field.
type startOption struct {
	Label, Value string
	Selected     bool
}

// startForm is a workflow's form: its fields, read from the schema.
type startForm struct {
	Workflow string
	Fields   []*startField
	// Whole says the input is one field (a scalar, or JSON).
	Whole bool
	// schema is the recorded schema with the keywords the validator
	// does not take (required, enum) left out; they are checked here.
	schema json.RawMessage
	// object says the input is an object of Fields.
	object bool
	// nullable says the whole input may be null.
	nullable bool
	// Error says what is wrong with the input as a whole.
	Error string
}

// startPage is the start template's data.
type startPage struct {
	Workflow string
	Version  int
	Form     *startForm
	// ID is the optional run ID as given; IDError what is wrong with it.
	ID, IDError string
	// Error says why the run was not started, for what no field names.
	Error string
	// Schema is the recorded schema, shown on demand.
	Schema   *payload
	RunsHref string
	// Action is where the form posts.
	Action string
}

// startsPage lists the workflows a run may be started of.
type startsPage struct {
	Workflows []startLink
}

// startLink is a workflow with its start form's link.
type startLink struct {
	Name, Href string
	Version    int
	Fields     int
}

// start serves start (the workflows) and start?workflow=NAME (its form).
func (h *handler) start(rq *request) error {
	if !rq.operate() {
		return readOnlyError()
	}
	ctx := rq.r.Context()
	cat, err := h.e.Catalog(ctx)
	if err != nil {
		return err
	}
	name := rq.r.URL.Query().Get("workflow")
	if name == "" {
		p := &startsPage{}
		for _, w := range cat.Workflows {
			if w.Name == runtime.BulkWorkflow {
				continue
			}
			l := startLink{Name: w.Name, Href: rq.base + startPath(w.Name), Version: w.Version}
			if f := newStartForm(w); !f.Whole {
				l.Fields = len(f.Fields)
			}
			p.Workflows = append(p.Workflows, l)
		}
		h.render(rq, http.StatusOK, "starts", &view{Title: "Start a run", Nav: "start", Page: p})
		return nil
	}
	w, err := workflowOf(cat, name)
	if err != nil {
		return err
	}
	p := h.startPage(rq, w)
	h.render(rq, http.StatusOK, "start", &view{Title: "Start " + shownPlain(name), Nav: "start", Page: p})
	return nil
}

// workflowOf finds a workflow in the catalog, or says it is not there.
func workflowOf(cat storage.Catalog, name string) (storage.WorkflowType, error) {
	i := slices.IndexFunc(cat.Workflows, func(w storage.WorkflowType) bool { return w.Name == name })
	if i < 0 || name == runtime.BulkWorkflow {
		return storage.WorkflowType{}, &httpError{status: http.StatusNotFound, title: "No such workflow",
			msg: fmt.Sprintf("No engine sharing this store serves a workflow %q, so a run of it cannot be started here. The start page lists those that are served.", shownPlain(name))}
	}
	return cat.Workflows[i], nil
}

func (h *handler) startPage(rq *request, w storage.WorkflowType) *startPage {
	return &startPage{Workflow: w.Name, Version: w.Version, Form: newStartForm(w), Schema: prettyJSON(w.InputSchema),
		RunsHref: withQuery(rq.base+"runs", url.Values{"workflow": {w.Name}}), Action: rq.base + startPath(w.Name)}
}

// startRun starts a run from the form: every field is checked against
// the recorded schema first, and a value that does not fit is refused
// next to its field, the form showing the values as given.
func (h *handler) startRun(rq *request) error {
	rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, maxActionBody)
	if err := h.checkPost(rq); err != nil {
		return err
	}
	ctx := rq.r.Context()
	form := rq.r.PostForm
	name := rq.r.URL.Query().Get("workflow")
	cat, err := h.e.Catalog(ctx)
	if err != nil {
		return err
	}
	w, err := workflowOf(cat, name)
	if err != nil {
		return err
	}
	p := h.startPage(rq, w)
	p.ID = strings.TrimSpace(form.Get("id"))
	input, ok := p.Form.read(form)
	if p.ID != "" {
		if err := storage.CheckRunID(p.ID); err != nil {
			p.IDError = inWords(err)
			ok = false
		} else if _, err := h.e.Get(ctx, p.ID); err == nil {
			p.IDError = fmt.Sprintf("A run with the ID %s exists already: choose another, or leave the ID empty for a new one.", shownPlain(p.ID))
			ok = false
		} else if !errors.Is(err, runtime.ErrRunNotFound) {
			return err
		}
	}
	if ok {
		info, err := h.e.StartJSON(ctx, w.Name, p.ID, input)
		if err == nil {
			h.log.Info("ui: start", "workflow", w.Name, "run", info.ID)
			msg := fmt.Sprintf("Started a run of %s.", shownPlain(w.Name))
			loc := withQuery(rq.base+runPath(info.ID, ""), url.Values{"flash": {h.flashToken(info.ID, flash{Kind: "ok", Message: msg})}})
			redirect(rq.w, loc, http.StatusSeeOther)
			return nil
		}
		if s, _ := errorStatus(err); s >= 500 {
			return err
		}
		p.Error = "The run was not started: " + inWords(err)
	}
	h.render(rq, http.StatusUnprocessableEntity, "start", &view{Title: "Start " + shownPlain(name), Nav: "start", Page: p})
	return nil
}

// newStartForm reads a workflow's input schema into a form: a field per
// property of an object, one field for a string, number or bool, and a
// JSON field for anything else (or no schema).
func newStartForm(w storage.WorkflowType) *startForm {
	f := &startForm{Workflow: w.Name}
	whole := func() *startForm {
		f.Whole, f.object = true, false
		f.Fields = []*startField{{Input: "input", ID: "field-input", Kind: fieldJSON, Label: "Input (JSON)", Required: true,
			Hint: "The whole input, as JSON."}}
		return f
	}
	if len(w.InputSchema) == 0 {
		return whole()
	}
	root, err := decodeSchema(w.InputSchema)
	if err != nil {
		return whole()
	}
	stripped := stripKeywords(root)
	b, err := json.Marshal(stripped)
	if err != nil {
		return whole()
	}
	f.schema = b
	node, _ := root.(map[string]any)
	node = resolveRef(root, node)
	types, nullable := schemaTypes(node)
	f.nullable = nullable
	switch {
	case len(types) == 1 && types[0] == "object" && node["properties"] != nil:
		props, _ := node["properties"].(map[string]any)
		required := stringList(node["required"])
		for _, name := range propertyOrder(w.InputSchema, props) {
			ps, _ := props[name].(map[string]any)
			fd := fieldOf(resolveRef(root, ps))
			fd.Name, fd.Input, fd.ID, fd.Label = name, "in."+name, "field-"+fieldID(name), name
			fd.Required = slices.Contains(required, name)
			f.Fields = append(f.Fields, fd)
		}
		f.object = true
		return f
	case len(types) == 1 && types[0] != "object" && types[0] != "array":
		fd := fieldOf(node)
		if fd.Kind == fieldJSON {
			return whole()
		}
		fd.Input, fd.ID, fd.Label, fd.Required = "input", "field-input", "Input", !nullable && fd.Kind != fieldBool
		f.Fields, f.Whole = []*startField{fd}, true
		return f
	}
	whole()
	f.Fields[0].Hint = "The whole input, as JSON: " + typeWords(node) + "."
	return f
}

// fieldOf is the field for a property's schema s.
func fieldOf(s map[string]any) *startField {
	fd := &startField{Kind: fieldJSON}
	if d, ok := s["description"].(string); ok {
		fd.Description = d
	}
	types, nullable := schemaTypes(s)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		fd.Kind = fieldSelect
		for _, v := range enum {
			b, _ := json.Marshal(v)
			label := string(b)
			if s, ok := v.(string); ok {
				label = s
			}
			fd.enum = append(fd.enum, string(b))
			fd.Options = append(fd.Options, startOption{Label: label, Value: string(b)})
		}
		fd.Hint = "One of the choices."
		return fd
	}
	if len(types) != 1 {
		fd.Hint = "JSON: " + typeWords(s) + "."
		return fd
	}
	switch types[0] {
	case "string":
		switch {
		case s["format"] == "date-time":
			fd.Kind, fd.Hint = fieldDateTime, "A time in RFC 3339: 2026-11-28T10:00:00Z."
		case s["contentEncoding"] != nil:
			fd.Hint = "JSON: " + typeWords(s) + "."
		default:
			fd.Kind, fd.Hint = fieldText, "Text."
		}
	case "integer":
		fd.Kind, fd.Hint = fieldInteger, "A whole number"
		fd.Min, fd.Max = bound(s["minimum"]), bound(s["maximum"])
		if fd.Min != "" && fd.Max != "" {
			fd.Hint += " from " + fd.Min + " to " + fd.Max
		}
		fd.Hint += "."
	case "number":
		fd.Kind, fd.Hint = fieldNumber, "A number."
	case "boolean":
		fd.Kind, fd.Hint = fieldBool, "Yes when ticked."
		if nullable {
			fd.Kind, fd.Hint = fieldSelect, "Yes, no, or none."
			fd.Options = []startOption{{Label: "true", Value: "true"}, {Label: "false", Value: "false"}}
			fd.enum = []string{"true", "false"}
		}
	default:
		fd.Hint = "JSON: " + typeWords(s) + "."
	}
	if nullable && fd.Kind != fieldJSON && fd.Kind != fieldSelect {
		fd.Hint += " Empty for none (null)."
	}
	return fd
}

// bound is a minimum or maximum as a number input's attribute, "" when
// it is not one a browser's number reads exactly.
func bound(v any) string {
	n, ok := v.(json.Number)
	if !ok {
		return ""
	}
	f, err := n.Float64()
	if err != nil || math.Abs(f) > 1<<53 {
		return ""
	}
	return n.String()
}

// fieldID is a property's name as part of an element ID: its letters
// and digits, the rest as their code, so two names never make one ID.
func fieldID(name string) string {
	var b strings.Builder
	for _, r := range name {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "_%x_", r)
		}
	}
	return b.String()
}

// read reads the form's values into the input's JSON, checking each
// against the schema; ok is false when any is refused, each field then
// holding its error.
func (f *startForm) read(form url.Values) (json.RawMessage, bool) {
	ok := true
	values := map[string]json.RawMessage{}
	for _, fd := range f.Fields {
		raw, present, err := fd.read(form)
		if err != "" {
			fd.Error, ok = err, false
			continue
		}
		if present {
			values[fd.Name] = raw
		} else if fd.Required {
			fd.Error, ok = "Required.", false
		}
	}
	if !ok {
		return nil, false
	}
	var doc json.RawMessage
	switch {
	case f.object:
		b, err := json.Marshal(values)
		if err != nil {
			f.Fields[0].Error = err.Error()
			return nil, false
		}
		doc = b
	default:
		doc = values[""]
		if doc == nil {
			doc = json.RawMessage("null")
		}
	}
	if f.schema == nil {
		return doc, true
	}
	err := jsonschema.Validate(f.schema, doc)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		// A schema this dashboard cannot read is the engine's to check.
		return doc, true
	}
	for _, pr := range ve.Problems {
		fd := f.fieldAt(pr.Path)
		msg := pr.Message
		if fd == nil {
			if f.Error == "" {
				f.Error = "The input is refused: " + pr.String() + "."
			}
			continue
		}
		if rest := strings.TrimPrefix(pr.Path, fd.path()); rest != "" {
			msg = "at " + rest + ": " + msg
		}
		if fd.Error == "" {
			fd.Error = strings.ToUpper(msg[:1]) + msg[1:] + "."
		}
	}
	return nil, false
}

// read reads the field's value: its JSON, whether the input holds it,
// and what is wrong with it, in words.
func (fd *startField) read(form url.Values) (json.RawMessage, bool, string) {
	v := form.Get(fd.Input)
	fd.Value = v
	t := strings.TrimSpace(v)
	switch fd.Kind {
	case fieldBool:
		fd.Checked = v != ""
		if fd.Checked {
			return json.RawMessage("true"), true, ""
		}
		return json.RawMessage("false"), true, ""
	case fieldText, fieldDateTime:
		if v == "" {
			return nil, false, ""
		}
		b, _ := json.Marshal(v)
		return b, true, ""
	case fieldInteger, fieldNumber:
		if t == "" {
			return nil, false, ""
		}
		if !isJSONNumber(t) {
			return nil, false, fmt.Sprintf("%q is not a number.", t)
		}
		return json.RawMessage(t), true, ""
	case fieldSelect:
		for i := range fd.Options {
			fd.Options[i].Selected = fd.Options[i].Value == v
		}
		if v == "" {
			return nil, false, ""
		}
		if !slices.Contains(fd.enum, v) {
			return nil, false, fmt.Sprintf("%s is not one of the choices.", v)
		}
		return json.RawMessage(v), true, ""
	}
	if t == "" {
		return nil, false, ""
	}
	var x any
	if err := json.Unmarshal([]byte(t), &x); err != nil {
		return nil, false, fmt.Sprintf("Not JSON: %v.", err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(t)); err != nil {
		return nil, false, fmt.Sprintf("Not JSON: %v.", err)
	}
	return b.Bytes(), true, ""
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// path is where the field's value is in the input, as the validator
// names it.
func (fd *startField) path() string {
	if fd.Name == "" {
		return "$"
	}
	if isIdent(fd.Name) {
		return "$." + fd.Name
	}
	b, _ := json.Marshal(fd.Name)
	return "$[" + string(b) + "]"
}

// fieldAt is the field a problem's path is in, nil for the input as a
// whole (of an object).
func (f *startForm) fieldAt(path string) *startField {
	for _, fd := range f.Fields {
		p := fd.path()
		if fd.Name == "" && !f.object {
			return fd
		}
		if path == p || strings.HasPrefix(path, p) && (path[len(p)] == '.' || path[len(p)] == '[') {
			return fd
		}
	}
	return nil
}

// isIdent reports whether the validator writes a member's path .name
// (else ["name"]).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// decodeSchema reads a schema with its numbers as written.
func decodeSchema(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// stripKeywords is a schema without required and enum, which this
// dashboard checks itself for a form's fields, and the validator does
// not take.
func stripKeywords(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "required", "enum":
		case "properties", "$defs":
			sub, _ := v.(map[string]any)
			c := make(map[string]any, len(sub))
			for name, ps := range sub {
				c[name] = stripKeywords(ps)
			}
			out[k] = c
		case "additionalProperties", "items", "propertyNames", "contentSchema":
			out[k] = stripKeywords(v)
		case "anyOf":
			list, _ := v.([]any)
			c := make([]any, len(list))
			for i, b := range list {
				c[i] = stripKeywords(b)
			}
			out[k] = c
		default:
			out[k] = v
		}
	}
	return out
}

// resolveRef follows s's $ref to the root's $defs, once; s otherwise.
func resolveRef(root any, s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	r, _ := root.(map[string]any)
	if ref == "#" {
		return r
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return s
	}
	defs, _ := r["$defs"].(map[string]any)
	if d, ok := defs[name].(map[string]any); ok {
		return d
	}
	return s
}

// schemaTypes is a schema's types without null, and whether null is one
// of them; none when the schema says nothing of its type (anyOf, {}).
func schemaTypes(s map[string]any) (types []string, nullable bool) {
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if n, ok := x.(string); ok {
				types = append(types, n)
			}
		}
	}
	if branches, ok := s["anyOf"].([]any); ok && len(types) == 0 {
		var rest []map[string]any
		for _, b := range branches {
			bm, _ := b.(map[string]any)
			if bm["type"] == "null" && len(bm) == 1 {
				nullable = true
				continue
			}
			rest = append(rest, bm)
		}
		if nullable && len(rest) == 1 {
			t, _ := schemaTypes(rest[0])
			return t, true
		}
		return nil, nullable
	}
	out := types[:0:0]
	for _, t := range types {
		if t == "null" {
			nullable = true
		} else {
			out = append(out, t)
		}
	}
	return out, nullable
}

// typeWords says what a schema takes, briefly: "an array", "an object or
// null", "any JSON value".
func typeWords(s map[string]any) string {
	types, nullable := schemaTypes(s)
	if len(types) == 0 {
		if _, ok := s["anyOf"]; ok {
			return "one of several shapes (see the schema)"
		}
		return "any JSON value"
	}
	words := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "array":
			words[i] = "an array"
			if items, ok := s["items"].(map[string]any); ok {
				if it, _ := schemaTypes(items); len(it) == 1 {
					words[i] += " of " + it[0] + "s"
				}
			}
		case "object":
			words[i] = "an object"
		case "integer":
			words[i] = "an integer"
		default:
			words[i] = "a " + t
		}
	}
	if nullable {
		words = append(words, "null")
	}
	return strings.Join(words, " or ")
}

// stringList is a JSON array of strings.
func stringList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// propertyOrder is the order of the root object's properties as the
// schema writes them, else (a root that refers to its $defs) by name.
func propertyOrder(raw json.RawMessage, props map[string]any) []string {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	var top struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &top) != nil || len(top.Properties) == 0 {
		return names
	}
	d := json.NewDecoder(bytes.NewReader(top.Properties))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return names
	}
	var order []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return names
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return names
		}
		if _, ok := props[k]; ok && !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	if len(order) != len(names) {
		return names
	}
	return order
}
