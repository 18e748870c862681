package p

//stem:workflow name=p.w
func W(ctx *WContext, n int) (int, error) { return n, nil }

// Approval's field changed from a string to a number.
//
//stem:update name=p.approve reply=Decision
type Approval struct {
	By int `json:"by"`
}

// Decision lost a field.
type Decision struct {
	Accepted bool `json:"accepted"`
}

// Line's field was renamed.
//
//stem:stream name=p.log version=1
type Line struct {
	Message string `json:"message"`
}

// Note changed only compatibly: a field added.
//
//stem:update name=p.note reply=Decision
type Note struct {
	Text string `json:"text"`
	By   string `json:"by"`
}
