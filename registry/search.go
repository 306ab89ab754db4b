package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/registry/search"
	"github.com/ioa-nats/ioa/telemetry"
)

// maxQueryTexts bounds the texts of one search; each is embedded.
const maxQueryTexts = 16

// searchRequest is protocol.SearchRequest with a limit that can tell an
// explicit 0 (an error) from no limit (the default).
type searchRequest struct {
	protocol.SearchRequest
	Limit *int `json:"limit,omitempty"`
}

func (s *Service) search(ctx context.Context, r micro.Request, req *searchRequest) (_ *protocol.SearchReply, err error) {
	// A searcher that is in a goal's trace (a launcher forming its team, a
	// policy's agent_discovery) sends its traceparent along.
	if r != nil && telemetry.Enabled() {
		ctx = telemetry.Extract(ctx, nats.Header(r.Headers()))
	}
	ctx, span := telemetry.Start(ctx, "registry.search", trace.SpanKindServer)
	defer func() {
		telemetry.Fail(span, err)
		span.End()
	}()
	var texts []string
	for _, t := range append([]string{req.Query}, req.Queries...) {
		if strings.TrimSpace(t) != "" {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return nil, protocol.Errorf(protocol.ErrInvalid, "query or queries is required")
	}
	if len(texts) > maxQueryTexts {
		return nil, protocol.Errorf(protocol.ErrInvalid, "%d query texts, at most %d", len(texts), maxQueryTexts)
	}
	limit := search.DefaultLimit
	if req.Limit != nil {
		limit = *req.Limit
		if limit < 1 || limit > s.cfg.MaxResults {
			return nil, protocol.Errorf(protocol.ErrInvalid, "limit %d outside 1..%d", limit, s.cfg.MaxResults)
		}
	}
	switch req.Type {
	case "", protocol.TypeAssistant, protocol.TypeTool, protocol.TypeHuman:
	default:
		return nil, protocol.Errorf(protocol.ErrInvalid, "type %q is not one of assistant, tool, human", req.Type)
	}

	now := time.Now()
	v := s.view
	// Keep takes the read lock per candidate rather than around the whole
	// search, so that a slow (remote) query embedding never holds up the
	// watch loop.
	keep := func(name string) bool {
		v.mu.RLock()
		defer v.mu.RUnlock()
		a, ok := v.agents[name]
		if !ok || slices.Contains(req.Exclude, name) {
			return false
		}
		if req.Type != "" && a.rec.Type != req.Type {
			return false
		}
		for _, t := range req.Tags {
			if !slices.ContainsFunc(a.rec.Tags, func(have string) bool { return strings.EqualFold(have, t) }) {
				return false
			}
		}
		return req.IncludeOffline || v.onlineLocked(name, now, s.cfg.HeartbeatTTL)
	}
	// Type and tags also go to the index, whose vector store (chromem-go)
	// filters by them before ranking.
	t0 := time.Now()
	hits, err := s.index.Search(ctx, search.Query{Texts: texts, Limit: limit, Type: req.Type, Tags: req.Tags, Keep: keep})
	s.cfg.Metrics.Searched(time.Since(t0))
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("ioa.registry.results", len(hits)))
	}
	if errors.Is(err, search.ErrEmptyQuery) {
		return nil, protocol.Errorf(protocol.ErrInvalid, "the query has no words to search for")
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.ErrUnavailable, "search: %v", err)
	}
	reply := &protocol.SearchReply{Results: make([]protocol.SearchResult, 0, len(hits))}
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, h := range hits {
		a, ok := v.agents[h.Name]
		if !ok {
			continue // deregistered during the search
		}
		reply.Results = append(reply.Results, protocol.SearchResult{
			Name:         h.Name,
			Description:  a.rec.Description,
			Capabilities: nonNil(a.rec.Capabilities),
			Type:         a.rec.Type,
			Tags:         nonNil(a.rec.Tags),
			Score:        h.Score,
			Match:        h.Match,
			Online:       v.onlineLocked(h.Name, now, s.cfg.HeartbeatTTL),
		})
	}
	return reply, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
