package p

import "errors"

//stem:error name=p.twice
var ErrA = errors.New("a")

//stem:error name=p.twice
var ErrB = errors.New("b")

//stem:error name=p.not_error
var NotAnError = 42

//stem:error name=p.two
var ErrC, ErrD = errors.New("c"), errors.New("d")

//stem:error name=p.grouped
var (
	ErrE = errors.New("e")
)

var (
	// ErrF is in a group, marked on its own.
	//
	//stem:error name=p.in_group
	ErrF = errors.New("f")
)

//stem:error name=p.slice
var ErrSlice = sliceErr{"x"}

type sliceErr []string

func (s sliceErr) Error() string { return "slice" }

//stem:error name=p.plain
type Plain struct{ X int }

//stem:error name=p.iface
type Iface interface{ Error() string }

//stem:error name=p.generic
type Generic[T any] struct{ V T }

func (g *Generic[T]) Error() string { return "generic" }

//stem:error name=p.unrecorded
type Unrecorded struct{ Cause error }

func (u *Unrecorded) Error() string { return "unrecorded" }

//stem:error name=p.func
func F() error { return nil }

//stem:error name=bad/name
var ErrBadName = errors.New("bad")

//stem:eror name=p.typo
var ErrTypo = errors.New("typo")
