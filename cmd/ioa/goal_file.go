package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// goalRequest builds the request from the file and the text arguments; the
// goal comes from one of them, never both.
func goalRequest(cmd *cobra.Command, args []string, file string) (protocol.GoalRequest, error) {
	var req protocol.GoalRequest
	if file != "" {
		data, err := readGoalFile(cmd, file)
		if err != nil {
			return req, fmt.Errorf("goal file: %w", err)
		}
		if req, err = decodeGoalFile(data); err != nil {
			return req, fmt.Errorf("%s: %w", goalFileName(file), err)
		}
	}
	text := strings.TrimSpace(strings.Join(args, " "))
	switch {
	case text != "" && req.Goal != "":
		return req, fmt.Errorf(`%s has a "goal" and so does the command line: give the goal once, in the file or as the argument`, goalFileName(file))
	case text != "":
		req.Goal = text
	case req.Goal != "":
	case file != "":
		return req, fmt.Errorf(`%s: "goal" is required`, goalFileName(file))
	default:
		return req, errors.New(`say what the goal is: ioa goal "text" (or --file goal.json)`)
	}
	return req, nil
}

func readGoalFile(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(file)
}

func goalFileName(file string) string {
	if file == "-" {
		return "the goal request on stdin"
	}
	return "goal file " + file
}

// goalFileExample is what a goal file holds, for the error messages.
const goalFileExample = `{"goal": "Convert 5 km to miles", "timeout": "2m"}`

// goalRequestFields are the JSON fields of a goal request, by name.
var goalRequestFields = jsonFields(reflect.TypeFor[protocol.GoalRequest]())

func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return fields
}

// decodeGoalFile reads a goal request from a file's JSON. Its errors say
// what is wrong and what is expected, naming the field: it decodes the
// fields one by one so that any error belongs to one of them.
func decodeGoalFile(data []byte) (protocol.GoalRequest, error) {
	var req protocol.GoalRequest
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return req, notAGoalObject(data, err)
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		t, ok := goalRequestFields[k]
		if !ok {
			return req, fmt.Errorf("unknown field %q (a goal request's fields: %s)", k, strings.Join(slices.Sorted(maps.Keys(goalRequestFields)), ", "))
		}
		one, _ := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		if err := json.Unmarshal(one, &req); err != nil {
			return req, fieldProblem(k, t, fields[k], err)
		}
	}
	return req, nil
}

// notAGoalObject explains data that is no JSON object: where its JSON
// breaks, or what it holds instead.
func notAGoalObject(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		how := fmt.Sprintf("invalid JSON at line %d, column %d", line, col)
		if se.Offset >= int64(len(data)) {
			how = fmt.Sprintf("the JSON ends unfinished at line %d, column %d", line, col)
		}
		return fmt.Errorf("%s; a goal file holds an object such as %s", how, goalFileExample)
	case errors.As(err, &te) && te.Value == "string":
		var s string
		_ = json.Unmarshal(data, &s)
		example, _ := json.Marshal(map[string]string{"goal": s})
		return fmt.Errorf("it holds a JSON string, not an object: write %s", example)
	case errors.As(err, &te):
		return fmt.Errorf("it holds %s, not an object such as %s", jsonValueKind(te.Value), goalFileExample)
	}
	return fmt.Errorf("it holds null, not an object such as %s", goalFileExample)
}

// position is the line and column of the byte before offset, where the
// decoder stopped.
func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for _, b := range data[:min(max(int(offset)-1, 0), len(data))] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// fieldProblem says what field k (of type t) must be, and what it is.
func fieldProblem(k string, t reflect.Type, raw json.RawMessage, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" && te.Field != k {
			k = te.Field // a field inside an object, such as parent.goal_id
			t = te.Type
		}
		return fmt.Errorf("%q must be %s, not %s", k, bus.WantKind(t), jsonValueKind(te.Value))
	}
	// A value of the right kind that its type refuses: a duration string
	// that is no duration.
	return fmt.Errorf("%q must be %s, not %s", k, bus.WantKind(t), raw)
}

// jsonValueKind names a JSON value as the decoder describes it ("string",
// "number 1.5").
func jsonValueKind(v string) string {
	kind, detail, _ := strings.Cut(v, " ")
	switch kind {
	case "number":
		if detail != "" {
			return detail
		}
		return "a number"
	case "array", "object":
		return "an " + kind
	case "bool":
		return "true or false"
	}
	return "a " + kind
}
