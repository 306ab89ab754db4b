package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
)

// listPage is how many cards one registry.list request asks for.
const listPage = 100

func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List, show and search the agents in the registry",
		Example: `  ioa agents ls --online
  ioa agents get calculator
  ioa agents search "convert kilometres to miles" --limit 5`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAgentsLsCmd(), newAgentsGetCmd(), newAgentsSearchCmd())
	return cmd
}

func newAgentsLsCmd() *cobra.Command {
	var online, asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the registered agents",
		Example: `  ioa agents ls
  ioa agents ls --online
  ioa agents ls --json | jq -r '.agents[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			all, err := listAgents(cmd.Context(), c, online)
			if err != nil {
				return err
			}
			if all.Agents == nil {
				all.Agents = []protocol.AgentInfo{}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, all)
			}
			if len(all.Agents) == 0 {
				fmt.Fprintln(out, "no agents registered")
				return nil
			}
			opt := renderOptionsFor(out)
			p := palette{opt.Color}
			tb := table{pal: p}
			tb.header("NAME", "TYPE", "ONLINE", "DESCRIPTION")
			for _, a := range all.Agents {
				tb.add(a.Name, firstNonEmpty(a.Type, "-"), onlineMark(p, a.Online),
					trimLine(firstLine(a.Description), descWidth(opt, 30+len(a.Name))))
			}
			return tb.write(out)
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&online, "online", false, "only agents that are online")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the registry's reply as JSON")
	return cmd
}

// listAgents reads the whole registry, a page at a time.
func listAgents(ctx context.Context, c *clientConn, online bool) (protocol.ListReply, error) {
	var all protocol.ListReply
	for {
		var page protocol.ListReply
		req := protocol.ListRequest{Offset: len(all.Agents), Limit: listPage, OnlineOnly: online}
		if err := c.request(ctx, c.subj.Registry(bus.RegistryList), req, &page); err != nil {
			return all, fmt.Errorf("registry list: %w", err)
		}
		all.Agents = append(all.Agents, page.Agents...)
		all.Total = page.Total
		if len(page.Agents) == 0 || len(all.Agents) >= page.Total {
			return all, nil
		}
	}
}

func newAgentsGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"show"},
		Short:   "Show an agent's card and whether it is online",
		Example: `  ioa agents get calculator
  ioa agents get calculator --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := protocol.CheckName("agent name", args[0]); err != nil {
				return plainError{protocol.AsError(err).Message, err}
			}
			return show(cmd, asJSON, func(c *clientConn) string { return c.subj.Registry(bus.RegistryGet) },
				protocol.NameRequest{Name: args[0]}, writeAgent)
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the card as JSON")
	return cmd
}

func writeAgent(w io.Writer, p palette, a protocol.AgentInfo) {
	tb := table{pal: p}
	row := func(k, v string) {
		if v != "" {
			tb.add(p.dim(k), v)
		}
	}
	row("name:", p.bold(a.Name))
	row("type:", firstNonEmpty(a.Type, "-"))
	online := onlineMark(p, a.Online)
	if !a.LastSeen.IsZero() {
		online += p.dim(" (last seen " + a.LastSeen.Local().Format(time.DateTime) + ")")
	}
	row("online:", online)
	row("capabilities:", joinItems(a.Capabilities))
	row("tags:", strings.Join(a.Tags, ", "))
	if a.NestedTeams {
		row("nested teams:", "yes")
	}
	if a.AutoJoin {
		row("joins teams:", "without an invitation (auto_join)")
	}
	if a.MaxConcurrency > 0 {
		row("max concurrency:", fmt.Sprint(a.MaxConcurrency))
	}
	keys := make([]string, 0, len(a.Metadata))
	for k := range a.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		row("metadata."+k+":", a.Metadata[k])
	}
	_ = tb.write(w)
	fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(a.Description))
}

