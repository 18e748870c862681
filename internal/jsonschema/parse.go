package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxDepth bounds the nesting of documents, as encoding/json does.
const maxDepth = 10000

// kind is the JSON type of a value.
type kind uint8

const (
	kindNull kind = iota
	kindBoolean
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

// value is a parsed JSON value. Objects keep their members in document
// order, duplicates included, so that problems are reported in the order
// a reader meets them.
type value struct {
	kind    kind
	boolean bool
	text    string // the literal of a number, the contents of a string
	raw     string // a string as written, quotes and escapes included
	items   []*value
	members []member
}

type member struct {
	key   string
	value *value
}

// parseJSON parses exactly one JSON value, with nothing but whitespace
// around it.
func parseJSON(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &parser{dec: dec, data: data}
	v, err := p.value(0)
	if err == io.EOF {
		return nil, errors.New("no JSON value")
	}
	if err != nil {
		return nil, withOffset(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			rest := data[end:]
			end += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
			return nil, fmt.Errorf("data after the JSON value (at offset %d)", end)
		}
		return nil, withOffset(err)
	}
	return v, nil
}

// withOffset adds where a syntax error is to its message.
func withOffset(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w (at offset %d)", err, se.Offset)
	}
	if err == io.ErrUnexpectedEOF {
		return errors.New("unexpected end of JSON input")
	}
	return err
}

type parser struct {
	dec  *json.Decoder
	data []byte
}

func (p *parser) value(depth int) (*value, error) {
	dec := p.dec
	before := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF && depth > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch tok := tok.(type) {
	case nil:
		return &value{kind: kindNull}, nil
	case bool:
		return &value{kind: kindBoolean, boolean: tok}, nil
	case json.Number:
		return &value{kind: kindNumber, text: string(tok)}, nil
	case string:
		// Between the previous token and this one there is only
		// whitespace and the separators Token consumes.
		raw := bytes.TrimLeft(p.data[before:dec.InputOffset()], " \t\r\n,:")
		return &value{kind: kindString, text: tok, raw: string(raw)}, nil
	case json.Delim:
		if depth >= maxDepth {
			return nil, fmt.Errorf("nested more than %d deep", maxDepth)
		}
		switch tok {
		case '[':
			v := &value{kind: kindArray}
			for dec.More() {
				item, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, eofIsUnexpected(err)
			}
			return v, nil
		case '{':
			v := &value{kind: kindObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, eofIsUnexpected(err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string (at offset %d)", dec.InputOffset())
				}
				item, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				v.members = append(v.members, member{key, item})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, eofIsUnexpected(err)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected %v (at offset %d)", tok, dec.InputOffset())
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// toAny converts a parsed value to the form encoding/json decodes into an
// interface (with json.Number for numbers); used to read schemas.
func (v *value) toAny() any {
	switch v.kind {
	case kindBoolean:
		return v.boolean
	case kindNumber:
		return json.Number(v.text)
	case kindString:
		return v.text
	case kindArray:
		a := make([]any, len(v.items))
		for i, x := range v.items {
			a[i] = x.toAny()
		}
		return a
	case kindObject:
		m := make(map[string]any, len(v.members))
		for _, mb := range v.members {
			m[mb.key] = mb.value.toAny()
		}
		return m
	}
	return nil
}
