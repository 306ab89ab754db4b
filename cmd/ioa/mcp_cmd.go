package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop/mcp"
)

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve ioa as an MCP server over stdio, for IDEs and desktop assistants",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout, so an MCP client
(an IDE, a desktop assistant) can hand goals to a team of ioa agents. Its tools:

  submit_goal    submit a goal and wait for its result (conclusion, status, turns)
  goal_status    a goal's status, team and result
  cancel_goal    cancel a goal and its nested goals
  search_agents  the registered agents that can do something, best first
  list_agents    every registered agent

It reaches a running ioa like the other client commands (--nats-url, --creds, or
the admin credentials of --data-dir). With client credentials (ioa agent add NAME
--role client) goals are submitted, read and cancelled as NAME. Logs go to stderr.

It reads one JSON-RPC message a line. A line that is not JSON gets a parse
error reply (-32700), one that is not a JSON-RPC 2.0 message an invalid
request reply (-32600), and the session goes on. At the end of the input it
writes the replies still due, then exits 0.`,
		Example: `  ioa mcp --data-dir /path/to/data
  ioa mcp --nats-url nats://host:4222 --creds ide.creds
  # an MCP client's configuration: {"command": "ioa", "args": ["mcp", "--creds", "/path/ide.creds"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			as := ""
			switch c.id.Role {
			case auth.Admin:
			case auth.Client, auth.Agent:
				as = c.id.Name
			default:
				return fmt.Errorf("the credentials are %s's, an %s: they cannot submit goals (use a client's: ioa agent add NAME --role client)", c.id.Name, c.id.Role)
			}
			srv := mcp.NewServer(c.nc, c.subj, mcp.ServerOptions{As: as, Version: version})
			// A bad line gets an error reply, not the end of the session.
			t := &mcp.LineTransport{Reader: cmd.InOrStdin(), Writer: cmd.OutOrStdout()}
			err = srv.Run(cmd.Context(), t)
			if err == nil || errors.Is(err, io.EOF) || cmd.Context().Err() != nil {
				return nil
			}
			return fmt.Errorf("mcp: %w", err)
		},
	}
	configs.AddFlags(cmd.Flags())
	return cmd
}
