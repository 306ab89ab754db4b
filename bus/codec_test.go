package bus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func TestCodecRejectsWhatProtocolForbids(t *testing.T) {
	c := bus.Codec{MaxBytes: 400}
	type body struct {
		Name  string `json:"name"`
		Limit int    `json:"limit"`
	}
	for _, tc := range []struct {
		in   string
		want *protocol.Error
	}{
		{``, protocol.ErrInvalid},
		{`   `, protocol.ErrInvalid},
		{`null`, protocol.ErrInvalid},
		{`[]`, protocol.ErrInvalid},
		{`"text"`, protocol.ErrInvalid},
		{`42`, protocol.ErrInvalid},
		{`{"name":"a","name":"b"}`, protocol.ErrInvalid},
		{`{"a":{"x":1,"x":2}}`, protocol.ErrInvalid},
		{"{\"name\":\"\xff\"}", protocol.ErrInvalid},
		{`{"name":"a"`, protocol.ErrInvalid},
		{`{"name":"a"} {}`, protocol.ErrInvalid},
		{`{"limit":"ten"}`, protocol.ErrInvalid},
		{`{"limit":1e400}`, protocol.ErrInvalid},
		{`{"limit":99999999999999999999999}`, protocol.ErrInvalid},
		{strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40), protocol.ErrInvalid},
		{`{"name":"` + strings.Repeat("x", 400) + `"}`, protocol.ErrTooLarge},
	} {
		var v body
		err := c.Decode([]byte(tc.in), &v)
		if !errors.Is(err, tc.want) {
			t.Errorf("Decode(%.40q) = %v, want %s", tc.in, err, tc.want.Code)
		}
	}
	// The error says what was wrong in words a sender can act on.
	for in, want := range map[string]string{
		`{"limit":"ten"}`:                `field "limit": got a string, want a whole number`,
		`{"name":5}`:                     `field "name": got a number, want a string`,
		`{"name":[1]}`:                   `field "name": got an array, want a string`,
		`{"name":"a"`:                    `truncated JSON`,
		`{"limit":99999999999999999999}`: `field "limit": got a number out of range, want a whole number`,
		`{"seq":-1}`:                     `field "seq": got a number, want a whole number of 0 or more`,
		`{"every":30}`:                   `field "every": got a number, want a duration string such as "90s" or "2m"`,
		`{"tags":"x"}`:                   `field "tags": got a string, want an array of strings`,
		"{\"name\":\"a\tb\"}":            `a string holds a raw control character (a tab or a line break): write it escaped, as \t or \n`,
	} {
		var v struct {
			body
			Seq   uint64             `json:"seq"`
			Every *protocol.Duration `json:"every"`
			Tags  []string           `json:"tags"`
		}
		if err := c.Decode([]byte(in), &v); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want %q", in, err, want)
		}
	}
	var v body
	if err := c.Decode([]byte(` {"name":"ok","limit":3,"unknown":[1,{"x":null}]} `), &v); err != nil || v.Name != "ok" || v.Limit != 3 {
		t.Fatalf("valid body: %+v %v", v, err)
	}
	// Keys repeated in different objects are fine.
	if err := c.Decode([]byte(`{"a":{"x":1},"b":{"x":1}}`), &struct{}{}); err != nil {
		t.Fatalf("same key in sibling objects: %v", err)
	}
	if err := c.DecodeOptional(nil, &v); err != nil {
		t.Fatalf("optional empty body: %v", err)
	}
	if err := c.DecodeOptional([]byte("null"), &v); err == nil {
		t.Fatal("optional body accepted null")
	}
}

func FuzzCodec(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"\\u0061":1,"a":2}`, `{"a":[{"b":1,"b":2}]}`, `{"a":"x\\"y","b":1}`, `null`, `[1,2]`, `{"a":[{"b":{}}]}`, "{\"\xff\":1}", `{"a":"\u0000"}`} {
		f.Add([]byte(s))
	}
	c := bus.Codec{MaxBytes: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v map[string]any
		err := c.Decode(data, &v)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || (pe.Status != 400 && pe.Status != 413) {
				t.Fatalf("error is not a protocol 400/413: %v", err)
			}
			if strings.Contains(err.Error(), "duplicate key") && !refHasDuplicate(data) {
				t.Fatalf("refused a duplicate key that is not there: %q: %v", data, err)
			}
			return
		}
		// Anything accepted is a JSON object that encoding/json also accepts,
		// and has no duplicate key by a slow reference walk.
		if v == nil || !json.Valid(data) {
			t.Fatalf("accepted %q", data)
		}
		if refHasDuplicate(data) {
			t.Fatalf("accepted a duplicate key: %q", data)
		}
	})
}

