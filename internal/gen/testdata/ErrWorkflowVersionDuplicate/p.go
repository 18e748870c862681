// Package p keeps two versions of workflow p.fulfil to drain the old one's
// runs, but gives a third function a version the package already has, and
// a fourth the default version of p.refund twice over.
package p

// FulfilV1 is the first version.
//
//stem:workflow name=p.fulfil
func FulfilV1(ctx *FulfilV1Context, n int) (int, error) { return n, nil }

// Fulfil is the newest version.
//
//stem:workflow name=p.fulfil version=2
func Fulfil(ctx *FulfilContext, n int) (int, error) { return 2 * n, nil }

// FulfilToo meant to be version 3.
//
//stem:workflow name=p.fulfil version=2 timeout=1m
func FulfilToo(ctx *FulfilTooContext, n int) (int, error) { return 3 * n, nil }

//stem:workflow name=p.refund
func Refund(ctx *RefundContext, n int) (int, error) { return n, nil }

//stem:workflow version=1 name=p.refund
func RefundAgain(ctx *RefundAgainContext, n int) (int, error) { return n, nil }
