package jsonschema

import (
	"encoding/json"
	"fmt"
	"time"
)

// Types shared by the tests.

// level implements encoding.TextUnmarshaler (and TextMarshaler, so that
// json.Marshal writes a string); it accepts any text.
type level struct{ name string }

func (l level) MarshalText() ([]byte, error)  { return []byte(l.name), nil }
func (l *level) UnmarshalText(b []byte) error { l.name = string(b); return nil }

// opaque implements json.Unmarshaler and accepts any JSON value.
type opaque struct{ raw json.RawMessage }

func (o opaque) MarshalJSON() ([]byte, error) {
	if o.raw == nil {
		return []byte("null"), nil
	}
	return o.raw, nil
}
func (o *opaque) UnmarshalJSON(b []byte) error {
	o.raw = append(json.RawMessage(nil), b...)
	return nil
}

type item struct {
	SKU   string  `json:"sku"`
	Qty   uint8   `json:"qty"`
	Price float64 `json:"price,omitempty"`
}

type base struct {
	ID      int64     `json:"id"`
	Created time.Time `json:"created"`
}

type note struct {
	Note string
}

type Shipping struct {
	Tracking string
	Carrier  *string `json:"carrier,omitempty"`
}

// order exercises most of what For supports.
type order struct {
	base
	note
	*Shipping
	Items      []item             `json:"items"`
	Tags       map[string]string  `json:"tags,omitempty"`
	Counts     map[int8]uint16    `json:"counts"`
	ByLevel    map[level]int      `json:"by_level"`
	Fixed      [3]int16           `json:"fixed"`
	Blob       []byte             `json:"blob"`
	Pair       [2]byte            `json:"pair"`
	Ptr        *int32             `json:"ptr"`
	PtrPtr     **string           `json:"ptrptr"`
	Any        any                `json:"any"`
	Raw        json.RawMessage    `json:"raw"`
	Opaque     opaque             `json:"opaque"`
	Num        json.Number        `json:"num"`
	Quoted     int                `json:"quoted,string"`
	QuotedPtr  *float32           `json:"qp,string"`
	QuotedStr  string             `json:"qs,string"`
	QuotedBool bool               `json:",string"`
	Skip       func()             `json:"-"`
	Dash       int                `json:"-,"`
	When       *time.Time         `json:"when,omitzero"`
	Level      level              `json:"level"`
	Dur        time.Duration      `json:"dur"`
	F32        float32            `json:"f32"`
	U          uint               `json:"u"`
	Stringer   fmt.Stringer       `json:"stringer"`
	Tree       *tree              `json:"tree"`
	Nested     struct{ A []bool } `json:"nested"`
	Matrix     [][2]uint64        `json:"matrix"`
	unexported chan int
}

type tree struct {
	Val  int     `json:"val"`
	Kids []*tree `json:"kids"`
}

// forest is recursive through a named slice.
type forest []forest

// Mutually recursive types.
type ping struct{ Pong *pong }
type pong struct{ Ping []ping }
