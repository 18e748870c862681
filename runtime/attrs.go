package runtime

import (
	"context"

	"github.com/stemflow/stem/storage"
)

// Attr is one search attribute of a run: a name and a typed value (see
// storage.Attr). Build one with StringAttr, NumberAttr, TimeAttr or
// BoolAttr.
type Attr = storage.Attr

// AttrType is the type of a search attribute: string, number, time or bool.
type AttrType = storage.AttrType

// AttrDecl is a search attribute as a workflow declares it (its
// annotation's //stem:attr): a name, a type, and the input's field it is
// taken from at the start, if any.
type AttrDecl = storage.AttrDecl

// AttrFilter keeps the runs whose attribute compares to a value: see
// storage.AttrFilter and ParseAttrFilter.
type AttrFilter = storage.AttrFilter

// The attribute types.
const (
	AttrString = storage.AttrString
	AttrNumber = storage.AttrNumber
	AttrTime   = storage.AttrTime
	AttrBool   = storage.AttrBool
)

// The attribute builders.
var (
	StringAttr = storage.StringAttr
	NumberAttr = storage.NumberAttr
	TimeAttr   = storage.TimeAttr
	BoolAttr   = storage.BoolAttr
)

// WorkflowAttributes declares the workflow's search attributes (its
// //stem:attr annotations). Those with a From are taken from each run's
// input at its start, by whatever starts it; the others the workflow sets
// with SetAttributes. The engine records them in the store's catalog, so
// tools read filters in each attribute's type.
func WorkflowAttributes(decls ...AttrDecl) RegisterOption {
	return func(d *workflowDef) { d.attrs = append(d.attrs, decls...) }
}

// WithAttributes sets search attributes of the run at its start, over
// those its workflow takes from its input.
func WithAttributes(attrs ...Attr) StartOption {
	return func(o *startOptions) { o.attrs = append(o.attrs, attrs...) }
}

// SetAttributes sets search attributes of the run, durably: they are
// written with a checkpoint of the run (kind KindAttr), so a replay does
// not set them again, and filters see them from then on. A name set again
// takes the new value.
func SetAttributes(c *WorkflowContext, attrs ...Attr) error {
	return invalidArg("SetAttributes is not built yet")
}

// AttrTypes returns the declared type of every search attribute the
// catalog records, by name, for reading filters (ParseWhere).
func (e *Engine) AttrTypes(ctx context.Context) (map[string]AttrType, error) {
	return nil, invalidArg("AttrTypes is not built yet")
}

// ParseWhere reads filters written name op value (customer=C-7,
// total>=100, order^=88), each value in its attribute's declared type.
func (e *Engine) ParseWhere(ctx context.Context, texts []string) ([]AttrFilter, error) {
	return nil, invalidArg("ParseWhere is not built yet")
}
