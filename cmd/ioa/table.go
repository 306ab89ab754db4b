package main

import (
	"io"
	"strings"
)

// table prints aligned columns whose cells may carry colour codes, which
// text/tabwriter would count as width.
type table struct {
	pal  palette
	rows [][]string
}

// header adds the bold header row.
func (t *table) header(cells ...string) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = t.pal.bold(c)
	}
	t.rows = append(t.rows, row)
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, row := range t.rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleLen(c))
		}
	}
	var b strings.Builder
	for _, row := range t.rows {
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-visibleLen(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
