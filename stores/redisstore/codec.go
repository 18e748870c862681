package redisstore

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// Payloads are stored "marked" so that nil and empty stay apart: nil is the
// empty string (or an absent field), any other slice is one marker byte
// followed by its bytes.
const marker = "\x01"

func mark(b []byte) string {
	if b == nil {
		return ""
	}
	return marker + string(b)
}

func unmark(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s[1:])
}

// markText marks a text for a field whose absence means none, so that an
// empty text is still there: one marker byte followed by the text.
func markText(s string) string { return marker + s }

// decodeCancel reads a run's cancellation request from the run hash's cq
// field, the reason as markText wrote it: absent ("", as in every run
// stored before cancellations were kept) is none.
func decodeCancel(cq string) (requested bool, reason string) {
	if cq == "" {
		return false, ""
	}
	return true, cq[1:]
}

// micros converts a time to the integer microseconds the scripts use.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// timePtr reads an optional stored time: "" is nil.
func timePtr(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := fromMicros(s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// microsPtr is micros of an optional time: nil is "".
func microsPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return micros(*t)
}

func durMicros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func fromMicros(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: bad stored time %q", s)
	}
	return time.UnixMicro(n).UTC(), nil
}

func encodeError(e *storage.ErrorInfo) (string, error) {
	if e == nil {
		return "", nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding error info: %w", err)
	}
	return string(b), nil
}

func decodeError(s string) (*storage.ErrorInfo, error) {
	if s == "" {
		return nil, nil
	}
	var e storage.ErrorInfo
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("redisstore: bad stored error info: %w", err)
	}
	return &e, nil
}

// inputMarker starts the last field of a checkpoint's encoding when the
// checkpoint keeps its call's input (storage.Checkpoint.Input): the
// marked input's length in decimal, a colon, the marked input and then
// the marked output. Without an input the field is the marked output
// alone, as in every checkpoint stored before inputs were kept: "" or
// the marker byte, never this one.
const inputMarker = "\x02"

// encodeResult is the last field of a checkpoint's encoding: the marked
// output, preceded by the marked input when there is one (inputMarker).
// The scripts store it as given (cp_out in scripts/lib/state.lua reads
// the output back).
func encodeResult(input, output []byte) string {
	if input == nil {
		return mark(output)
	}
	in := mark(input)
	return inputMarker + strconv.Itoa(len(in)) + ":" + in + mark(output)
}

// decodeResult reads what encodeResult wrote.
func decodeResult(s string) (input, output []byte, err error) {
	rest, ok := strings.CutPrefix(s, inputMarker)
	if !ok {
		return nil, unmark(s), nil
	}
	ns, rest, ok := strings.Cut(rest, ":")
	n, perr := strconv.Atoi(ns)
	if !ok || perr != nil || n < 1 || n > len(rest) {
		return nil, nil, errors.New("malformed input")
	}
	return unmark(rest[:n]), unmark(rest[n:]), nil
}

// decodeCheckpoint reads the encoding put_cp stores: seq \n created \n
// kind \n error-json \n execution \n forked-from \n result, the result
// the marked output, or the marked input and output (encodeResult).
func decodeCheckpoint(key, s string) (storage.Checkpoint, error) {
	bad := func(err error) (storage.Checkpoint, error) {
		if err == nil {
			return storage.Checkpoint{}, fmt.Errorf("redisstore: bad stored checkpoint %q", key)
		}
		return storage.Checkpoint{}, fmt.Errorf("redisstore: bad stored checkpoint %q: %w", key, err)
	}
	parts := strings.SplitN(s, "\n", 7)
	if len(parts) != 7 {
		return bad(nil)
	}
	seq, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return bad(err)
	}
	created, err := fromMicros(parts[1])
	if err != nil {
		return bad(err)
	}
	info, err := decodeError(parts[3])
	if err != nil {
		return bad(err)
	}
	ex, err := strconv.Atoi(parts[4])
	if err != nil {
		return bad(err)
	}
	forked, err := strconv.Atoi(parts[5])
	if err != nil {
		return bad(err)
	}
	input, output, err := decodeResult(parts[6])
	if err != nil {
		return bad(err)
	}
	return storage.Checkpoint{
		Key:        key,
		Kind:       storage.CheckpointKind(parts[2]),
		Input:      input,
		Output:     output,
		Error:      info,
		Seq:        seq,
		Execution:  ex,
		ForkedFrom: forked,
		CreatedAt:  created,
	}, nil
}

