package runtime

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stemflow/stem/storage"
)

// DefaultMaxPayloadBytes is the payload limit when Config.MaxPayloadBytes is
// zero: 2 MiB.
const DefaultMaxPayloadBytes = 2 << 20

// Codec transforms payloads on their way to and from the store: inputs,
// outputs, checkpoints, event payloads and error texts. Use it to encrypt
// them at rest (see NewAESGCMCodec). Encode and Decode must be inverses and
// safe for concurrent use.
//
// The engine frames what Encode returns with a marker no JSON document
// begins with, so sealed and plaintext payloads are told apart: a store
// written before the codec was set still reads, and a sealed payload read
// without a codec is an error (ErrSealed), never taken for JSON. Decode is
// given exactly what Encode returned, or, for a payload written before
// payloads were framed, the stored bytes as they are. Any error from Decode
// makes the payload unreadable: callers get an error matching ErrSealed, and
// an engine that claims a run it cannot read hands it back untouched.
type Codec interface {
	Encode(plain []byte) ([]byte, error)
	Decode(stored []byte) ([]byte, error)
}

// A sealed payload is sealMagic, a format byte, then the format's body:
//
//	formatKeyring: an 8-byte key ID, a 12-byte nonce, the AES-GCM ciphertext
//	               and tag; the header (magic, format, key ID) is the
//	               additional authenticated data. NewAESGCMCodec's Encode
//	               returns the whole frame itself.
//	formatCodec:   whatever a user's Codec returned.
//
// The magic begins with a NUL byte: a JSON document begins with whitespace,
// '{', '[', '"', '-', a digit, 't', 'f' or 'n', never with NUL.
const (
	sealMagic     = "\x00stm"
	formatKeyring = 'k'
	formatCodec   = 'c'
	keyIDLen      = 8
	gcmNonceLen   = 12
	gcmTagLen     = 16
	keyringHeader = len(sealMagic) + 1 + keyIDLen
)

// sealedPrefix marks an error text sealed by the codec: the sealed frame
// follows in base64.
const sealedPrefix = "stem-sealed:"

// SealedError says why a payload or an error text cannot be opened: sealed
// with a key the engine's codec does not hold, failing authentication
// (tampered or corrupt), or sealed while the engine has no codec. It
// matches ErrSealed, and, when it stands for a run's or step's error whose
// text is sealed, that error's sentinel too (ErrTerminated, say).
type SealedError struct {
	// What names the payload and its run ("output of run order-1").
	What string
	// KeyID is the ID of the key the payload was sealed with (see
	// AESGCMKeyID), or "" when its codec does not name one.
	KeyID string
	// NoCodec is true when the engine has no codec at all.
	NoCodec bool
	// Reason says why it cannot be opened.
	Reason string

	code error
}

// Error says what cannot be opened and why.
func (e *SealedError) Error() string {
	return ErrSealed.Error() + ": " + e.What + ": " + e.Reason
}

// Unwrap returns ErrSealed, and the sentinel of the sealed error's code.
func (e *SealedError) Unwrap() []error {
	if e.code != nil {
		return []error{ErrSealed, e.code}
	}
	return []error{ErrSealed}
}

// payloads marshals and unmarshals values with the size limit and codec of
// one engine.
type payloads struct {
	limit int
	codec Codec
}

// encode marshals v to JSON, checks the size limit and seals it.
func (p payloads) encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	return p.encodeRaw(what, b)
}

// encodeRaw checks raw JSON against the limit and seals it.
func (p payloads) encodeRaw(what string, b []byte) ([]byte, error) {
	if len(b) > p.limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(b), p.limit)
	}
	out, err := p.seal(b)
	if err != nil {
		return nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	return out, nil
}

// seal applies the codec and frames its output; without a codec it returns
// plain as it is.
func (p payloads) seal(plain []byte) ([]byte, error) {
	if p.codec == nil {
		return plain, nil
	}
	out, err := p.codec.Encode(plain)
	if err != nil {
		return nil, err
	}
	if isKeyringFrame(out) {
		return out, nil
	}
	framed := make([]byte, 0, len(sealMagic)+1+len(out))
	framed = append(append(append(framed, sealMagic...), formatCodec), out...)
	return framed, nil
}

