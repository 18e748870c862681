package p

//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) { return n, nil }