// encodeAttempt packs an attempt as length-prefixed fields (key, number,
// start, end, retry time, empty for none) followed by the error; the
// scripts store it without looking inside. Its execution is not stored:
// the list that holds it says which.
func encodeAttempt(a storage.Attempt) (string, error) {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(a.Key)))
	b = append(b, a.Key...)
	b = binary.AppendVarint(b, int64(a.Number))
	times := []*time.Time{&a.Started, &a.Ended, a.RetryAt}
	for _, t := range times {
		var enc []byte
		if t != nil {
			var err error
			if enc, err = t.MarshalBinary(); err != nil {
				return "", fmt.Errorf("redisstore: encoding attempt: %w", err)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	b = append(b, a.Error...)
	return string(b), nil
}

var errBadAttempt = errors.New("redisstore: bad stored attempt")

// decodeAttempt reads what encodeAttempt wrote, stamped with the
// execution whose list held it.
func decodeAttempt(s string, execution int) (storage.Attempt, error) {
	b := []byte(s)
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	a := storage.Attempt{Execution: execution}
	key, ok := field()
	if !ok {
		return a, errBadAttempt
	}
	a.Key = string(key)
	num, k := binary.Varint(b)
	if k <= 0 {
		return a, errBadAttempt
	}
	a.Number = int(num)
	b = b[k:]
	started, ok := field()
	if !ok || a.Started.UnmarshalBinary(started) != nil {
		return a, errBadAttempt
	}
	ended, ok := field()
	if !ok || a.Ended.UnmarshalBinary(ended) != nil {
		return a, errBadAttempt
	}
	retry, ok := field()
	if !ok {
		return a, errBadAttempt
	}
	if len(retry) > 0 {
		a.RetryAt = new(time.Time)
		if a.RetryAt.UnmarshalBinary(retry) != nil {
			return a, errBadAttempt
		}
	}
	a.Error = string(b)
	return a, nil
}

// encodeActive packs a heartbeat's active step: its key, length-prefixed,
// the attempt number and the start time.
func encodeActive(as *storage.ActiveStep) (string, error) {
	if as == nil {
		return "", nil
	}
	started, err := as.Started.MarshalBinary()
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding active step: %w", err)
	}
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(as.Key)))
	b = append(b, as.Key...)
	b = binary.AppendVarint(b, int64(as.Attempt))
	b = append(b, started...)
	return string(b), nil
}

func decodeActive(s string) (*storage.ActiveStep, error) {
	if s == "" {
		return nil, nil
	}
	bad := errors.New("redisstore: bad stored active step")
	b := []byte(s)
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, bad
	}
	as := &storage.ActiveStep{Key: string(b[k : k+int(n)])}
	b = b[k+int(n):]
	num, k := binary.Varint(b)
	if k <= 0 {
		return nil, bad
	}
	as.Attempt = int(num)
	if as.Started.UnmarshalBinary(b[k:]) != nil {
		return nil, bad
	}
	return as, nil
}

func encodeAttempts(as []storage.Attempt) ([]any, error) {
	out := make([]any, 0, len(as))
	for _, a := range as {
		s, err := encodeAttempt(a)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// encodeHeaders packs a run's headers for the run hash's hd field: a JSON
// object, or "" for none (nil or empty), so that a run without headers,
// like every run stored before runs had them, has no field. JSON keeps
// each name and value byte for byte, for storage.ValidateHeaders admits
// only valid UTF-8; a map of strings always encodes.
func encodeHeaders(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	b, err := json.Marshal(h)
	if err != nil {
		panic(fmt.Sprintf("redisstore: encoding headers: %v", err))
	}
	return string(b)
}

// decodeHeaders reads what encodeHeaders wrote; "" is nil.
func decodeHeaders(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("redisstore: bad stored headers: %w", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return h, nil
}

// encodeHold packs a run's hold for the run hash's hl field: a JSON
// object, or "" for none, so that a run not held, like every run stored
// before holds were kept, has no field. A hold JSON cannot encode (its
// Since outside the years 0 to 9999) is storage.ErrInvalidArgument.
func encodeHold(h *storage.Hold) (string, error) {
	if h == nil {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("hold: %w: %v", storage.ErrInvalidArgument, err)
	}
	return string(b), nil
}

// decodeHold reads what encodeHold wrote; "" is nil.
func decodeHold(s string) (*storage.Hold, error) {
	if s == "" {
		return nil, nil
	}
	var h storage.Hold
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("redisstore: bad stored hold: %w", err)
	}
	return &h, nil
}

// pairsToMap turns an HGETALL reply from a script into a map.
func pairsToMap(v any) (map[string]string, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("redisstore: unexpected reply %T", v)
	}
	m := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, ok1 := list[i].(string)
		val, ok2 := list[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisstore: unexpected reply element")
		}
		m[k] = val
	}
	return m, nil
}

