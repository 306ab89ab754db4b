package bus

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	json "github.com/segmentio/encoding/json"
)

// maxDepth bounds JSON nesting; no protocol payload comes close.
const maxDepth = 32

// Codec decodes request bodies strictly, as docs/protocol.md requires: a UTF-8
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

// DecodeLogged decodes what the runtime itself encoded and logged (a chat
// log entry, its inbox copy): a JSON object within twice the size limit (a
// message the referee took has its stamp added, and the chat stream keeps
// entries up to that size), but without Check's scan for duplicate keys and
// depth, which the referee already ran when the message came in and which
// cost as much again as the decoding on every member's copy.
func (c Codec) DecodeLogged(data []byte, v any) error {
	if len(data) > 2*c.limit() {
		return protocol.Errorf(protocol.ErrTooLarge, "logged body of %d bytes is over the limit of %d", len(data), 2*c.limit())
	}
	if err := json.Unmarshal(data, v); err != nil {
		return protocol.Errorf(protocol.ErrInvalid, "%v", err)
	}
	return nil
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
			return protocol.Errorf(protocol.ErrInvalid, "field %q: got %s, want %s", te.Field, jsonKind(te.Value), WantKind(te.Type))
		}
		return protocol.Errorf(protocol.ErrInvalid, "%v", err)
	}
	return nil
}

// jsonKind names the kind of a JSON value from its first byte: the decoder
// gives the value with whatever follows it, in Go quotes (`"5}"`), which is
// no help to a sender.
func jsonKind(value string) string {
	if u, err := strconv.Unquote(value); err == nil {
		value = u
	}
	switch v := strings.TrimSpace(value); {
	case v == "":
		return "nothing"
	case v[0] == '"':
		return "a string"
	case v[0] == '{':
		return "an object"
	case v[0] == '[':
		return "an array"
	case v[0] == 't' || v[0] == 'f':
		return "a boolean"
	case strings.HasPrefix(v, "number"): // the decoder's "number 1e99 overflows int"
		if strings.Contains(v, "overflow") {
			return "a number out of range"
		}
		return "a number"
	case v[0] == 'n':
		return "null"
	default:
		return "a number"
	}
}

// WantKind names the JSON a Go type is decoded from, in the sender's terms
// (not "uint64" or "*protocol.Duration"): "a whole number", "an array of
// strings", `a duration string such as "90s" or "2m"`.
func WantKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[protocol.Duration]() {
		return `a duration string such as "90s" or "2m"`
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		elem := strings.TrimPrefix(strings.TrimPrefix(WantKind(t.Elem()), "a "), "an ")
		if !strings.Contains(elem, " ") { // "strings", "objects"; not "whole numbers of 0 or mores"
			return "an array of " + elem + "s"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another kind of value"
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

// scan finds what encoding/json would accept silently: duplicate keys,
// excessive nesting and trailing data. json.Valid checks the syntax first,
// so the walk below can assume well-formed JSON and stays allocation-light.
func scan(data []byte) error {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		if strings.Contains(err.Error(), "unexpected end of JSON input") || strings.Contains(err.Error(), "from empty input") {
			return protocol.Errorf(protocol.ErrInvalid, "truncated JSON")
		}
		if strings.Contains(err.Error(), "after top-level value") {
			return protocol.Errorf(protocol.ErrInvalid, "trailing data after the JSON object")
		}
		if strings.Contains(err.Error(), "in string") && bytes.ContainsFunc(data, func(r rune) bool { return r < 0x20 }) {
			// The decoder calls a raw tab in a string a bad escape code.
			return protocol.Errorf(protocol.ErrInvalid, `malformed JSON: a string holds a raw control character (a tab or a line break): write it escaped, as \t or \n`)
		}
		return protocol.Errorf(protocol.ErrInvalid, "malformed JSON: %v", err)
	}
	// The keys of the open objects are kept in keys, each object's from its
	// frame's start on, as slices of data: a message's few keys are compared
	// one by one without copying them, and an object with many keys gets a
	// map. Small bodies (every protocol message) allocate nothing here.
	type frame struct {
		object bool
		start  int                 // the object's first key in keys
		index  map[string]struct{} // its keys, once it has more than linearKeys
	}
	var stackBuf [8]frame
	var keyBuf [32][]byte
	stack, keys := stackBuf[:0], keyBuf[:0]
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) >= maxDepth {
				return protocol.Errorf(protocol.ErrInvalid, "JSON nested deeper than %d", maxDepth)
			}
			stack = append(stack, frame{object: c == '{', start: len(keys)})
			expectKey = c == '{'
		case '}', ']':
			keys = keys[:stack[len(stack)-1].start]
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			end := stringEnd(data, i)
			if expectKey {
				top := &stack[len(stack)-1]
				key := data[i+1 : end]
				if bytes.IndexByte(key, '\\') >= 0 {
					var k string
					_ = json.Unmarshal(data[i:end+1], &k) // valid JSON: unescape for comparison
					key = []byte(k)
				}
				var dup bool
				keys, dup = addKey(top.start, &top.index, keys, key)
				if dup {
					return protocol.Errorf(protocol.ErrInvalid, "duplicate key %q", key)
				}
				expectKey = false
			}
			i = end
		}
	}
	return nil
}

// linearKeys is how many keys an object's new key is compared with one by
// one before its keys go into a map.
const linearKeys = 16

// addKey adds key to the object whose keys start at keys[start] (or are in
// *index), and reports whether the object has it already.
func addKey(start int, index *map[string]struct{}, keys [][]byte, key []byte) ([][]byte, bool) {
	if *index == nil {
		own := keys[start:]
		for _, k := range own {
			if bytes.Equal(k, key) {
				return keys, true
			}
		}
		if len(own) < linearKeys {
			return append(keys, key), false
		}
		*index = make(map[string]struct{}, 2*linearKeys)
		for _, k := range own {
			(*index)[string(k)] = struct{}{}
		}
	}
	if _, dup := (*index)[string(key)]; dup {
		return keys, true
	}
	(*index)[string(key)] = struct{}{}
	return keys, false
}

// stringEnd returns the index of the quote that closes the string opening
// at data[start].
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(data) - 1
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
