// Hand-written: stemgen must not overwrite it.

package p

type WContext struct{}