// decodeRun builds a RunRecord from the run hash's fields.
func decodeRun(m map[string]string) (storage.RunRecord, error) {
	var r storage.RunRecord
	var err error
	r.ID = m["id"]
	r.Workflow = m["wf"]
	r.ParentID = m["pa"]
	r.Status = storage.RunStatus(m["st"])
	r.Input = unmark(m["in"])
	r.Output = unmark(m["out"])
	if r.Error, err = decodeError(m["err"]); err != nil {
		return r, err
	}
	r.PauseRequested = m["preq"] != ""
	r.CancelRequested, r.CancelReason = decodeCancel(m["cq"])
	if s := m["ready"]; s != "" {
		t, err := fromMicros(s)
		if err != nil {
			return r, err
		}
		r.ReadyAt = &t
	}
	if r.Wait, err = decodeWait(m["wk"], m["wt"], m["wn"], m["wd"], m["wa"]); err != nil {
		return r, err
	}
	if r.Deadline, err = timePtr(m["dl"]); err != nil {
		return r, err
	}
	r.Progress = unmark(m["pg"])
	r.Queue = cmp.Or(m["qu"], storage.DefaultQueue)
	r.Partition = m["pt"]
	prio, err := parseInt(m["pr"])
	if err != nil {
		return r, err
	}
	r.Priority = int(prio)
	vr, err := parseInt(m["vr"])
	if err != nil {
		return r, err
	}
	r.Version = int(vr)
	if r.Headers, err = decodeHeaders(m["hd"]); err != nil {
		return r, err
	}
	if r.Attributes, err = decodeAttrs(m["at"]); err != nil {
		return r, err
	}
	if r.Hold, err = decodeHold(m["hl"]); err != nil {
		return r, err
	}
	r.Owner = m["own"]
	if s := m["lu"]; s != "" {
		if r.LeaseUntil, err = fromMicros(s); err != nil {
			return r, err
		}
	}
	if r.Token, err = parseInt(m["tok"]); err != nil {
		return r, err
	}
	rec, err := parseInt(m["rec"])
	if err != nil {
		return r, err
	}
	r.Recoveries = int(rec)
	r.ParentPolicy = storage.ParentPolicy(m["pp"])
	ex, err := parseInt(m["ex"])
	if err != nil {
		return r, err
	}
	r.Execution = max(int(ex), 1)
	if r.CreatedAt, err = fromMicros(m["ca"]); err != nil {
		return r, err
	}
	if r.UpdatedAt, err = fromMicros(m["ua"]); err != nil {
		return r, err
	}
	r.StartedAt = r.CreatedAt
	if s := m["sa"]; s != "" {
		if r.StartedAt, err = fromMicros(s); err != nil {
			return r, err
		}
	}
	if s := m["ea"]; s != "" {
		t, err := fromMicros(s)
		if err != nil {
			return r, err
		}
		r.EndedAt = &t
	}
	if r.Active, err = decodeActive(m["act"]); err != nil {
		return r, err
	}
	return r, nil
}

// decodeExecution reads an entry of a run's executions list, as
// restart.lua writes it: number \n started \n ended \n status \n
// forked-from \n error-json \n fork key.
func decodeExecution(s string) (storage.ExecutionRecord, error) {
	var e storage.ExecutionRecord
	parts := strings.SplitN(s, "\n", 7)
	if len(parts) != 7 {
		return e, fmt.Errorf("redisstore: bad stored execution %q", s)
	}
	return currentExecution(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6])
}

