// Package clocks is a clock library: its Now functions and methods read
// a clock.
package clocks

import "time"

// Clock reads the time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns the time.
func (Real) Now() time.Time { return time.Now() }

// Now returns the time.
func Now() time.Time { return time.Now() }

// NowIn returns the time in a zone: not named Now.
func NowIn(loc *time.Location) time.Time { return time.Now().In(loc) }

// Epoch is no clock: it takes an argument.
func Epoch(s int64) time.Time { return time.Unix(s, 0) }
