package faulttest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wire is an agent the test drives by hand over plain NATS: it accepts
// invitations, launches by teaming up with team, and says nothing unless
// the test makes it.
type wire struct {
	t    testing.TB
	nc   *nats.Conn
	subj bus.Subjects
	name string
	team []string
}

func newWire(t testing.TB, s *stack, name string, team ...string) *wire {
	t.Helper()
	nc, err := s.b.NewConn("wire-" + name)
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{t: t, nc: nc, subj: s.subj, name: name, team: team}
	card := protocol.AgentCard{Name: name, Description: "a hand-driven test agent " + name, Type: protocol.TypeTool}
	if err := request(nc, s.subj.Registry(bus.RegistryRegister), card, nil); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	invite, _ := s.subj.AgentInviteSubject(name)
	launch, _ := s.subj.AgentLaunchSubject(name)
	if _, err := nc.Subscribe(invite, func(m *nats.Msg) { _ = m.Respond(bus.Encode(protocol.InviteReply{Accept: true})) }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(launch, w.onLaunch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *wire) onLaunch(m *nats.Msg) {
	var req protocol.LaunchRequest
	_ = json.Unmarshal(m.Data, &req)
	go func() {
		var reply protocol.TeamupReply
		err := request(w.nc, w.subj.Teamup(), protocol.TeamupRequest{GoalID: req.GoalID, Launcher: w.name, Members: w.team}, &reply)
		if err != nil {
			_ = m.RespondMsg(bus.ErrorMsg(m.Reply, err))
			return
		}
		_ = m.Respond(bus.Encode(protocol.LaunchReply{CommID: reply.CommID}))
	}()
}

// send posts m to the agent's outbox for comm.
func (w *wire) send(comm string, m protocol.AgentMessage) (protocol.SendReply, error) {
	subject, err := w.subj.Outbox(w.name, comm)
	if err != nil {
		return protocol.SendReply{}, err
	}
	var r protocol.SendReply
	err = request(w.nc, subject, m, &r)
	return r, err
}

// startChat submits a goal launched by w and returns its goal and comm ids.
func (w *wire) startChat(t testing.TB, s *stack, goal string) (string, string) {
	t.Helper()
	id := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: goal, Launcher: w.name})
	var comm string
	waitFor(t, 20*time.Second, "the chat of "+id, func() bool {
		st, err := goalGet(s.nc, s.subj, id)
		comm = st.CommID
		return err == nil && comm != ""
	})
	return id, comm
}

func jsSubjectFilter(subject string) jetstream.StreamInfoOpt {
	return jetstream.WithSubjectFilter(subject)
}
