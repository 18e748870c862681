//go:build !race

package enginetest

// raceDetector is set when the tests run under the race detector.
const raceDetector = false
