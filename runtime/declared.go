package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/stemflow/stem/storage"
)

// Declared errors keep their identity through a store. A package declares
// its error values and types once, under durable names (//stem:error in
// annotated packages, which the generated code turns into calls of
// DeclareError and DeclareErrorType in an init function). A failure whose
// chain holds one is recorded with its name, and a type's exported fields
// as JSON; the error read back (in the workflow, from Result, in another
// process, after a replay or a hand-over) matches it with errors.Is and
// errors.As. Undeclared errors keep only their text, as a *StepError.
//
// The names, not Go identifiers, are what a store holds: renaming the Go
// variable or type is safe, renaming the name is not while runs in flight
// recorded it (they then read back as text only).

var declared = struct {
	sync.RWMutex
	byName  map[string]*errorDecl
	byValue map[error]*errorDecl
	byType  map[reflect.Type]*errorDecl
}{byName: map[string]*errorDecl{}, byValue: map[error]*errorDecl{}, byType: map[reflect.Type]*errorDecl{}}

// errorDecl is one declared error: a sentinel value or a type.
type errorDecl struct {
	name     string
	sentinel error
	typ      reflect.Type
}

func (d *errorDecl) String() string {
	if d.sentinel != nil {
		return fmt.Sprintf("the error value %q (%T)", d.sentinel.Error(), d.sentinel)
	}
	return "the error type " + d.typ.String()
}

// DeclareError declares sentinel, an error value compared with ==, under
// the durable name: a failure whose chain holds it (errors.Is) is recorded
// with the name, and matches sentinel with errors.Is wherever it is read
// back. Call it from an init function (generated code does, for
// //stem:error on a variable). It panics when the name is malformed,
// sentinel is nil or not comparable, or the name or the value is already
// declared as something else: two packages cannot share a name.
func DeclareError(name string, sentinel error) {
	if sentinel == nil {
		panic(fmt.Sprintf("stem: DeclareError(%q): the error value is nil (declare it after it is assigned)", name))
	}
	if !reflect.TypeOf(sentinel).Comparable() {
		panic(fmt.Sprintf("stem: DeclareError(%q): %T is not comparable, so errors.Is cannot match it; declare its type with DeclareErrorType", name, sentinel))
	}
	declare(&errorDecl{name: name, sentinel: sentinel})
}

// DeclareErrorType declares the error type E under the durable name: a
// failure whose chain holds an E (errors.As) is recorded with the name and
// E's exported fields as JSON, and matches errors.As with a *E target
// wherever it is read back, with those fields decoded into a new E. E is
// the type that implements error: a pointer to a struct for methods with
// pointer receivers, the struct itself for value receivers. Call it from
// an init function (generated code does, for //stem:error on a type). It
// panics when the name is malformed, E is an interface, or the name or the
// type is already declared as something else.
func DeclareErrorType[E error](name string) {
	t := reflect.TypeFor[E]()
	if t.Kind() == reflect.Interface {
		panic(fmt.Sprintf("stem: DeclareErrorType(%q): %s is an interface; declare the concrete type that implements error", name, t))
	}
	declare(&errorDecl{name: name, typ: t})
}

func declare(d *errorDecl) {
	if err := checkErrorName(d.name); err != "" {
		panic(fmt.Sprintf("stem: declaring %s: %s", d, err))
	}
	declared.Lock()
	defer declared.Unlock()
	prev, taken := declared.byName[d.name]
	if taken && prev.sentinel == d.sentinel && prev.typ == d.typ {
		return // the same declaration again
	}
	if taken {
		panic(fmt.Sprintf("stem: error name %q is declared twice: for %s and for %s; give each its own name", d.name, prev, d))
	}
	if d.sentinel != nil {
		if prev, ok := declared.byValue[d.sentinel]; ok {
			panic(fmt.Sprintf("stem: %s is declared twice: as %q and as %q", d, prev.name, d.name))
		}
		declared.byValue[d.sentinel] = d
	} else {
		if prev, ok := declared.byType[d.typ]; ok {
			panic(fmt.Sprintf("stem: %s is declared twice: as %q and as %q", d, prev.name, d.name))
		}
		declared.byType[d.typ] = d
	}
	declared.byName[d.name] = d
}

