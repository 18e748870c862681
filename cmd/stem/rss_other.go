//go:build !unix

package main

// peakRSS returns 0: the process's peak memory is not read on this system.
func peakRSS() int64 { return 0 }