// Objects with more keys than are compared one by one, and keys of nested
// objects beside their parent's, are told apart as they should be.
func TestCodecDuplicateKeysInLargeAndNestedObjects(t *testing.T) {
	c := bus.Codec{}
	object := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `}`)
		return b.String()
	}
	for in, dup := range map[string]bool{
		object(40, `"end":1`):                           false,
		object(40, `"k0":1`):                            true, // first key, seen before the map
		object(40, `"k39":1`):                           true, // last key, seen after
		object(40, `"k\u0030":1`):                       true, // escaped, after the map
		object(15, `"\u006b3":1`):                       true, // escaped, before it
		`{"a":1,"o":` + object(40, `"a":1`) + `,"b":2}`: false,
		`{"a":1,"o":` + object(40, `"a":1`) + `,"a":2}`: true, // the parent's keys outlive the child's
		`{"a":[` + object(3, `"x":1`) + `,` + object(20, `"x":1`) + `],"x":1}`: false,
		`{"a":[` + object(3, `"x":1`) + `,` + object(20, `"k7":1`) + `]}`:      true,
	} {
		err := c.Decode([]byte(in), &map[string]any{})
		if got := err != nil; got != dup || (dup && !strings.Contains(err.Error(), "duplicate key")) {
			t.Errorf("Decode(%.60q...) = %v, want a duplicate key: %v", in, err, dup)
		}
	}
}

// refHasDuplicate is a slow, obviously right duplicate-key check.
func refHasDuplicate(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			top := stack[n-1]
			if top.wantKey {
				if k, ok := tok.(string); ok {
					if top.keys[k] {
						return true
					}
					top.keys[k] = true
					top.wantKey = false
					continue
				}
			} else {
				top.wantKey = true
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// DecodeLogged skips the strict scan for what the runtime wrote itself, but
// still bounds the size and refuses what is not JSON.
func TestCodecDecodeLogged(t *testing.T) {
	c := bus.Codec{MaxBytes: 100}
	var m protocol.AgentMessage
	if err := c.DecodeLogged([]byte(`{"type":"discussion","seq":3,"comm_id":"c1"}`), &m); err != nil || m.Seq != 3 || m.CommID != "c1" {
		t.Fatalf("valid: %+v, %v", m, err)
	}
	// A message within the limit, stamped by the referee, is over it: the
	// stamp has room (twice the limit, as the chat stream keeps).
	if err := c.DecodeLogged([]byte(`{"content":"`+strings.Repeat("x", 150)+`"}`), &m); err != nil {
		t.Errorf("a stamped message over the limit: %v", err)
	}
	for in, want := range map[string]*protocol.Error{
		`{"type":"discussion"`:                           protocol.ErrInvalid,
		`{"seq":"three"}`:                                protocol.ErrInvalid,
		`{"content":"` + strings.Repeat("x", 200) + `"}`: protocol.ErrTooLarge,
	} {
		if err := c.DecodeLogged([]byte(in), &m); !errors.Is(err, want) {
			t.Errorf("DecodeLogged(%.30q) = %v, want %v", in, err, want)
		}
	}
}

// An outbox request as agents send it: the referee decodes one per turn.
var outboxBody = []byte(`{"id":"m-123","type":"discussion","content":"Counted 12 apples in the basket.","next_speaker":["coordinator"]}`)

func BenchmarkCodecDecodeMessage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var m protocol.AgentMessage
		if err := (bus.Codec{}).Decode(outboxBody, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCodecCheck(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := (bus.Codec{}).Check(outboxBody); err != nil {
			b.Fatal(err)
		}
	}
}