// checkErrorName returns why name cannot be an error's durable name, or "".
func checkErrorName(name string) string {
	if err := storage.CheckErrorName(name); err != nil {
		return err.Error()
	}
	return ""
}

// errorDetail is ErrorInfo.Detail as the runtime writes it.
type errorDetail struct {
	// Errors are the declared errors the failure matched, outermost first.
	Errors []declaredRecord `json:"errors,omitempty"`
	// Permanent: the failure was wrapped with Permanent, recorded here when
	// the code holds a sentinel's instead.
	Permanent bool `json:"permanent,omitempty"`
}

// declaredRecord is one declared error a failure matched.
type declaredRecord struct {
	Name string `json:"name"`
	// Fields are a declared type's fields as JSON; none for a value.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// maxDeclaredRecords bounds how many declared errors one failure records.
const maxDeclaredRecords = 16

// declaredIn walks err's chain, as errors.Is does, and records the
// declared errors in it. A *StepError on the way contributes the records
// it was read back with, so a failure passed on keeps its identity, names
// this process does not know included.
func declaredIn(err error) []declaredRecord {
	var out []declaredRecord
	seen := map[string]bool{}
	add := func(r declaredRecord) {
		k := r.Name + "\x00" + string(r.Fields)
		if len(out) < maxDeclaredRecords && !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	declared.RLock()
	defer declared.RUnlock()
	var visit func(error) bool
	visit = func(err error) bool {
		if se, ok := err.(*StepError); ok {
			// Its records stand for the values it unwraps to.
			for _, r := range se.records {
				add(r)
			}
			walkChain(codeSentinels[se.Code], visit)
			return false
		}
		t := reflect.TypeOf(err)
		if t.Comparable() {
			if d, ok := declared.byValue[err]; ok {
				add(declaredRecord{Name: d.name})
			}
		}
		if d, ok := declared.byType[t]; ok {
			if fields, jerr := json.Marshal(err); jerr == nil {
				add(declaredRecord{Name: d.name, Fields: fields})
			}
		}
		return true
	}
	walkChain(err, visit)
	return out
}

// encodeDetail returns the Detail of a failure with the declared errors
// records and the permanent mark, or "" when there is nothing to add to
// the code.
func encodeDetail(records []declaredRecord, permanent bool, code string) string {
	d := errorDetail{Errors: records, Permanent: permanent && code != storage.CodePermanent}
	if len(d.Errors) == 0 && !d.Permanent {
		return ""
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeDetail reads a Detail back: the records, the permanent mark, and
// the errors this process has declared under the records' names, rebuilt.
// A detail that is not the runtime's JSON, a name not declared here and
// fields that no longer decode into the declared type add nothing: the
// error then matches by its text and code only.
func decodeDetail(s string) (records []declaredRecord, permanent bool, values []error) {
	if s == "" {
		return nil, false, nil
	}
	var d errorDetail
	if json.Unmarshal([]byte(s), &d) != nil {
		return nil, false, nil
	}
	declared.RLock()
	defer declared.RUnlock()
	for _, r := range d.Errors {
		decl := declared.byName[r.Name]
		switch {
		case decl == nil:
		case decl.sentinel != nil:
			values = append(values, decl.sentinel)
		default:
			if v, ok := rebuild(decl.typ, r.Fields); ok {
				values = append(values, v)
			}
		}
	}
	return d.Errors, d.Permanent, values
}

// rebuild decodes a declared type's fields into a new value of it.
func rebuild(t reflect.Type, fields json.RawMessage) (error, bool) {
	if len(fields) == 0 {
		fields = json.RawMessage("null")
	}
	if t.Kind() == reflect.Pointer {
		v := reflect.New(t.Elem())
		if json.Unmarshal(fields, v.Interface()) != nil {
			return nil, false
		}
		e, ok := v.Interface().(error)
		return e, ok
	}
	v := reflect.New(t)
	if json.Unmarshal(fields, v.Interface()) != nil {
		return nil, false
	}
	e, ok := v.Elem().Interface().(error)
	return e, ok
}

// DeclaredErrorName returns the durable name the outermost declared error
// in err's chain is recorded under, and whether there is one: what a
// store records for it, and what `stem show` prints beside the text.
func DeclaredErrorName(err error) (string, bool) {
	if rs := declaredIn(err); len(rs) > 0 {
		return rs[0].Name, true
	}
	return "", false
}
