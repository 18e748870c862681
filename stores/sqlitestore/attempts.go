package sqlitestore

import (
	"encoding/binary"
	"errors"

	"github.com/stemflow/stem/storage"
)

// The attempts written with a checkpoint are stored in the checkpoint's row,
// in this encoding:
//
//	version byte (2), uvarint count, then per attempt:
//	uvarint len(Key), Key, varint Number, flags byte
//	(bit 0: Started is zero, bit 1: Ended is zero, bit 2: RetryAt is set),
//	varint Started, varint Ended and varint RetryAt in Unix nanoseconds
//	(each only when its flag says so), uvarint len(Error), Error.
//
// Version 1, written before RetryAt existed, is the same without bit 2; it
// is still read. An attempt's Execution is its checkpoint's, not encoded.
const attemptsVersion = 2

var errBadAttempts = errors.New("malformed encoded attempts")

func encodeAttempts(as []storage.Attempt) []byte {
	if len(as) == 0 {
		return nil
	}
	n := 2
	for i := range as {
		n += len(as[i].Key) + len(as[i].Error) + 50
	}
	b := make([]byte, 0, n)
	b = append(b, attemptsVersion)
	b = binary.AppendUvarint(b, uint64(len(as)))
	for i := range as {
		a := &as[i]
		b = binary.AppendUvarint(b, uint64(len(a.Key)))
		b = append(b, a.Key...)
		b = binary.AppendVarint(b, int64(a.Number))
		var flags byte
		if a.Started.IsZero() {
			flags |= 1
		}
		if a.Ended.IsZero() {
			flags |= 2
		}
		if a.RetryAt != nil {
			flags |= 4
		}
		b = append(b, flags)
		if flags&1 == 0 {
			b = binary.AppendVarint(b, a.Started.UnixNano())
		}
		if flags&2 == 0 {
			b = binary.AppendVarint(b, a.Ended.UnixNano())
		}
		if flags&4 != 0 {
			b = binary.AppendVarint(b, a.RetryAt.UnixNano())
		}
		b = binary.AppendUvarint(b, uint64(len(a.Error)))
		b = append(b, a.Error...)
	}
	return b
}

func decodeAttempts(b []byte) ([]storage.Attempt, error) {
	if len(b) == 0 {
		return nil, nil
	}
	version := b[0]
	if version != 1 && version != attemptsVersion {
		return nil, errBadAttempts
	}
	b = b[1:]
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return nil, errBadAttempts
	}
	b = b[k:]
	out := make([]storage.Attempt, 0, count)
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	varint := func() (int64, bool) {
		v, k := binary.Varint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return v, true
	}
	for range count {
		var a storage.Attempt
		var ok bool
		if a.Key, ok = str(); !ok {
			return nil, errBadAttempts
		}
		num, ok := varint()
		if !ok || len(b) == 0 {
			return nil, errBadAttempts
		}
		a.Number = int(num)
		flags := b[0]
		b = b[1:]
		if version == 1 && flags&4 != 0 {
			return nil, errBadAttempts
		}
		if flags&1 == 0 {
			v, ok := varint()
			if !ok {
				return nil, errBadAttempts
			}
			a.Started = fromNanos(v)
		}
		if flags&2 == 0 {
			v, ok := varint()
			if !ok {
				return nil, errBadAttempts
			}
			a.Ended = fromNanos(v)
		}
		if flags&4 != 0 {
			v, ok := varint()
			if !ok {
				return nil, errBadAttempts
			}
			t := fromNanos(v)
			a.RetryAt = &t
		}
		if a.Error, ok = str(); !ok {
			return nil, errBadAttempts
		}
		out = append(out, a)
	}
	if len(b) != 0 {
		return nil, errBadAttempts
	}
	return out, nil
}
