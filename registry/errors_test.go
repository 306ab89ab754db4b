package registry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

// Every bad request gets an error reply with the status in the header and
// the code in the JSON body, and changes nothing.
func TestErrors(t *testing.T) {
	b, s := newRegistry(t, Config{MaxDescriptionBytes: 100, MaxCardBytes: 1000})
	nc := b.Conn()
	register(t, nc, b, card("known", "a known agent"))
	// On a loaded machine the index may lag the acknowledged write a moment.
	for deadline := time.Now().Add(10 * time.Second); s.Len() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}

	cardJSON := func(c protocol.AgentCard) string { return string(bus.Encode(c)) }
	tests := []struct {
		name, endpoint, body string
		status               int
		code                 string
	}{
		{"register empty", bus.RegistryRegister, "", 400, "invalid"},
		{"register null", bus.RegistryRegister, "null", 400, "invalid"},
		{"register array", bus.RegistryRegister, `[{"name":"x","description":"y"}]`, 400, "invalid"},
		{"register string", bus.RegistryRegister, `"hello"`, 400, "invalid"},
		{"register duplicate key", bus.RegistryRegister, `{"name":"x","name":"y","description":"d"}`, 400, "invalid"},
		{"register invalid utf8", bus.RegistryRegister, "{\"name\":\"x\",\"description\":\"\xff\xfe\"}", 400, "invalid"},
		{"register malformed", bus.RegistryRegister, `{"name":"x",`, 400, "invalid"},
		{"register trailing", bus.RegistryRegister, `{"name":"x","description":"d"} {}`, 400, "invalid"},
		{"register wrong type", bus.RegistryRegister, `{"name":5,"description":"d"}`, 400, "invalid"},
		{"register invalid name", bus.RegistryRegister, `{"name":"Bad.Name","description":"d"}`, 400, "invalid"},
		{"register wildcard name", bus.RegistryRegister, `{"name":"a*","description":"d"}`, 400, "invalid"},
		{"register reserved name", bus.RegistryRegister, `{"name":"system","description":"d"}`, 400, "invalid"},
		{"register no description", bus.RegistryRegister, `{"name":"x"}`, 400, "invalid"},
		{"register bad type", bus.RegistryRegister, `{"name":"x","description":"d","type":"robot"}`, 400, "invalid"},
		{"register description too long", bus.RegistryRegister, cardJSON(card("x", strings.Repeat("d", 101))), 413, "too_large"},
		{"register card too large", bus.RegistryRegister, cardJSON(protocol.AgentCard{Name: "x", Description: "d", Tags: []string{strings.Repeat("t", 1000)}}), 413, "too_large"},
		{"get empty", bus.RegistryGet, "", 400, "invalid"},
		{"get null", bus.RegistryGet, "null", 400, "invalid"},
		{"get no name", bus.RegistryGet, `{}`, 400, "invalid"},
		{"get invalid name", bus.RegistryGet, `{"name":"../etc"}`, 400, "invalid"},
		{"get unknown", bus.RegistryGet, `{"name":"nobody"}`, 404, "not_found"},
		{"heartbeat unknown", bus.RegistryHeartbeat, `{"name":"nobody"}`, 404, "not_found"},
		{"heartbeat array", bus.RegistryHeartbeat, `["known"]`, 400, "invalid"},
		{"deregister unknown", bus.RegistryDeregister, `{"name":"nobody"}`, 404, "not_found"},
		{"deregister duplicate key", bus.RegistryDeregister, `{"name":"known","name":"known"}`, 400, "invalid"},
		{"deregister bad incarnation", bus.RegistryDeregister, `{"name":"known","incarnation":"a.b"}`, 400, "invalid"},
		{"list negative offset", bus.RegistryList, `{"offset":-1}`, 400, "invalid"},
		{"list limit too big", bus.RegistryList, `{"limit":100000}`, 400, "invalid"},
		{"list null", bus.RegistryList, `null`, 400, "invalid"},
		{"search empty", bus.RegistrySearch, "", 400, "invalid"},
		{"search no query", bus.RegistrySearch, `{}`, 400, "invalid"},
		{"search blank query", bus.RegistrySearch, `{"query":"  ","queries":[""]}`, 400, "invalid"},
		{"search limit 0", bus.RegistrySearch, `{"query":"x","limit":0}`, 400, "invalid"},
		{"search limit 101", bus.RegistrySearch, `{"query":"x","limit":101}`, 400, "invalid"},
		{"search limit -1", bus.RegistrySearch, `{"query":"x","limit":-1}`, 400, "invalid"},
		{"search bad type", bus.RegistrySearch, `{"query":"x","type":"robot"}`, 400, "invalid"},
		{"search queries not strings", bus.RegistrySearch, `{"queries":[1,2]}`, 400, "invalid"},
		{"search too many queries", bus.RegistrySearch, `{"queries":[` + strings.Repeat(`"q",`, 20) + `"q"]}`, 400, "invalid"},
		{"search oversized", bus.RegistrySearch, `{"query":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, raw(t, nc, b, tt.endpoint, []byte(tt.body)), tt.status, tt.code)
		})
	}
	if n := s.Len(); n != 1 {
		t.Errorf("bad requests changed the registry: %d agents", n)
	}
	// The messages say which limit was hit.
	m := raw(t, nc, b, bus.RegistryRegister, []byte(cardJSON(card("x", strings.Repeat("d", 101)))))
	if msg := m.Header.Get(bus.HeaderError); !strings.Contains(msg, "description") || !strings.Contains(msg, "100") {
		t.Errorf("description limit message %q", msg)
	}
}

// FuzzRegistryRequests sends arbitrary bodies to every endpoint: a reply
// always comes back, it is either a success or a well-formed error, and the
// service keeps serving.
func FuzzRegistryRequests(f *testing.F) {
	fuzzworker.Capture(f)
	b, _ := newRegistry(f, Config{MaxAgentsPerConn: 1 << 20})
	nc := b.Conn()
	register(f, nc, b, card("known", "a known agent that translates text"))
	endpoints := []string{bus.RegistryRegister, bus.RegistryDeregister, bus.RegistryHeartbeat, bus.RegistryGet, bus.RegistryList, bus.RegistrySearch}
	for i, seed := range []string{
		`{"name":"fz","description":"fuzz agent","tags":["a"]}`,
		`{"name":"known"}`,
		`{"query":"translate","limit":5,"tags":["x"],"exclude":["known"]}`,
		`{"offset":1,"limit":2,"online_only":true}`,
		`null`, ``, `[]`, `{"a":1,"a":2}`, "\xff",
	} {
		f.Add(uint8(i), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, ep uint8, body []byte) {
		endpoint := endpoints[int(ep)%len(endpoints)]
		m, err := nc.Request(b.Subjects().Registry(endpoint), body, 10*time.Second)
		if err != nil {
			t.Fatalf("%s %q: no reply: %v", endpoint, body, err)
		}
		if m.Header.Get(bus.HeaderError) != "" {
			var eb protocol.ErrorBody
			if err := json.Unmarshal(m.Data, &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("%s %q: malformed error reply %q", endpoint, body, m.Data)
			}
			if eb.Error.Code == protocol.ErrInternal.Code {
				t.Fatalf("%s %q: internal error %s", endpoint, body, m.Data)
			}
		} else if !json.Valid(m.Data) || !bytes.HasPrefix(m.Data, []byte("{")) {
			t.Fatalf("%s %q: reply is not a JSON object: %q", endpoint, body, m.Data)
		}
	})
}
