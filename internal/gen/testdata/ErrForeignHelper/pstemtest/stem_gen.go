// Hand-written, where stemgen writes the test helpers of package p: it
// must not overwrite it.

package pstemtest
