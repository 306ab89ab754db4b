package faulttest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleCall sends one request to a console's JSON API with its token.
func consoleCall(t *testing.T, base, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil // ioa serve is down or starting
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

// aliceWaits reports the tasks alice (demo.yaml's person) is asked for in
// the goal, as GET /api/people says.
func aliceWaits(t *testing.T, base, token, goalID string) []any {
	t.Helper()
	code, out := consoleCall(t, base, token, "GET", "/api/people", "")
	if code != 200 {
		return nil
	}
	for _, p := range out["people"].([]any) {
		if p := p.(map[string]any); p["name"] == "alice" {
			for _, w := range p["waiting"].([]any) {
				if w := w.(map[string]any); w["goal_id"] == goalID {
					tasks, _ := w["tasks"].([]any)
					return tasks
				}
			}
		}
	}
	return nil
}

// TestFaultPersonWaitSurvivesServeKill: a goal of configs/demo.yaml waits
// on alice, a person; ioa serve is SIGKILLed and started again on the same
// data dir; the console (a new one, in the new process) still shows the
// task waiting, because the wait is state in the chat's log, and alice's
// answer through it concludes the goal.
func TestFaultPersonWaitSurvivesServeKill(t *testing.T) {
	cfg, err := filepath.Abs("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	base := "http://" + httpAddr
	args := []string{"serve", "--config", cfg, "--data-dir", data, "--listen", natsAddr, "--http", httpAddr}
	serve := startProc(t, "ioa serve", args...)
	waitFor(t, 60*time.Second, "ioa serve ready", func() bool { return strings.Contains(serve.out.String(), "ready in ") })
	tokenData, err := os.ReadFile(filepath.Join(data, "creds", "console.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenData))
	if !strings.Contains(serve.out.String(), "web console:    "+base+"/?token="+token) {
		t.Fatalf("ioa serve did not print the console's URL:\n%s", serve.out.String())
	}

	code, out := consoleCall(t, base, token, "POST", "/api/goals", `{"goal":"Compute 6 * 7. Then approve the result."}`)
	if code != 202 {
		t.Fatalf("submit: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	waitFor(t, 20*time.Second, "alice's task", func() bool { return len(aliceWaits(t, base, token, id)) == 1 })

	serve.kill()
	serve = startProc(t, "ioa serve (again)", args...)
	waitFor(t, 60*time.Second, "ioa serve ready again", func() bool { return strings.Contains(serve.out.String(), "ready in ") })
	waits := aliceWaits(t, base, token, id)
	if len(waits) != 1 {
		t.Fatalf("after the restart alice's task is not waiting: %v", waits)
	}
	task := waits[0].(string)
	if code, out := consoleCall(t, base, token, "POST", "/api/goals/"+id+"/tasks/"+task+"/result", `{"conclusion":"Approved after a crash."}`); code != 200 {
		t.Fatalf("alice answers: %d %v", code, out)
	}
	var g map[string]any
	waitFor(t, 20*time.Second, "the goal's end", func() bool {
		_, g = consoleCall(t, base, token, "GET", "/api/goals/"+id, "")
		return g != nil && g["result"] != nil
	})
	res := g["result"].(map[string]any)
	if g["status"] != "concluded" || !strings.Contains(res["conclusion"].(string), "Approved after a crash.") || !strings.Contains(res["conclusion"].(string), "42") {
		t.Errorf("goal after the restart: %v", g)
	}
}