func isKeyringFrame(b []byte) bool {
	return len(b) > len(sealMagic) && string(b[:len(sealMagic)]) == sealMagic && b[len(sealMagic)] == formatKeyring
}

// raw opens a stored payload, returning its JSON. what names it and its run
// for errors. A payload that cannot be opened is a *SealedError.
func (p payloads) raw(what string, stored []byte) ([]byte, error) {
	if len(stored) == 0 {
		return stored, nil
	}
	plain, err := p.open(stored)
	if err != nil {
		var se *SealedError
		if errors.As(err, &se) {
			se.What = what
			return nil, se
		}
		return nil, err
	}
	return plain, nil
}

// open undoes seal. A payload without the frame is JSON written without a
// codec (returned as it is), or, if it is not JSON, one sealed before
// payloads were framed, which the codec's Decode is given as it is.
func (p payloads) open(stored []byte) ([]byte, error) {
	if !bytes.HasPrefix(stored, []byte(sealMagic)) {
		if json.Valid(stored) {
			return stored, nil
		}
		if p.codec == nil {
			return nil, &SealedError{NoCodec: true, Reason: "it is not JSON: sealed before payloads carried a key ID, or corrupt; this engine has no codec"}
		}
		plain, err := p.codec.Decode(stored)
		if err != nil {
			return nil, &SealedError{Reason: "it is neither JSON nor sealed in this release's format, and the codec does not open it as a payload sealed before key IDs (sealed with another key, or corrupt): " + err.Error()}
		}
		return plain, nil
	}
	if len(stored) == len(sealMagic) {
		return nil, &SealedError{Reason: "the sealed payload is truncated"}
	}
	switch stored[len(sealMagic)] {
	case formatKeyring:
		if len(stored) < keyringHeader {
			return nil, &SealedError{Reason: "the sealed payload is truncated"}
		}
		id := hex.EncodeToString(stored[len(sealMagic)+1 : keyringHeader])
		if p.codec == nil {
			return nil, &SealedError{KeyID: id, NoCodec: true, Reason: "sealed with key ID " + id + " and this engine has no codec"}
		}
		plain, err := p.codec.Decode(stored)
		if err != nil {
			var se *SealedError
			if errors.As(err, &se) {
				c := *se
				return nil, &c
			}
			return nil, &SealedError{KeyID: id, Reason: fmt.Sprintf("sealed with key ID %s, which this engine's codec does not open: %v", id, err)}
		}
		return plain, nil
	case formatCodec:
		if p.codec == nil {
			return nil, &SealedError{NoCodec: true, Reason: "sealed by a custom codec and this engine has no codec"}
		}
		plain, err := p.codec.Decode(stored[len(sealMagic)+1:])
		if err != nil {
			return nil, &SealedError{Reason: "the codec does not open it: " + err.Error()}
		}
		return plain, nil
	default:
		return nil, &SealedError{Reason: fmt.Sprintf("sealed in an unknown format %q (by a newer release?)", stored[len(sealMagic)])}
	}
}

// decode opens a stored payload and unmarshals it into v. The size is
// checked before unmarshalling. An empty payload decodes to the zero value.
func (p payloads) decode(what string, stored []byte, v any) error {
	b, err := p.raw(what, stored)
	if err != nil {
		return err
	}
	return decodeJSON(what, b, p.limit, v)
}

func decodeJSON(what string, b []byte, limit int, v any) error {
	if len(b) > limit {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(b), limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s into %T: %v", ErrDecode, what, v, err)
	}
	return nil
}

