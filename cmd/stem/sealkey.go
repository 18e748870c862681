package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stemflow/stem/runtime"
)

// checkSealKey refuses a write that the command would seal with a codec
// key no live worker holds: the workers could never open it, and would
// hand the run back again and again. It is called after the store is
// opened and before anything is written; a command without a codec key
// writes plaintext, which every worker reads, and is never refused.
func (c *call) checkSealKey(e *runtime.Engine) error {
	ids := runtime.CodecKeyIDs(c.codec)
	if len(ids) == 0 {
		return nil
	}
	return c.checkKeyHeld(e, ids[0], "the codec key given seals with key ID")
}

// checkKeyHeld refuses a write sealed with key ID id (said as what, then
// the ID) when no live worker holds the key, naming the key IDs they hold.
//
// With no live worker recorded at all, the write goes ahead with a
// warning: a fresh deployment may start runs before its first worker
// does, and nothing in the store says which key that worker will hold.
func (c *call) checkKeyHeld(e *runtime.Engine, id, what string) error {
	live, err := e.CheckKeyHeld(c.ctx, id)
	switch {
	case errors.Is(err, runtime.ErrKeyNotHeld):
		return fmt.Errorf("refused, nothing written: %s %s, which no live worker holds (%s); give the workers' key with --codec-key, --codec-key-file or $STEM_CODEC_KEY, newest first", what, id, strings.TrimPrefix(err.Error(), runtime.ErrKeyNotHeld.Error()+": "))
	case err != nil:
		return err
	case live == 0 && id != "" && c.errw != nil:
		fmt.Fprintf(c.errw, "stem: warning: %s %s, and no live worker is recorded in %s to say whether the workers will hold it\n", what, id, c.g.storeName())
	}
	return nil
}