// currentExecution builds an execution record from its stored fields:
// number, started, ended ("" while unfinished), status, forked-from ("" or
// "0" for none), error JSON and fork key.
func currentExecution(num, started, ended, st, forked, errJSON, fromKey string) (storage.ExecutionRecord, error) {
	e := storage.ExecutionRecord{Status: storage.RunStatus(st), FromKey: fromKey}
	n, err := parseInt(num)
	if err != nil {
		return e, err
	}
	e.Number = max(int(n), 1)
	if e.StartedAt, err = fromMicros(started); err != nil {
		return e, err
	}
	if ended != "" {
		t, err := fromMicros(ended)
		if err != nil {
			return e, err
		}
		e.EndedAt = &t
	}
	ff, err := parseInt(forked)
	if err != nil {
		return e, err
	}
	e.ForkedFrom = int(ff)
	if e.Error, err = decodeError(errJSON); err != nil {
		return e, err
	}
	return e, nil
}

// catalogEntry is how a WorkflowType, EventType or QueueType is stored,
// under its name or topic: the schemas byte for byte (nil stays nil), the
// time in full; a workflow's queue, retention (nanoseconds, nil for
// none), timeout (nanoseconds, absent for none, as in every entry
// stored before timeouts were kept) and declared search attributes (in
// the order declared, absent for none, as in every entry stored before
// attributes were kept), a queue's limits.
type catalogEntry struct {
	Version   int            `json:"v,omitempty"`
	Input     []byte         `json:"i"`
	Output    []byte         `json:"o"`
	Payload   []byte         `json:"p"`
	Queue     string         `json:"q,omitempty"`
	Retention *time.Duration `json:"r,omitempty"`
	Timeout   time.Duration  `json:"t,omitempty"`
	// A workflow's declared search attributes.
	Attributes []storage.AttrDecl `json:"a,omitempty"`
	// A queue's limits.
	Concurrency          int           `json:"c,omitempty"`
	PartitionConcurrency int           `json:"pc,omitempty"`
	Rate                 int           `json:"ra,omitempty"`
	RatePeriod           time.Duration `json:"rp,omitempty"`
	Worker               string        `json:"w,omitempty"`
	Updated              time.Time     `json:"u"`
}

func encodeCatalogEntry(e catalogEntry) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding catalog: %w", err)
	}
	return string(b), nil
}

func decodeCatalogEntry(name, s string) (catalogEntry, error) {
	var e catalogEntry
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return e, fmt.Errorf("redisstore: bad stored catalog entry %q: %w", name, err)
	}
	return e, nil
}

// decodeWait builds a registered wait from the run hash's fields: its own
// case (key, topic and kind, stored as given), its deadline and its
// further cases (also, as encodeAlso writes them).
func decodeWait(key, topic, kind, deadline, also string) (*storage.Wait, error) {
	if key == "" && topic == "" {
		return nil, nil
	}
	w := &storage.Wait{Key: key, Topic: topic, Kind: storage.CheckpointKind(kind)}
	if deadline != "" {
		t, err := fromMicros(deadline)
		if err != nil {
			return nil, err
		}
		w.Deadline = &t
	}
	var err error
	if w.Also, err = decodeAlso(also); err != nil {
		return nil, err
	}
	return w, nil
}

// encodeAlso packs a wait's further cases for the run hash's wa field:
// key, topic and kind (as given, empty for an event case), each followed
// by a NUL byte, which no key, topic or kind may hold (storage's
// validation refuses it). The scripts split it with wait_also
// (scripts/lib/util.lua). No cases is "".
func encodeAlso(cases []storage.WaitCase) string {
	var b strings.Builder
	for _, c := range cases {
		b.WriteString(c.Key)
		b.WriteByte(0)
		b.WriteString(c.Topic)
		b.WriteByte(0)
		b.WriteString(string(c.Kind))
		b.WriteByte(0)
	}
	return b.String()
}

// decodeAlso reads what encodeAlso wrote; "" is nil.
func decodeAlso(s string) ([]storage.WaitCase, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "\x00")
	if len(parts)%3 != 1 || parts[len(parts)-1] != "" {
		return nil, fmt.Errorf("redisstore: bad stored wait cases %q", s)
	}
	out := make([]storage.WaitCase, 0, len(parts)/3)
	for i := 0; i+2 < len(parts); i += 3 {
		out = append(out, storage.WaitCase{Key: parts[i], Topic: parts[i+1], Kind: storage.CheckpointKind(parts[i+2])})
	}
	return out, nil
}

func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisstore: bad stored number %q", s)
	}
	return n, nil
}

// str reads an optional string from a script reply element (nil for a
// missing field).
func str(v any) string {
	s, _ := v.(string)
	return s
}
