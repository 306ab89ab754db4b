package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// maxDepth bounds JSON nesting; no protocol payload comes close.
const maxDepth = 32

// Codec decodes request bodies strictly, as PROTOCOL.md requires: a UTF-8
// JSON object within the size limit, no duplicate keys, no null body.
// Unknown fields are ignored, so newer peers can add fields.
type Codec struct {
	// MaxBytes bounds a body; 0 means 64 KiB.
	MaxBytes int
}

// Decode decodes a body that must be present.
func (c Codec) Decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return protocol.Errorf(protocol.ErrInvalid, "empty body: want a JSON object")
	}
	return c.decode(data, v)
}

// DecodeOptional decodes a body on a subject whose fields are all optional:
// an empty body means {}.
func (c Codec) DecodeOptional(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return c.decode(data, v)
}

func (c Codec) limit() int {
	if c.MaxBytes <= 0 {
		return 64 << 10
	}
	return c.MaxBytes
}

func (c Codec) decode(data []byte, v any) error {
	if err := c.Check(data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return protocol.Errorf(protocol.ErrInvalid, "field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		return protocol.Errorf(protocol.ErrInvalid, "%v", err)
	}
	return nil
}

// Check validates a body without decoding it into a type: size, UTF-8, an
// object at the top, syntax, nesting depth and duplicate keys.
func (c Codec) Check(data []byte) error {
	if len(data) > c.limit() {
		return protocol.Errorf(protocol.ErrTooLarge, "body of %d bytes is over the limit of %d", len(data), c.limit())
	}
	if !utf8.Valid(data) {
		return protocol.Errorf(protocol.ErrInvalid, "body is not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		what := "not a JSON object"
		if bytes.Equal(trimmed, []byte("null")) {
			what = "null"
		}
		return protocol.Errorf(protocol.ErrInvalid, "body is %s: want a JSON object", what)
	}
	return scan(data)
}

// scan walks the tokens once to find syntax errors, duplicate keys and
// excessive nesting, which encoding/json would accept silently.
func scan(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		want   bool // object: the next token is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return protocol.Errorf(protocol.ErrInvalid, "truncated JSON")
			}
			return nil
		}
		if err != nil {
			return protocol.Errorf(protocol.ErrInvalid, "malformed JSON: %v", err)
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if top.want {
				if key, ok := tok.(string); ok {
					if _, dup := top.keys[key]; dup {
						return protocol.Errorf(protocol.ErrInvalid, "duplicate key %q", key)
					}
					top.keys[key] = struct{}{}
					top.want = false
					continue
				}
			} else {
				top.want = true // this token is the value
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return protocol.Errorf(protocol.ErrInvalid, "JSON nested deeper than %d", maxDepth)
			}
			obj := tok == json.Delim('{')
			stack = append(stack, frame{object: obj, keys: map[string]struct{}{}, want: obj})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 && dec.More() {
			return protocol.Errorf(protocol.ErrInvalid, "trailing data after the JSON object")
		}
		if len(stack) == 0 {
			if _, err := dec.Token(); err != io.EOF {
				return protocol.Errorf(protocol.ErrInvalid, "trailing data after the JSON object")
			}
			return nil
		}
	}
}

// Encode marshals a reply; protocol types always marshal.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "internal", Message: fmt.Sprintf("encode reply: %v", err)}})
	}
	return b
}

// ErrorBody returns the JSON error body for err.
func ErrorBody(err error) []byte {
	pe := protocol.AsError(err)
	msg := pe.Message
	if msg == "" {
		msg = pe.Code
	}
	return Encode(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: pe.Code, Message: msg}})
}
