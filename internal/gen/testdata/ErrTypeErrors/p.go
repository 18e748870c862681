package p

// W has a genuine type error; the missing generated names are tolerated.
//
//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) {
	x := undefinedThing
	ctx.Sleep("nap", 1)
	return x, nil
}

var _ = StartW

var _ = StepNope

var s string = 1