// sealText seals an error text, so error messages are as protected at rest
// as payloads.
func (p payloads) sealText(s string) string {
	if p.codec == nil || s == "" {
		return s
	}
	b, err := p.seal([]byte(s))
	if err != nil {
		return "(error text could not be sealed)"
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(b)
}

// openText undoes sealText. A text that cannot be opened is a
// *SealedError naming what.
func (p payloads) openText(what, s string) (string, error) {
	if !strings.HasPrefix(s, sealedPrefix) {
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(s[len(sealedPrefix):])
	if err != nil {
		return "", &SealedError{What: what, Reason: "the sealed text is not base64: corrupt"}
	}
	plain, err := p.open(b)
	if err != nil {
		var se *SealedError
		if errors.As(err, &se) {
			se.What = what
			return "", se
		}
		return "", err
	}
	return string(plain), nil
}

// sealInfo returns info with its message sealed.
func (p payloads) sealInfo(info *storage.ErrorInfo) *storage.ErrorInfo {
	if info == nil || p.codec == nil {
		return info
	}
	sealed := *info
	sealed.Message = p.sealText(info.Message)
	sealed.Detail = p.sealText(info.Detail)
	return &sealed
}

// errorFrom rebuilds an error from its stored form, opening a sealed
// message; Code keeps errors.Is working for the package's sentinels. A
// message that cannot be opened gives a *SealedError that matches the
// code's sentinel too.
func (p payloads) errorFrom(key string, info *storage.ErrorInfo) error {
	what := "error text"
	if key != "" {
		what = "error text of step " + key
	}
	return p.errorOf(what, key, info)
}

// errorOf is errorFrom with what naming the error and its run.
func (p payloads) errorOf(what, key string, info *storage.ErrorInfo) error {
	opened, err := p.openInfo(what, info)
	if err != nil || opened == nil {
		return err
	}
	return stepError(key, opened)
}

// openInfo returns info with its message and detail opened. A message
// that cannot be opened is a *SealedError that matches the code's sentinel
// too; so is a detail.
func (p payloads) openInfo(what string, info *storage.ErrorInfo) (*storage.ErrorInfo, error) {
	if info == nil || !strings.HasPrefix(info.Message, sealedPrefix) && !strings.HasPrefix(info.Detail, sealedPrefix) {
		return info, nil
	}
	opened := *info
	for _, field := range []*string{&opened.Message, &opened.Detail} {
		text, err := p.openText(what, *field)
		if err != nil {
			var se *SealedError
			if errors.As(err, &se) {
				se.code = codeSentinels[info.Code]
			}
			return nil, err
		}
		*field = text
	}
	return &opened, nil
}

// failed reports whether a checkpoint holds an error: its own, or its
// child's.
func failed(cp storage.Checkpoint) bool {
	if cp.Error != nil {
		return true
	}
	var co childOutcome
	return cp.Kind == KindChild && json.Unmarshal(cp.Output, &co) == nil && co.Error != nil
}

// openAttempts returns attempts with their error texts opened. A text that
// cannot be opened is replaced by why, and the first such error returned.
func (p payloads) openAttempts(runID string, as []Attempt) ([]Attempt, error) {
	var first error
	var out []Attempt
	for i, a := range as {
		if !strings.HasPrefix(a.Error, sealedPrefix) {
			continue
		}
		if out == nil {
			out = append([]Attempt(nil), as...)
		}
		msg, err := p.openText(fmt.Sprintf("error text of attempt %d of step %s in run %s", a.Number, a.Key, runID), a.Error)
		if err != nil {
			msg = err.Error()
			if first == nil {
				first = err
			}
		}
		out[i].Error = msg
	}
	if out == nil {
		return as, nil
	}
	return out, first
}

// openCheckpoint returns cp with its payload and error text opened, so the
// workflow's replay decodes plain JSON and text. A checkpoint that cannot
// be opened is a *SealedError.
func (p payloads) openCheckpoint(runID string, cp storage.Checkpoint) (storage.Checkpoint, error) {
	what := fmt.Sprintf("checkpoint %s of run %s", cp.Key, runID)
	info, err := p.openInfo("error text of "+what, cp.Error)
	if err != nil {
		return cp, err
	}
	cp.Error = info
	switch cp.Kind {
	case KindSleep:
	case KindChild:
		var co childOutcome
		if len(cp.Output) == 0 || json.Unmarshal(cp.Output, &co) != nil {
			return cp, nil // StartChild's checkpoint: the child's ID
		}
		if co.Error, err = p.openInfo("error text of "+what, co.Error); err != nil {
			return cp, err
		}
		if co.Sealed != nil {
			plain, err := p.raw(what, co.Sealed)
			if err != nil {
				return cp, err
			}
			co.Output, co.Sealed = plain, nil
		}
		out, err := json.Marshal(co)
		if err != nil {
			return cp, fmt.Errorf("%w: %s: %v", ErrDecode, what, err)
		}
		cp.Output = out
	default:
		plain, err := p.raw(what, cp.Output)
		if err != nil {
			return cp, err
		}
		cp.Output = plain
	}
	return cp, nil
}

// AESGCMKeyID returns the ID that NewAESGCMCodec's payloads sealed with key
// carry: 16 hex digits, the first 8 bytes of HMAC-SHA256 under the key of a
// fixed label. It names the key in errors and does not reveal it.
func AESGCMKeyID(key []byte) string {
	id := keyID(key)
	return hex.EncodeToString(id[:])
}

func keyID(key []byte) [keyIDLen]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("stem aes-gcm codec key id v1"))
	var id [keyIDLen]byte
	copy(id[:], m.Sum(nil))
	return id
}

