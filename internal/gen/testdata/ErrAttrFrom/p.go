package p

import (
	"encoding/json"
	"time"
)

// Money encodes itself.
type Money struct{ Cents int64 }

// MarshalJSON writes Money as text.
func (m Money) MarshalJSON() ([]byte, error) { return json.Marshal("$") }

// Left and Right both hold a Code, at one depth.
type Left struct{ Code string }

// Right holds a Code too.
type Right struct{ Code string }

// Inner is embedded twice, tagged and not.
type Inner struct {
	Name string `json:"name"`
}

// Other clashes with Inner's name.
type Other struct {
	Label string `json:"name"`
}

// In is the input.
type In struct {
	Left
	Right
	Inner
	Other
	Customer Customer
	Items    []string
	Tags     map[string]string
	Secret   string `json:"-"`
	Count    int    `json:",string"`
	Price    Money
	Dotted   string `json:"a.b"`
	When     time.Time
	Cplx     complex128
	note     string
	Ptr      *Customer
}

// Customer is who orders.
type Customer struct {
	ID string
}

// Name is a method.
func (c Customer) Name() string { return c.ID }

// X takes its attributes from fields it cannot.
//
//stem:workflow name=p.x
//stem:attr name=a from=Customr
//stem:attr name=b from=Customer.Name
//stem:attr name=c from=Customer
//stem:attr name=d from=Items
//stem:attr name=e from=Tags
//stem:attr name=f from=Secret
//stem:attr name=g from=Count
//stem:attr name=h from=Price
//stem:attr name=i from=Price.Cents
//stem:attr name=j from=Dotted
//stem:attr name=k from=note
//stem:attr name=l from=Code
//stem:attr name=m from=Name
//stem:attr name=n from=Inner
//stem:attr name=o from=Cplx
//stem:attr name=p from=Items.Len
//stem:attr name=q from=When type=string
//stem:attr name=r from=Ptr.ID type=number
//stem:attr name=s from=Left.Code
//stem:attr name=t from=Customer.ID.X
func X(ctx *XContext, in In) (int, error) { return 0, nil }

// Y's input is not a struct.
//
//stem:workflow name=p.y
//stem:attr name=a from=Len
func Y(ctx *YContext, in []int) (int, error) { return 0, nil }
