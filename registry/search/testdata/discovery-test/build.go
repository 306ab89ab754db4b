//go:build ignore

// build turns the hand-written world-*.txt files of this directory into
// agents.jsonl, queries.jsonl and agent_domains.json (the format of
// discovery-dev). Run it from this directory: go run build.go
//
// Each world file has blocks of:
//
//	# domain: <domain>
//	<name> | <type> | <tag,tag> | <description> | <capability; capability>
//	E: <task>   (easy)
//	P: <task>   (paraphrase)
//	I: <task>   (indirect)
//
// The tasks under a card have it as gold. Tasks are shuffled with a fixed
// seed so that their order says nothing of their card.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type card struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities"`
	Type         string   `json:"type"`
	Tags         []string `json:"tags"`
}

type query struct {
	ID         string   `json:"id"`
	Query      string   `json:"query"`
	Gold       string   `json:"gold"`
	AlsoOK     []string `json:"also_ok"`
	Difficulty string   `json:"difficulty"`
}

func main() {
	files, err := filepath.Glob("world-*.txt")
	if err != nil || len(files) == 0 {
		log.Fatal("no world-*.txt here")
	}
	sort.Strings(files)
	var cards []card
	var qs []query
	domains := map[string]string{}
	seen := map[string]bool{}
	diff := map[string]string{"E": "easy", "P": "paraphrase", "I": "indirect"}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		domain, cur := "", ""
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "":
			case strings.HasPrefix(line, "# domain:"):
				domain = strings.TrimSpace(strings.TrimPrefix(line, "# domain:"))
			case len(line) > 2 && line[1] == ':' && diff[line[:1]] != "":
				if cur == "" {
					log.Fatalf("%s:%d: task before any card", f, n)
				}
				qs = append(qs, query{Query: strings.TrimSpace(line[2:]), Gold: cur, AlsoOK: []string{}, Difficulty: diff[line[:1]]})
			default:
				p := strings.Split(line, "|")
				if len(p) != 5 || domain == "" {
					log.Fatalf("%s:%d: want name | type | tags | description | capabilities", f, n)
				}
				c := card{Name: strings.TrimSpace(p[0]), Type: strings.TrimSpace(p[1]), Description: strings.TrimSpace(p[3])}
				for _, t := range strings.Split(p[2], ",") {
					c.Tags = append(c.Tags, strings.TrimSpace(t))
				}
				for _, t := range strings.Split(p[4], ";") {
					c.Capabilities = append(c.Capabilities, strings.TrimSpace(t))
				}
				if seen[c.Name] {
					log.Fatalf("%s:%d: %s twice", f, n, c.Name)
				}
				seen[c.Name] = true
				cards = append(cards, c)
				domains[c.Name] = domain
				cur = c.Name
			}
		}
		fh.Close()
	}
	rng := rand.New(rand.NewPCG(14, 2026))
	rng.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
	for i := range qs {
		qs[i].ID = fmt.Sprintf("test-%04d", i+1)
	}
	write := func(name string, rows int, each func(enc *json.Encoder, i int)) {
		out, err := os.Create(name)
		if err != nil {
			log.Fatal(err)
		}
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		for i := range rows {
			each(enc, i)
		}
		if err := out.Close(); err != nil {
			log.Fatal(err)
		}
	}
	write("agents.jsonl", len(cards), func(enc *json.Encoder, i int) { _ = enc.Encode(cards[i]) })
	write("queries.jsonl", len(qs), func(enc *json.Encoder, i int) { _ = enc.Encode(qs[i]) })
	b, _ := json.MarshalIndent(domains, "", " ")
	if err := os.WriteFile("agent_domains.json", append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	count := map[string]int{}
	for _, q := range qs {
		count[q.Difficulty]++
	}
	nd := map[string]bool{}
	for _, d := range domains {
		nd[d] = true
	}
	fmt.Printf("%d agents in %d domains, %d tasks: %d easy, %d paraphrase, %d indirect\n",
		len(cards), len(nd), len(qs), count["easy"], count["paraphrase"], count["indirect"])
}
