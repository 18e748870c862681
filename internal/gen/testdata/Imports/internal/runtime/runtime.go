// Package runtime has the same name as the stem runtime, so generated code
// must import one of them under another name.
package runtime

// Info is a payload from a package named runtime.
type Info struct{ N int }
