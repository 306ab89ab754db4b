// Command go-agent is a custom agent with a Go worker that joins a running
// `ioa serve`: it registers its card, heartbeats, accepts invitations and
// does the tasks it is assigned until interrupted (Ctrl-C), then
// deregisters.
//
//	go run ./examples/go-agent --nats-url nats://127.0.0.1:4222
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set (an OpenTelemetry collector's
// OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318) it exports its turn and
// task spans, which join the trace of the goal they serve.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"unicode"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
)

// Card is how the agent presents itself; the registry matches goals to it
// by meaning, so the description and capabilities say what it does in
// plain words.
var Card = protocol.AgentCard{
	Name:         "reverser",
	Description:  "Reverses text: spells a word or a sentence backwards, letter by letter.",
	Capabilities: []string{"reverse text", "spell backwards", "palindrome check"},
	Type:         protocol.TypeTool,
	Tags:         []string{"text", "example"},
}

func main() {
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = nats.DefaultURL // nats://127.0.0.1:4222, where `ioa serve` listens
	}
	flag.StringVar(&url, "nats-url", url, "NATS server of `ioa serve` [$NATS_URL]")
	creds := flag.String("creds", os.Getenv("NATS_CREDS"), "credentials from `ioa agent add reverser` [$NATS_CREDS]")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, url, *creds); err != nil {
		fmt.Fprintln(os.Stderr, "go-agent:", err)
		os.Exit(1)
	}
}

// run serves the agent on the server at url, with the credentials in creds
// (none for an insecure server), until ctx ends.
func run(ctx context.Context, url, creds string) error {
	// Tracing is off unless the OTEL_* environment names an exporter.
	endTraces, err := telemetry.Setup(ctx, Card.Name)
	if err != nil {
		return err
	}
	defer func() { _ = endTraces(context.Background()) }()
	opts, err := agentkit.CredsOptions(creds)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("go-agent"), nats.MaxReconnects(-1))...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer nc.Close()
	subjects, err := bus.NewSubjects("ioa")
	if err != nil {
		return err
	}
	agent := agentkit.Agent{Card: Card, Worker: agentkit.WorkerFunc(reverse), Policy: rules.New(rules.Config{})}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rt, err := agentkit.NewRuntime(nc, subjects, []agentkit.Agent{agent}, agentkit.WithLogger(log))
	if err != nil {
		return err
	}
	log.Info("serving; Ctrl-C to stop", "agent", Card.Name, "nats", url)
	return rt.Run(ctx)
}

// reverse is the worker. It reverses the text between double or single
// quotes in the task (all of its first paragraph when there are none), and
// when the task asks about a palindrome it says whether the text is one. The
// context is cancelled when the task times out or the chat ends; a long
// worker would watch it.
func reverse(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	own, _, _ := strings.Cut(t.TaskDesc, "\n\n") // later paragraphs carry earlier results
	text := own
	if m := quotedRE.FindStringSubmatch(own); m != nil {
		text = m[1] + m[2]
	}
	if strings.TrimSpace(text) == "" {
		return agentkit.Result{}, errors.New("nothing to reverse")
	}
	r := []rune(text)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	if strings.Contains(strings.ToLower(own), "palindrome") {
		verdict := "is not a palindrome"
		if letters(text) == letters(string(r)) {
			verdict = "is a palindrome"
		}
		return agentkit.Result{Conclusion: fmt.Sprintf("'%s' %s", text, verdict)}, nil
	}
	return agentkit.Result{Conclusion: fmt.Sprintf("'%s' reversed is '%s'", text, string(r))}, nil
}

// quotedRE is the text between double quotes, or between single quotes
// that are not inside a word ("don't" has none).
var quotedRE = regexp.MustCompile(`"([^"]+)"|(?:^|\W)'([^']+)'(?:\W|$)`)

// letters is text in lower case without what is not a letter or digit, as
// palindromes are read ("A man, a plan" ...).
func letters(text string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, text)
}
