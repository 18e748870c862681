package p

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

// Customer is who placed an order.
type Customer struct {
	ID   string `json:"id"`
	Tier uint8
}

// Audit is embedded in Order: encoding/json promotes its fields.
type Audit struct {
	Placed time.Time `json:"placed"`
	Source string    `json:"source,omitempty"`
}

// Meta is embedded in Order under a JSON name: its fields stay in its own
// object.
type Meta struct {
	Channel string `json:"channel"`
}

// Order is the input of Fulfil.
type Order struct {
	Audit
	Meta     `json:"meta"`
	ID       string    `json:"id"`
	Customer *Customer `json:"customer"`
	Total    float64
	Count    int32 `json:"count"`
	Rush     *bool `json:"rush,omitempty"`
	Due      *time.Time
	Region   Region `json:"region"`
	internal string
}

// Region is a string type.
type Region string

// Receipt is the output of Fulfil.
type Receipt struct{ Stage string }

// Fulfil fulfils an order.
//
//stem:workflow name=p.fulfil version=2
//stem:attr name=order.id from=ID
//stem:attr name=customer from=Customer.ID type=string
//stem:attr name=tier from=Customer.Tier
//stem:attr name=total from=Total
//stem:attr name=count from=Count type=number
//stem:attr name=rush from=Rush
//stem:attr name=due from=Due
//stem:attr name=placed from=Placed
//stem:attr name=source from=Audit.Source
//stem:attr name=channel from=Meta.Channel
//stem:attr name=region from=Region
//stem:attr name=stage type=string
//stem:attr name=paid_at type=time
//stem:attr name=flagged type=bool
//stem:attr name=score type=number
func Fulfil(ctx *FulfilContext, o Order) (Receipt, error) {
	if err := ctx.SetStageAttr("charging"); err != nil {
		return Receipt{}, err
	}
	if err := ctx.SetScoreAttr(o.Total * 2); err != nil {
		return Receipt{}, err
	}
	if err := ctx.SetPaidAtAttr(ctx.Now()); err != nil {
		return Receipt{}, err
	}
	if err := ctx.SetFlaggedAttr(o.Total > 1000); err != nil {
		return Receipt{}, err
	}
	return Receipt{Stage: "done"}, ctx.SetOrderIDAttr(o.ID)
}

// FulfilV1 is the first version, kept to drain its runs.
//
//stem:workflow name=p.fulfil
//stem:attr name=customer from=Customer.ID
func FulfilV1(ctx *FulfilV1Context, o Order) (Receipt, error) {
	return Receipt{}, nil
}

// Ping has no attributes.
//
//stem:workflow name=p.ping
func Ping(ctx *PingContext, n int) (int, error) { return n, nil }

var _ = runtime.ErrInvalidArgument
