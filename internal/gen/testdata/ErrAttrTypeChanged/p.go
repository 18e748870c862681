package p

// In is the input.
type In struct {
	Count int
	Name  string
}

// A changed the types of two attributes, one of them retired.
//
//stem:workflow name=p.a
//stem:attr name=total type=number
//stem:attr name=stage type=bool
//stem:attr name=customer from=Name
//stem:attr name=added type=time
func A(ctx *AContext, in In) (int, error) { return 0, nil }

// C reuses the name an old workflow recorded, with another type.
//
//stem:workflow name=p.c
//stem:attr name=region from=Count
func C(ctx *CContext, in In) (int, error) { return 0, nil }
