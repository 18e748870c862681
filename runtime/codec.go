package runtime

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
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
// outputs, checkpoints and event payloads. Use it to encrypt them at rest
// (see NewAESGCMCodec). Encode and Decode must be inverses and safe for
// concurrent use.
type Codec interface {
	Encode(plain []byte) ([]byte, error)
	Decode(stored []byte) ([]byte, error)
}

// payloads marshals and unmarshals values with the size limit and codec of
// one engine.
type payloads struct {
	limit int
	codec Codec
}

// encode marshals v to JSON, checks the size limit and applies the codec.
func (p payloads) encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	return p.encodeRaw(what, b)
}

// encodeRaw checks raw JSON against the limit and applies the codec.
func (p payloads) encodeRaw(what string, b []byte) ([]byte, error) {
	if len(b) > p.limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(b), p.limit)
	}
	if p.codec == nil {
		return b, nil
	}
	out, err := p.codec.Encode(b)
	if err != nil {
		return nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	return out, nil
}

// raw undoes the codec, returning the stored JSON.
func (p payloads) raw(what string, stored []byte) ([]byte, error) {
	if p.codec == nil || len(stored) == 0 {
		return stored, nil
	}
	b, err := p.codec.Decode(stored)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrDecode, what, err)
	}
	return b, nil
}

// decode undoes the codec and unmarshals into v. The size is checked before
// decoding. An empty payload decodes to the zero value.
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

// sealedPrefix marks an error text sealed by the codec.
const sealedPrefix = "stem-sealed:"

// sealText applies the codec to an error text, so error messages are as
// protected at rest as payloads.
func (p payloads) sealText(s string) string {
	if p.codec == nil || s == "" {
		return s
	}
	b, err := p.codec.Encode([]byte(s))
	if err != nil {
		return "(error text could not be sealed)"
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(b)
}

// openText undoes sealText.
func (p payloads) openText(s string) string {
	if p.codec == nil || !strings.HasPrefix(s, sealedPrefix) {
		return s
	}
	raw, err := base64.StdEncoding.DecodeString(s[len(sealedPrefix):])
	if err != nil {
		return "(sealed error text is malformed)"
	}
	plain, err := p.codec.Decode(raw)
	if err != nil {
		return "(sealed error text does not decode with this codec)"
	}
	return string(plain)
}

// sealInfo returns info with its message sealed.
func (p payloads) sealInfo(info *storage.ErrorInfo) *storage.ErrorInfo {
	if info == nil || p.codec == nil {
		return info
	}
	sealed := *info
	sealed.Message = p.sealText(info.Message)
	return &sealed
}

// errorFrom rebuilds an error from its stored form, opening a sealed
// message; Code keeps errors.Is working for the package's sentinels.
func (p payloads) errorFrom(key string, info *storage.ErrorInfo) error {
	if info == nil {
		return nil
	}
	return &StepError{Key: key, Message: p.openText(info.Message), Code: info.Code}
}

// openAttempts returns attempts with their error texts opened.
func (p payloads) openAttempts(as []Attempt) []Attempt {
	if p.codec == nil {
		return as
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		a.Error = p.openText(a.Error)
		out[i] = a
	}
	return out
}

// NewAESGCMCodec returns a Codec that encrypts payloads with AES-GCM under
// key (16, 24 or 32 bytes), a fresh random nonce per payload.
func NewAESGCMCodec(key []byte) (Codec, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("stem: aes-gcm codec: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("stem: aes-gcm codec: %w", err)
	}
	return aesGCM{aead}, nil
}

type aesGCM struct{ aead cipher.AEAD }

func (c aesGCM) Encode(plain []byte) ([]byte, error) {
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return c.aead.Seal(nonce, nonce, plain, nil), nil
}

func (c aesGCM) Decode(stored []byte) ([]byte, error) {
	n := c.aead.NonceSize()
	if len(stored) < n {
		return nil, errors.New("ciphertext too short")
	}
	return c.aead.Open(nil, stored[:n], stored[n:], nil)
}
