package p

import "time"

//stem:allow time
var epoch = time.Unix(0, 0)

// W has //stem:allow comments that are malformed, misplaced or allow
// nothing.
//
//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) {
	start := time.Now() //stem:allow tmie
	//stem:allow
	_ = time.Since(start)
	x := n + 1 //stem:allow rand
	//stem:allow time goroutine
	_ = time.Since(epoch)
	return x, nil
}

// V's doc comment is no place for it either.
//
//stem:allow time
func V() time.Time { return time.Now() }
