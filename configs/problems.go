package configs

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// Problem is one mistake in a configuration, at its key path
// (limits.max_turns, agents[calc].worker.builtin).
type Problem struct {
	Key string
	Msg string
}

func (p Problem) Error() string { return p.Key + ": " + p.Msg }

// Check finds mistakes the configs package cannot see, such as the names
// of the built-in workers a program has; Load reports them with its own.
type Check func(*Config) []Problem

// InvalidError is a configuration with mistakes: all of them, so one run
// of `ioa config --check` shows everything to fix.
type InvalidError struct {
	File     string
	Problems []Problem
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	slices.Sort(msgs)
	return fmt.Sprintf("invalid configuration%s:\n  %s", fileSuffix(e.File), strings.Join(msgs, "\n  "))
}

// invalid is the error of problems, or nil when there are none.
func invalid(file string, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &InvalidError{File: file, Problems: firstPerKey(problems)}
}

// firstPerKey keeps the first problem of each key: two readings of a
// file may find the same one.
func firstPerKey(problems []Problem) []Problem {
	seen := map[string]bool{}
	var out []Problem
	for _, p := range problems {
		if !seen[p.Key] {
			seen[p.Key] = true
			out = append(out, p)
		}
	}
	return out
}

// unknownKeys finds the keys of settings that no field of t takes: a
// misspelt key would otherwise be ignored and its default used silently.
func unknownKeys(path string, data any, t reflect.Type) []Problem {
	switch t.Kind() {
	case reflect.Struct:
		m, ok := data.(map[string]any)
		if !ok {
			// A merge drops a value that is no section, so decoding
			// would not see it.
			return []Problem{{Key: path, Msg: showValue(data) + " is not a section of keys"}}
		}
		var out []Problem
		for k, v := range m {
			f, ok := fieldByKey(t, k)
			if !ok {
				out = append(out, Problem{Key: join(path, k), Msg: "unknown key" + suggest(k, keysOf(t))})
				continue
			}
			out = append(out, unknownKeys(join(path, k), v, f.Type)...)
		}
		return out
	case reflect.Slice:
		list, ok := data.([]any)
		if !ok {
			return nil
		}
		var out []Problem
		for i, v := range list {
			out = append(out, unknownKeys(fmt.Sprintf("%s[%d]", path, i), v, t.Elem())...)
		}
		return out
	}
	return nil // maps (metadata) take any key
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByKey is the field of struct t whose mapstructure tag is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := f.Tag.Get("mapstructure"); tag != "" && tag != "-" && strings.EqualFold(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("mapstructure"); tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// suggest names the known key closest to a misspelt one, if one is close.
func suggest(key string, known []string) string {
	best, bestD := "", 0
	for _, k := range known {
		d := distance(key, k)
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(2, len(best)/3) {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// distance is the Damerau-Levenshtein (optimal string alignment) distance
// of a and b: a swap of two letters (agnets) counts as one edit.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// decodeProblems turns the decoder's errors into one problem per key,
// in the terms of the file rather than of Go.
func decodeProblems(err error) []Problem {
	if err == nil {
		return nil
	}
	if many, ok := err.(interface{ Unwrap() []error }); ok {
		var out []Problem
		for _, e := range many.Unwrap() {
			out = append(out, decodeProblems(e)...)
		}
		return out
	}
	de, ok := err.(*mapstructure.DecodeError)
	if !ok {
		if inner := errors.Unwrap(err); inner != nil {
			return decodeProblems(inner)
		}
		return []Problem{{Key: "configuration", Msg: "cannot be read"}}
	}
	if _, ok := de.Unwrap().(interface{ Unwrap() []error }); ok {
		return decodeProblems(de.Unwrap())
	}
	return []Problem{{Key: de.Name(), Msg: wrongValue(de)}}
}

// wrongValue says what the value at a key is and what the key wants.
func wrongValue(de *mapstructure.DecodeError) string {
	want := "a value of another kind"
	if t := typeAt(reflect.TypeFor[Config](), de.Name()); t != nil {
		want = wantOf(t)
	}
	var (
		pe  *mapstructure.ParseError
		ue  *mapstructure.UnconvertibleTypeError
		bad badValue
	)
	switch {
	case errors.As(de, &bad):
		return fmt.Sprintf("%s is not %s", showValue(bad.value), want)
	case errors.As(de, &pe):
		return fmt.Sprintf("%s is not %s", showValue(pe.Value), want)
	case errors.As(de, &ue):
		return fmt.Sprintf("%s is not %s", showValue(ue.Value), want)
	}
	return "must be " + want
}

// typeAt is the Go type the key path (agents[2].worker.timeout) decodes
// into, or nil.
func typeAt(t reflect.Type, path string) reflect.Type {
	for seg := range strings.SplitSeq(path, ".") {
		name, _, indexed := strings.Cut(seg, "[")
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := fieldByKey(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		if indexed {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// wantOf says in words what values of t look like.
func wantOf(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration such as 30s or 2m"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a text"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a section of keys"
	}
	return "a value of another kind"
}

func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case map[string]any:
		return "a section of keys"
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return fmt.Sprint(v)
}