func newAgentsSearchCmd() *cobra.Command {
	var (
		limit                  int
		asJSON, includeOffline bool
		agentType              string
		tags, exclude          []string
	)
	cmd := &cobra.Command{
		Use:   `search "query"`,
		Short: "Find agents by what they can do, ranked by the registry",
		Example: `  ioa agents search "convert kilometres to miles"
  ioa agents search "write a report" --limit 3 --include-offline
  ioa agents search "count words" --type tool --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			query := strings.TrimSpace(strings.Join(args, " "))
			if query == "" {
				return fmt.Errorf(`say what to search for: ioa agents search "query"`)
			}
			if limit < 1 || limit > 100 {
				return fmt.Errorf("--limit %d must be between 1 and 100", limit)
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			req := protocol.SearchRequest{Query: query, Limit: limit, IncludeOffline: includeOffline, Type: agentType, Tags: tags, Exclude: exclude}
			var reply protocol.SearchReply
			if err := c.request(cmd.Context(), c.subj.Registry(bus.RegistrySearch), req, &reply); err != nil {
				return fmt.Errorf("registry search: %w", err)
			}
			if reply.Results == nil {
				reply.Results = []protocol.SearchResult{}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, reply)
			}
			if len(reply.Results) == 0 {
				fmt.Fprintln(out, "no agent matches")
				return nil
			}
			opt := renderOptionsFor(out)
			p := palette{opt.Color}
			tb := table{pal: p}
			tb.header("SCORE", "MATCH", "NAME", "TYPE", "ONLINE", "DESCRIPTION")
			for _, r := range reply.Results {
				tb.add(fmt.Sprintf("%.3f", r.Score), fmt.Sprintf("%.3f", r.Match), r.Name, firstNonEmpty(r.Type, "-"), onlineMark(p, r.Online),
					trimLine(firstLine(r.Description), descWidth(opt, 45+len(r.Name))))
			}
			if err := tb.write(out); err != nil {
				return err
			}
			if note := weakMatchNote(reply.Results, c.cfg.Registry.MinMatch); note != "" {
				fmt.Fprintln(out, p.yellow(note))
			}
			return nil
		},
	}
	configs.AddFlags(cmd.Flags())
	f := cmd.Flags()
	f.IntVarP(&limit, "limit", "n", 10, "how many agents at most (1 to 100)")
	f.BoolVar(&includeOffline, "include-offline", false, "include agents that are offline")
	f.StringVar(&agentType, "type", "", "only agents of this type: assistant, tool or human")
	f.StringSliceVar(&tags, "tag", nil, "only agents with all these tags")
	f.StringSliceVar(&exclude, "exclude", nil, "leave out these agents")
	f.BoolVar(&asJSON, "json", false, "print the registry's reply as JSON")
	return cmd
}

// weakMatchNote says when no result matches well enough for a launcher to
// give it a task (registry.min_match; 0 turns the check off): SCORE only
// ranks, so a top score of 1.000 may still be no fit at all.
func weakMatchNote(results []protocol.SearchResult, minMatch float64) string {
	if len(results) == 0 || minMatch <= 0 {
		return ""
	}
	best := 0.0
	for _, r := range results {
		best = max(best, r.Match)
	}
	if best >= minMatch {
		return ""
	}
	return fmt.Sprintf("no agent matches well enough to be picked (best match %.3f < %.2f, registry.min_match)", best, minMatch)
}

func onlineMark(p palette, online bool) string {
	if online {
		return p.green("yes")
	}
	return p.dim("no")
}

// descWidth is the room left for a description after the other columns.
func descWidth(opt renderOptions, used int) int {
	w := opt.Width
	if w <= 0 {
		w = 100
	}
	return max(w-used, 30)
}

// joinItems joins a card's list for reading: with "; " when an item has a
// comma of its own ("round, double or halve a number"), else with ", ".
func joinItems(items []string) string {
	sep := ", "
	if slices.ContainsFunc(items, func(s string) bool { return strings.Contains(s, ",") }) {
		sep = "; "
	}
	return strings.Join(items, sep)
}
