package p

//stem:workflow name=p.a queue=or@ders
func A(ctx *AContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.b queue=billing/eu
func B(ctx *BContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.c queue=a23456789a123456789a123456789a123456789a123456789a123456789a123456789a123456789a123456789a123456789a123456789a123456789a1234567890
func C(ctx *CContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.d retention=-720h
func D(ctx *DContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.e retention=a-month
func E(ctx *EContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.f retention=0s
func F(ctx *FContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.g retention=30d
func G(ctx *GContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.h retention=Forever
func H(ctx *HContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.i queu=billing retentoin=720h
func I(ctx *IContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.j queue=billing queue=audit retention=forever retention=1h
func J(ctx *JContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.k queue= retention
func K(ctx *KContext, n int) (int, error) { return n, nil }
