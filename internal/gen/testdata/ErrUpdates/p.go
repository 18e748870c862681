package p

//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) { return n, nil }

// Decision is a reply.
type Decision struct{ OK bool }

// Page is generic.
type Page[T any] struct{ Items []T }

// Chan is no JSON payload.
type Chan struct{ C chan int }

func checkA(a A) error { return nil }

func checkPtr(b *B) error { return nil }

func checkTwo(c C, n int) error { return nil }

func checkGeneric[T any](j J) error { return nil }

func checkResult(i I) bool { return true }

var checkVar = func(e E) error { return nil }

// A's reply is misspelled.
//
//stem:update name=p.a reply=Decison
type A struct{ X int }

// B's reply names a function, and its validator takes a pointer.
//
//stem:update name=p.b reply=checkA validate=checkPtr
type B struct{ X int }

// C's reply is generic, and its validator takes two parameters.
//
//stem:update name=p.c reply=Page validate=checkTwo
type C struct{ X int }

// D's reply is no JSON payload, and its validator is misspelled.
//
//stem:update name=p.d reply=Chan validate=chekA
type D struct{ X int }

// E's validator is a variable.
//
//stem:update name=p.e reply=Decision validate=checkVar
type E struct{ X int }

// F is generic, and its validator names a type.
//
//stem:update name=p.f reply=Decision validate=Decision
type F[T any] struct{ X T }

// G is no JSON payload, and has A's name.
//
//stem:update name=p.a reply=Decision
type G struct{ F func() }

// H misspells reply.
//
//stem:update name=p.h rpely=Decision
type H struct{ X int }

// I's validator returns a bool.
//
//stem:update name=p.i reply=Decision validate=checkResult
type I struct{ X int }

// J's validator is generic.
//
//stem:update name=p.j reply=Decision validate=checkGeneric
type J struct{ X int }

// L misspells stream.
//
//stem:steam name=p.l
type L struct{ X int }

// S is no JSON payload.
//
//stem:stream name=p.s
type S struct{ C chan int }

// S2 has S's name.
//
//stem:stream name=p.s verison=2
type S2 struct{ X int }

// T is generic.
//
//stem:stream name=p.t
type T[V any] struct{ X V }

// Both is an event and an update.
//
//stem:event topic=p.both
//stem:update name=p.both reply=Decision
type Both struct{ X int }

// Fn is a function.
//
//stem:update name=p.fn reply=Decision
func Fn() {}

// V is a variable.
//
//stem:stream name=p.var
var V = 1
