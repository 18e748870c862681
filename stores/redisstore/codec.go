package redisstore

import (
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

// micros converts a time to the integer microseconds the scripts use.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

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

// decodeCheckpoint reads the encoding write_cp stores:
// seq \n created \n kind \n error-json \n marked-output.
func decodeCheckpoint(key, s string) (storage.Checkpoint, error) {
	parts := strings.SplitN(s, "\n", 5)
	if len(parts) != 5 {
		return storage.Checkpoint{}, fmt.Errorf("redisstore: bad stored checkpoint %q", key)
	}
	seq, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return storage.Checkpoint{}, fmt.Errorf("redisstore: bad stored checkpoint %q: %w", key, err)
	}
	created, err := fromMicros(parts[1])
	if err != nil {
		return storage.Checkpoint{}, err
	}
	info, err := decodeError(parts[3])
	if err != nil {
		return storage.Checkpoint{}, err
	}
	return storage.Checkpoint{
		Key:       key,
		Kind:      storage.CheckpointKind(parts[2]),
		Output:    unmark(parts[4]),
		Error:     info,
		Seq:       seq,
		CreatedAt: created,
	}, nil
}

// encodeAttempt packs an attempt as length-prefixed fields; the scripts
// store it without looking inside.
func encodeAttempt(a storage.Attempt) (string, error) {
	started, err := a.Started.MarshalBinary()
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding attempt: %w", err)
	}
	ended, err := a.Ended.MarshalBinary()
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding attempt: %w", err)
	}
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(a.Key)))
	b = append(b, a.Key...)
	b = binary.AppendVarint(b, int64(a.Number))
	b = binary.AppendUvarint(b, uint64(len(started)))
	b = append(b, started...)
	b = binary.AppendUvarint(b, uint64(len(ended)))
	b = append(b, ended...)
	b = append(b, a.Error...)
	return string(b), nil
}

var errBadAttempt = errors.New("redisstore: bad stored attempt")

func decodeAttempt(s string) (storage.Attempt, error) {
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
	var a storage.Attempt
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
	a.Error = string(b)
	return a, nil
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
	if s := m["ready"]; s != "" {
		t, err := fromMicros(s)
		if err != nil {
			return r, err
		}
		r.ReadyAt = &t
	}
	if r.Wait, err = decodeWait(m["wk"], m["wt"], m["wn"], m["wd"]); err != nil {
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
	if r.CreatedAt, err = fromMicros(m["ca"]); err != nil {
		return r, err
	}
	if r.UpdatedAt, err = fromMicros(m["ua"]); err != nil {
		return r, err
	}
	return r, nil
}

func decodeWait(key, topic, kind, deadline string) (*storage.Wait, error) {
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
	return w, nil
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
