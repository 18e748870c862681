package runtime

import (
	"encoding/json"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// OpenUpdate opens an update as Updates and AwaitUpdate return it (as
// stored: sealed when the engine seals payloads), for a tool that shows
// it: request and reply are the caller's request (without the envelope it
// travels in) and the workflow's reply as JSON, opened with the engine's
// codec, and replyErr is the error the workflow replied with, as
// AwaitReply returns it (declared errors keep their identity; a text the
// codec cannot open is a *SealedError). A pending update has neither reply
// nor replyErr. A request or reply the codec cannot open is left nil, and
// err is the first such, a *SealedError naming it; the rest is opened all
// the same.
func (e *Engine) OpenUpdate(u storage.UpdateRecord) (request, reply json.RawMessage, replyErr, err error) {
	what := fmt.Sprintf("update %s of run %s", u.ID, u.RunID)
	env, errReq := e.payloads.raw("request of "+what, u.Payload)
	if errReq == nil && len(env) > 0 {
		var en updateEnvelope
		if jerr := json.Unmarshal(env, &en); jerr != nil {
			errReq = fmt.Errorf("%w: request of %s: %w", ErrDecode, what, jerr)
		} else {
			request = en.Request
		}
	}
	var errRep error
	if u.State == storage.UpdateReplied {
		if u.Error != nil {
			replyErr = e.payloads.errorOf("reply to "+what, "", u.Error)
		} else {
			reply, errRep = e.payloads.raw("reply to "+what, u.Reply)
		}
	}
	return request, reply, replyErr, cmpErr(errReq, errRep)
}
