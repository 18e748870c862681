package p

// FlowProgress is what Flow publishes.
type FlowProgress struct{ Stage string }

// Pair is generic.
type Pair[T any] struct{ A, B T }

// Leaky holds a channel, which JSON cannot carry.
type Leaky struct{ C chan int }

func helper() {}

//stem:workflow name=p.a timeout=10
func A(ctx *AContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.b timeout=-5m
func B(ctx *BContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.c timeout=0s
func C(ctx *CContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.d progres=FlowProgress
func D(ctx *DContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.e progress=FlowProgres
func E(ctx *EContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.f progress=Nothing
func F(ctx *FContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.g progress=helper
func G(ctx *GContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.h progress=Pair
func H(ctx *HContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.i progress=Leaky
func I(ctx *IContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.j progress=time.Duration timout=1h
func J(ctx *JContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.k progress=flowProgress timeout=1h timeout=2h
func K(ctx *KContext, n int) (int, error) { return n, nil }
