package main

import (
	"bytes"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	const want = "concluded\n" +
		"Count the words in 'the quick brown fox': 4 words\n" +
		"Convert 'hello nats' to upper case: HELLO NATS\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
