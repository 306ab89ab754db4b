package llm_test

import (
	"fmt"

	"github.com/ioa-nats/ioa/agentkit/llm"
)

// A model's answer in a code fence, with a bare-string next_speaker, is
// repaired into a move.
func ExampleParseAnswer() {
	m, err := llm.ParseAnswer("Sure:\n```json\n{\"type\": \"discussion\", \"content\": \"Over to you.\", \"next_speaker\": \"@writer\"}\n```")
	fmt.Println(m.Type, m.NextSpeaker, m.Content, err)
	_, err = llm.ParseAnswer(`{"type": "conclusion", "content": "The answer is`)
	fmt.Println(err)
	// Output:
	// discussion [writer] Over to you. <nil>
	// the answer's JSON object is cut off
}
