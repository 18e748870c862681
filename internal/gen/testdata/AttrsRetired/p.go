package p

// In is the input.
type In struct {
	Name string `json:"name"`
}

// A dropped stage, took back total at its recorded type, and added
// customer.
//
//stem:workflow name=p.a
//stem:attr name=customer from=Name
//stem:attr name=total type=number
func A(ctx *AContext, in In) (int, error) { return 0, ctx.SetTotalAttr(1) }
