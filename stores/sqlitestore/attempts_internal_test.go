package sqlitestore

import (
	"reflect"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// Attempts round-trip through their encoding, zero times, retry times and
// empty strings included; malformed input is refused.
func TestAttemptsEncoding(t *testing.T) {
	t.Parallel()
	at := func(ns int64) time.Time { return time.Unix(0, ns).UTC() }
	retry := at(3e18)
	in := []storage.Attempt{
		{Key: "a@v1", Number: 1, Started: at(1e18), Ended: at(1e18 + 5), Error: "boom", RetryAt: &retry},
		{Key: "a@v1", Number: 2, Started: at(2e18)},
		{Key: "", Number: -1},
	}
	b := encodeAttempts(in)
	if b[0] != attemptsVersion {
		t.Fatalf("version byte %d", b[0])
	}
	out, err := decodeAttempts(b)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", in, out, err)
	}
	if b := encodeAttempts(nil); b != nil {
		t.Fatalf("encode(nil) = %v", b)
	}
	if out, err := decodeAttempts(nil); out != nil || err != nil {
		t.Fatalf("decode(nil) = %v, %v", out, err)
	}
	for _, bad := range [][]byte{
		{9, 0},                       // unknown version
		b[:len(b)-1],                 // truncated
		append(b[:len(b):len(b)], 0), // trailing bytes
		{1, 1, 1, 'k', 2, 4},         // version 1 with a retry time
	} {
		if _, err := decodeAttempts(bad); err == nil {
			t.Errorf("decode(%v) accepted", bad)
		}
	}
}
