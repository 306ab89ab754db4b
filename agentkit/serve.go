package agentkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
)

// serveRequests answers the agent's invite and launch requests. Invitations
// are answered at once; each launch runs in its own goroutine because team-up
// takes a registry search and the orchestrator's invitations.
func (a *agentState) serveRequests(ctx context.Context, in <-chan *nats.Msg, rt *router) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-in:
			as, err := a.rt.subj.ParseAgent(m.Subject)
			if err != nil {
				a.reply(m, nil, err)
				continue
			}
			switch as.Kind {
			case bus.AgentInvite:
				resp, err := a.invite(m, rt)
				a.reply(m, resp, err)
			case bus.AgentLaunch:
				select {
				case a.launches <- struct{}{}:
					a.rt.wg.Go(func() {
						defer func() { <-a.launches }()
						resp, err := a.launch(ctx, m)
						a.reply(m, resp, err)
					})
				default:
					a.reply(m, nil, protocol.Errorf(protocol.ErrRateLimited, "%s is already launching %d goals", a.Card.Name, cap(a.launches)))
				}
			default:
				a.reply(m, nil, protocol.Errorf(protocol.ErrNotFound, "no endpoint %s", m.Subject))
			}
		}
	}
}

// reply answers a request; a publish without a reply subject gets none.
func (a *agentState) reply(m *nats.Msg, resp any, err error) {
	if m.Reply == "" {
		if err != nil {
			a.log.Warn("request failed", "subject", m.Subject, "err", err)
		}
		return
	}
	var out *nats.Msg
	if err != nil {
		out = bus.ErrorMsg(m.Reply, err)
	} else {
		out = &nats.Msg{Subject: m.Reply, Data: bus.Encode(resp)}
	}
	if err := a.rt.nc.PublishMsg(out); err != nil {
		a.log.Warn("reply failed", "subject", m.Subject, "err", err)
	}
}

func (a *agentState) invite(m *nats.Msg, rt *router) (*protocol.InviteReply, error) {
	var inv protocol.InviteRequest
	if err := a.rt.opts.codec.Decode(m.Data, &inv); err != nil {
		return nil, err
	}
	if err := protocol.CheckID("comm_id", inv.CommID); err != nil {
		return nil, err
	}
	a.log.Info("invited", "comm_id", inv.CommID, "goal_id", inv.GoalID, "launcher", inv.Launcher)
	rt.invited(inv)
	return &protocol.InviteReply{Accept: true}, nil
}

func (a *agentState) launch(ctx context.Context, m *nats.Msg) (_ *protocol.LaunchReply, err error) {
	// The orchestrator sends the goal's traceparent: team-up is a span of
	// the goal's trace, with the policy's searches and model calls under it.
	ctx, span := telemetry.StartAgent(telemetry.Extract(ctx, m.Header), telemetry.OpInvokeAgent, a.Card.Name, "")
	defer func() {
		telemetry.Fail(span, err)
		span.End()
	}()
	span.SetName("team_up " + a.Card.Name)
	var req protocol.LaunchRequest
	if err := a.rt.opts.codec.Decode(m.Data, &req); err != nil {
		return nil, err
	}
	if err := protocol.CheckID("goal_id", req.GoalID); err != nil {
		return nil, err
	}
	if req.Goal == "" {
		return nil, protocol.Errorf(protocol.ErrInvalid, "goal is required")
	}
	if a.Person() {
		return nil, protocol.Errorf(protocol.ErrInvalid, "%s is a person: it takes part in chats but does not launch goals", a.Card.Name)
	}
	for _, n := range req.Team {
		if err := protocol.CheckName("team member", n); err != nil {
			return nil, err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, a.rt.opts.policyTimeout)
	dec, err := safely(func() (TeamUpDecision, error) {
		return a.Policy.TeamUp(pctx, TeamUpRequest{
			Self: a.Card, GoalID: req.GoalID, Goal: req.Goal, Team: slices.Clone(req.Team),
			MaxTurns: req.MaxTurns, Depth: req.Depth, Registry: a.searcher,
		})
	})
	cancel()
	if err != nil {
		a.log.Error("team-up policy failed", "goal_id", req.GoalID, "err", err)
		if isProtocolError(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			// This replica is stopping: another one (or this agent
			// restarted) takes the orchestrator's next attempt.
			return nil, protocol.Errorf(protocol.ErrUnavailable, "team-up: %s is stopping; send again", a.Card.Name)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, bus.ErrNoResponders) {
			// The registry or the model did not answer in time: the
			// orchestrator asks again (a 503), maybe another replica.
			return nil, protocol.Errorf(protocol.ErrUnavailable, "team-up: %v", err)
		}
		return nil, protocol.Errorf(protocol.ErrInternal, "team-up: %v", err)
	}
	members := []string{a.Card.Name}
	for _, n := range dec.Members {
		if err := protocol.CheckName("member", n); err != nil {
			return nil, protocol.Errorf(protocol.ErrInternal, "team-up policy chose a bad member: %v", err)
		}
		if !slices.Contains(members, n) {
			members = append(members, n)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, a.rt.opts.teamupTimeout)
	defer cancel()
	var out protocol.TeamupReply
	err = bus.Request(tctx, a.rt.nc, a.bound(a.rt.subj.Teamup()), protocol.TeamupRequest{
		GoalID: req.GoalID, Launcher: a.Card.Name, Members: members, Name: dec.Name,
	}, &out)
	if err != nil {
		if isProtocolError(err) {
			return nil, err
		}
		return nil, protocol.Errorf(protocol.ErrUnavailable, "teamup: %v", err)
	}
	a.log.Info("launched", "goal_id", req.GoalID, "comm_id", out.CommID, "members", members)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrGoalID.String(req.GoalID), telemetry.AttrConversation.String(out.CommID))
	}
	return &protocol.LaunchReply{CommID: out.CommID}, nil
}

// natsSearcher is the Searcher a runtime gives its policies.
type natsSearcher struct{ rt *Runtime }

// Search asks the registry; a transient failure (no answer while this
// connection moves to another server, a registry restarting) is asked
// again, up to searchAttempts times while ctx lasts.
func (s *natsSearcher) Search(ctx context.Context, req protocol.SearchRequest) ([]protocol.SearchResult, error) {
	pace := backoff.New(100*time.Millisecond, time.Second)
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, s.rt.opts.requestTimeout)
		var out protocol.SearchReply
		err := bus.RequestHeader(rctx, s.rt.nc, s.rt.subj.Registry(bus.RegistrySearch), telemetry.Inject(ctx, nil), req, &out)
		cancel()
		if err == nil {
			return out.Results, nil
		}
		if !transient(err) || attempt == searchAttempts || !pace.Wait(ctx) {
			return nil, fmt.Errorf("registry search: %w", err)
		}
	}
}

// searchAttempts bounds how often one registry search is asked.
const searchAttempts = 3
