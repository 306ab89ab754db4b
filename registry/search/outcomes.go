package search

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Outcome is one finished task of an agent: evidence of what it can do.
type Outcome struct {
	// Task is the text of the task the agent was given.
	Task string
	// OK is true when the agent concluded the task, false when it failed.
	OK bool
	// At is when the task finished (zero: now).
	At time.Time
}

// Outcome learning extends a card with the tasks its agent concluded: their
// words join the card's description in the lexical view and in its vector,
// so a task that comes back in new words finds the agent that did it through
// whichever words the two wordings share. Only the latest MaxOutcomes
// outcomes count, and only those younger than MaxOutcomeAge; a failure takes
// back the concluded tasks it resembles (the same words, or a cosine of
// their vectors above failureSim), and adds nothing. So failures alone change
// no ranking, and with no outcomes the index ranks by the cards alone.
var (
	learnedLexWeight   = 0.5
	learnedDenseWeight = float32(0.5)
)

const (
	// MaxOutcomes is how many outcomes of an agent count (the latest).
	MaxOutcomes = 32
	// MaxOutcomeAge is the age past which an outcome no longer counts.
	MaxOutcomeAge = 90 * 24 * time.Hour
	// failureSim is the cosine between a failed task and a concluded one
	// above which the failure takes the concluded task back.
	failureSim = 0.8
)

// SetOutcomes replaces the outcomes of agent name (oldest first) and
// re-indexes its card with the tasks it concluded. The agent need not have a
// card yet: the outcomes wait for it. An empty outs forgets them.
func (ix *Index) SetOutcomes(ctx context.Context, name string, outs []Outcome, now time.Time) error {
	if strings.TrimSpace(name) == "" {
		return ErrInvalidDoc
	}
	learned := ix.learn(outs, now)
	ix.mu.Lock()
	same := slices.Equal(learned, ix.learned[name])
	if len(learned) == 0 {
		delete(ix.learned, name)
	} else {
		ix.learned[name] = learned
	}
	id, ok := ix.byName[name]
	var d Doc
	if ok {
		d = ix.slots[id].doc
	}
	ix.mu.Unlock()
	if same || !ok {
		return nil
	}
	return ix.Upsert(ctx, d)
}

// learn returns the concluded tasks of outs that count.
func (ix *Index) learn(outs []Outcome, now time.Time) []string {
	if len(outs) > MaxOutcomes {
		outs = outs[len(outs)-MaxOutcomes:]
	}
	type done struct {
		text string
		vec  []float32
	}
	var kept []done
	vec := func(text string) []float32 {
		v := make([]float32, ix.an.lex.Dim())
		finishLocal(ix.an.lex, v, addTerms(ix.an.lex, v, ix.an.analyze(text), 1))
		return v
	}
	for _, o := range outs {
		text := learnedText(o.Task)
		if text == "" || (!o.At.IsZero() && now.Sub(o.At) > MaxOutcomeAge) {
			continue
		}
		v := vec(text)
		if o.OK {
			kept = append(kept, done{text, v})
			continue
		}
		kept = slices.DeleteFunc(kept, func(d done) bool {
			return strings.EqualFold(d.text, text) || (!isZero(v) && float64(dot32(d.vec, v)) > failureSim)
		})
	}
	out := make([]string, 0, len(kept))
	for _, d := range kept {
		if !slices.Contains(out, d.text) {
			out = append(out, d.text)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// numberRE is a number standing alone in a task ("42", "3,200", "16.09").
var numberRE = regexp.MustCompile(`\b\d[\d.,]*\b`)

// learnedText is what of a concluded task joins its agent's card: its first
// paragraph (later ones carry context, such as the rules policy's "Results so
// far", which says what other agents did) without its numbers and file
// names. They are the task's data, not a skill: learned, "2,500 m to miles"
// gave the unit converter a rare word "2" that every task with a 2 then
// matched, and that lowered every other card's match for it ("divide it by
// 2": the calculator's 0.50 became 0.21, under min_match); and "count the
// words in notes.txt" drew "Open notes.txt" to the text analyst.
func learnedText(task string) string {
	text, _, _ := strings.Cut(task, "\n\n")
	text = withoutFileNames(text)
	return strings.Join(strings.Fields(numberRE.ReplaceAllString(text, " ")), " ")
}