// NewAESGCMCodec returns a Codec that encrypts payloads with AES-GCM: each
// under a fresh random nonce, sealed with newest, marked with its key's ID
// (see AESGCMKeyID). It opens payloads sealed with newest or any of older,
// so keys rotate: deploy the new key first with the old ones after it, and
// drop an old key once nothing sealed with it is kept. Keys are 16, 24 or 32
// bytes. Payloads sealed by releases before key IDs are opened with any of
// the keys too.
func NewAESGCMCodec(newest []byte, older ...[]byte) (Codec, error) {
	c := &aesGCM{byID: map[[keyIDLen]byte]cipher.AEAD{}}
	for i, key := range append([][]byte{newest}, older...) {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("stem: aes-gcm codec: key %d of %d: %w", i+1, len(older)+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("stem: aes-gcm codec: key %d of %d: %w", i+1, len(older)+1, err)
		}
		id := keyID(key)
		if i == 0 {
			c.newest, c.newestID = aead, id
		}
		if _, ok := c.byID[id]; ok {
			continue
		}
		c.byID[id] = aead
		c.all = append(c.all, aead)
		c.ids = append(c.ids, hex.EncodeToString(id[:]))
	}
	return c, nil
}

type aesGCM struct {
	newest   cipher.AEAD
	newestID [keyIDLen]byte
	byID     map[[keyIDLen]byte]cipher.AEAD
	all      []cipher.AEAD // newest first, for payloads sealed before key IDs
	ids      []string
}

// Encode seals plain with the newest key, returning the whole frame.
func (c *aesGCM) Encode(plain []byte) ([]byte, error) {
	out := make([]byte, keyringHeader+gcmNonceLen, keyringHeader+gcmNonceLen+len(plain)+gcmTagLen)
	copy(out, sealMagic)
	out[len(sealMagic)] = formatKeyring
	copy(out[len(sealMagic)+1:], c.newestID[:])
	if _, err := rand.Read(out[keyringHeader:]); err != nil {
		return nil, err
	}
	return c.newest.Seal(out, out[keyringHeader:], plain, out[:keyringHeader]), nil
}

// Decode opens a frame Encode returned, with the key it names, or a payload
// sealed before key IDs (nonce and ciphertext) with whichever key opens it.
func (c *aesGCM) Decode(stored []byte) ([]byte, error) {
	if !isKeyringFrame(stored) {
		for _, aead := range c.all {
			if len(stored) < gcmNonceLen+gcmTagLen {
				break
			}
			if plain, err := aead.Open(nil, stored[:gcmNonceLen], stored[gcmNonceLen:], nil); err == nil {
				return plain, nil
			}
		}
		return nil, fmt.Errorf("no key of this codec (key IDs %s) opens it", strings.Join(c.ids, ", "))
	}
	if len(stored) < keyringHeader+gcmNonceLen+gcmTagLen {
		return nil, &SealedError{Reason: "the sealed payload is truncated"}
	}
	var id [keyIDLen]byte
	copy(id[:], stored[len(sealMagic)+1:keyringHeader])
	hexID := hex.EncodeToString(id[:])
	aead, ok := c.byID[id]
	if !ok {
		return nil, &SealedError{KeyID: hexID, Reason: fmt.Sprintf("sealed with key ID %s, which this engine's codec does not hold (it holds %s)", hexID, strings.Join(c.ids, ", "))}
	}
	plain, err := aead.Open(nil, stored[keyringHeader:keyringHeader+gcmNonceLen], stored[keyringHeader+gcmNonceLen:], stored[:keyringHeader])
	if err != nil {
		return nil, &SealedError{KeyID: hexID, Reason: fmt.Sprintf("it fails authentication under key ID %s: tampered with or corrupt", hexID)}
	}
	return plain, nil
}
