package main

import (
	"errors"

	"github.com/stemflow/stem/runtime"
)

// sealedNote is what the command shows instead of a payload (kind "") or an
// error text (kind " error") that it could not open: that the workers' key
// opens it, and which key that is, or why the keys given do not.
func sealedNote(err error, kind string) (string, bool) {
	var se *runtime.SealedError
	if !errors.As(err, &se) {
		return "", false
	}
	if !se.NoCodec {
		return "(sealed" + kind + ": " + se.Reason + ")", true
	}
	note := "(sealed" + kind + ": pass the workers' --codec-key to read it)"
	if se.KeyID != "" {
		note += " key ID " + se.KeyID
	}
	return note, true
}

// errNote is an error for a terminal: a note if its text is sealed, else
// its text as errText shows it.
func errNote(err error, whole bool) string {
	if note, ok := sealedNote(err, " error"); ok {
		return note
	}
	return declaredTag(err) + errText(err.Error(), whole)
}

// declaredTag names the declared error (//stem:error) a failure was
// recorded with, as "[name] ", or is "".
func declaredTag(err error) string {
	if name, ok := runtime.DeclaredErrorName(err); ok {
		return "[" + clean(name) + "] "
	}
	return ""
}
