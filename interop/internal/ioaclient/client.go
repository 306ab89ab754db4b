// Package ioaclient is what the interop front doors (A2A, MCP) need of a
// running ioa: submit, get and cancel goals on the subjects of one
// identity, search and list agents, and follow a goal's events.
package ioaclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// Client speaks to the registry and the orchestrator.
type Client struct {
	NC   *nats.Conn
	Subj bus.Subjects
	// As is the identity goals are submitted, read and cancelled for: the
	// identity-bound subjects (<p>.goal.submit.<As>), so the orchestrator
	// records it as the goal's submitter. Empty means the plain subjects
	// (the admin's).
	As string
}

func (c *Client) goalSubject(endpoint string) (string, error) {
	s := c.Subj.Goal(endpoint)
	if c.As == "" {
		return s, nil
	}
	return c.Subj.As(s, c.As)
}

// Submit submits a goal without waiting. One with an idempotency key is
// sent again when no answer comes within resendAfter (the request or its
// answer was lost), until ctx ends.
func (c *Client) Submit(ctx context.Context, req protocol.GoalRequest) (protocol.SubmitReply, error) {
	req.Wait = false
	var out protocol.SubmitReply
	if req.IdempotencyKey == "" {
		return out, c.goalRequest(ctx, bus.GoalSubmit, req, &out)
	}
	subject, err := c.goalSubject(bus.GoalSubmit)
	if err != nil {
		return out, err
	}
	return out, explain(bus.RequestAgain(ctx, c.NC, subject, resendAfter, req, &out))
}

// resendAfter is how long Submit waits for an answer before it sends a
// keyed submission again.
const resendAfter = 5 * time.Second

// SubmitWait submits a goal and returns its result once it has ended.
func (c *Client) SubmitWait(ctx context.Context, req protocol.GoalRequest) (protocol.GoalResult, error) {
	req.Wait = true
	var out protocol.GoalResult
	return out, c.goalRequest(ctx, bus.GoalSubmit, req, &out)
}

// Get returns a goal's record.
func (c *Client) Get(ctx context.Context, goalID string) (protocol.GoalStatus, error) {
	var out protocol.GoalStatus
	return out, c.goalRequest(ctx, bus.GoalGet, protocol.GoalIDRequest{GoalID: goalID}, &out)
}

// Cancel cancels a goal and returns its record.
func (c *Client) Cancel(ctx context.Context, goalID string) (protocol.GoalStatus, error) {
	var out protocol.GoalStatus
	return out, c.goalRequest(ctx, bus.GoalCancel, protocol.GoalIDRequest{GoalID: goalID}, &out)
}

func (c *Client) goalRequest(ctx context.Context, endpoint string, in, out any) error {
	subject, err := c.goalSubject(endpoint)
	if err != nil {
		return err
	}
	return explain(bus.Request(ctx, c.NC, subject, in, out))
}

// Search ranks the registry's agents for a query.
func (c *Client) Search(ctx context.Context, req protocol.SearchRequest) ([]protocol.SearchResult, error) {
	var out protocol.SearchReply
	if err := bus.Request(ctx, c.NC, c.Subj.Registry(bus.RegistrySearch), req, &out); err != nil {
		return nil, explain(err)
	}
	return out.Results, nil
}

// Agents lists the registered agents (up to limit; 0 means the registry's
// default page).
func (c *Client) Agents(ctx context.Context, onlineOnly bool, limit int) (protocol.ListReply, error) {
	var out protocol.ListReply
	err := bus.Request(ctx, c.NC, c.Subj.Registry(bus.RegistryList), protocol.ListRequest{Limit: limit, OnlineOnly: onlineOnly}, &out)
	return out, explain(err)
}

// Agent returns one registered agent.
func (c *Client) Agent(ctx context.Context, name string) (protocol.AgentInfo, error) {
	var out protocol.AgentInfo
	err := bus.Request(ctx, c.NC, c.Subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: name}, &out)
	return out, explain(err)
}

// explain turns "nobody answers" into a sentence.
func explain(err error) error {
	if errors.Is(err, protocol.ErrUnavailable) {
		return fmt.Errorf("ioa is not answering (is \"ioa serve\" running?): %w", err)
	}
	return err
}

// Follow calls fn with each event of a goal, from its first one on (they
// are replayed from stream IOA_GOALS, so none is missed however late the
// call), until fn returns false, the goal's result arrives (then fn gets
// an event of the goal's final kind carrying it, and Follow returns it) or
// ctx ends. It needs credentials that may read the stream (admin or
// observer).
func (c *Client) Follow(ctx context.Context, goalID string, fn func(protocol.GoalEvent) bool) (*protocol.GoalResult, error) {
	events, err := c.Subj.GoalEvents(goalID)
	if err != nil {
		return nil, err
	}
	result, err := c.Subj.GoalResult(goalID)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.NC)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := js.Stream(ctx, bus.StreamGoals)
	if err != nil {
		return nil, fmt.Errorf("follow goal %s: stream %s: %w", goalID, bus.StreamGoals, err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events, result}})
	if err != nil {
		return nil, fmt.Errorf("follow goal %s: %w", goalID, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow goal %s: %w", goalID, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("follow goal %s: %w", goalID, err)
		}
		if m.Subject() == result {
			var res protocol.GoalResult
			if err := json.Unmarshal(m.Data(), &res); err != nil {
				return nil, fmt.Errorf("follow goal %s: bad result: %w", goalID, err)
			}
			fn(protocol.GoalEvent{GoalID: goalID, Kind: finalKind(res.Status), Result: &res})
			return &res, nil
		}
		var ev protocol.GoalEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			continue // not ours to judge: the orchestrator wrote it
		}
		if !fn(ev) {
			return nil, nil
		}
	}
}

func finalKind(status string) string {
	switch status {
	case protocol.GoalConcluded:
		return protocol.EventConcluded
	case protocol.GoalCancelled:
		return protocol.EventCancelled
	case protocol.GoalTimedOut:
		return protocol.EventTimedOut
	}
	return protocol.EventFailed
}
