package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ioa-nats/ioa/console"
)

// chromium finds a Chromium or Chrome binary. In CI (CI=true or
// IOA_REQUIRE_CHROMIUM=1, set by .ci/run) a missing browser fails the
// test; elsewhere it skips, saying how to get one.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on the PATH (install it: make tools, or apt-get install chromium)"
	if os.Getenv("CI") == "true" || os.Getenv("IOA_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// artifacts is where the browser test saves its screenshots: $IOA_ARTIFACTS,
// else testdata-out/console at the top of the repository (git ignores it).
func artifacts(t *testing.T) string {
	dir := os.Getenv("IOA_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "testdata-out")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium for the test.
func browser(t *testing.T, width, height int64) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI containers run as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(int(width), int(height)),
	)
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// run runs browser actions with a deadline, failing the test with what it
// was doing.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// get runs one browser action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	file := filepath.Join(artifacts(t), name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
	return png
}

// textContains waits until the first element sel matches has a text that
// contains want.
func textContains(sel, want string) chromedp.Action[chromedp.Void] {
	js := "(document.querySelector(" + strconv.Quote(sel) + ") || {}).innerText || ''"
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			got, err := chromedp.Evaluate[string](js)(ctx, tg)
			if err == nil && strings.Contains(got, want) {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("%s never contained %q (last: %q): %w", sel, want, got, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// The console as a person uses it, in a real headless Chromium: open the
// URL ioa serve prints (it logs in), submit a goal and watch the chat reach
// the conclusion, cancel another goal, answer a person's turn and task.
func TestBrowser(t *testing.T) {
	e := start(t, console.Config{Token: token, ViewWithoutLogin: true})
	ctx := browser(t, 1280, 900)

	// Without the token the console is read-only: no submit form.
	run(t, ctx, "open as a viewer",
		chromedp.Navigate(e.srv.URL+"/"),
		textContains("#role", "viewer"),
		chromedp.WaitVisible(chromedp.CSS("#goals-table")),
	)
	forms := get(t, ctx, "count forms", chromedp.Evaluate[int](`document.querySelectorAll("#submit-form").length`))
	if forms != 0 {
		t.Fatal("a viewer sees the submit form")
	}

	// The printed URL carries the token: opening it logs in.
	run(t, ctx, "log in",
		chromedp.Navigate(e.srv.URL+"/?token="+token),
		textContains("#role", "operator"),
		chromedp.WaitVisible(chromedp.CSS("#goal-input")),
	)
	url := get(t, ctx, "location", chromedp.Location())
	if strings.Contains(url, token) {
		t.Errorf("the token stayed in the address bar: %s", url)
	}

	// Submit a goal; the goal page shows the chat live to the conclusion.
	run(t, ctx, "submit a goal",
		chromedp.SendKeys(chromedp.CSS("#goal-input"), "Compute 19.5 * 4."),
		chromedp.Click(chromedp.CSS("#submit-goal")),
		chromedp.WaitVisible(chromedp.CSS("#goal-title")),
		textContains("#conclusion", "19.5 * 4 = 78"),
		textContains("#goal-status", "concluded"),
		textContains("#task-board", "calculator"),
		textContains("#chat", "conclusion"),
	)
	msgs := get(t, ctx, "count messages", chromedp.Evaluate[int](`document.querySelectorAll("#chat .msg").length`))
	if msgs < 4 {
		t.Errorf("the chat shows %d messages, want the whole conversation (start, the plan with its task, result, conclusion)", msgs)
	}
	screenshot(t, ctx, "goal-concluded")

	// Cancel a goal that waits on a person.
	run(t, ctx, "submit a goal for alice",
		chromedp.Navigate(e.srv.URL+"/#/goals"),
		chromedp.WaitVisible(chromedp.CSS("#goal-input")),
		chromedp.SendKeys(chromedp.CSS("#goal-input"), "Approve the result."),
		chromedp.SendKeys(chromedp.CSS("#team-input"), "alice"),
		chromedp.Click(chromedp.CSS("#submit-goal")),
		chromedp.WaitVisible(chromedp.CSS("#cancel-this")),
		textContains("#goal-status", "running"),
		chromedp.Click(chromedp.CSS("#cancel-this")),
		textContains("#goal-status", "cancelled"),
	)
	run(t, ctx, "the list shows it cancelled",
		chromedp.Navigate(e.srv.URL+"/#/goals?status=ended"),
		textContains("#goals-table", "cancelled"),
	)

	// A person's turn and task, answered in the browser.
	run(t, ctx, "submit a goal with a person",
		chromedp.Navigate(e.srv.URL+"/#/goals"),
		chromedp.WaitVisible(chromedp.CSS("#goal-input")),
		chromedp.SendKeys(chromedp.CSS("#goal-input"), "Compute 6 * 7. Then approve the result."),
		chromedp.SendKeys(chromedp.CSS("#team-input"), "alice, calculator"),
		chromedp.Click(chromedp.CSS("#submit-goal")),
		chromedp.WaitVisible(chromedp.CSS("#your-turn")),
		textContains("#your-turn", "Your turn, alice"),
	)
	run(t, ctx, "the people page lists alice's turn",
		chromedp.Navigate(e.srv.URL+"/#/people"),
		textContains("#people", "your turn"),
		textContains("#people-badge", "1"),
		chromedp.NavigateBack(),
		chromedp.WaitVisible(chromedp.CSS("#say-content")),
	)
	run(t, ctx, "alice speaks",
		chromedp.SendKeys(chromedp.CSS("#say-content"), "Go ahead; I will check the product."),
		chromedp.Click(chromedp.CSS("#say-send")),
		textContains("#chat", "Go ahead; I will check the product."),
		chromedp.WaitVisible(chromedp.CSS(".input-required textarea")),
		textContains(".input-required", "Input required: alice"),
	)
	screenshot(t, ctx, "input-required")
	run(t, ctx, "alice answers her task",
		chromedp.SendKeys(chromedp.CSS(".input-required textarea"), "Approved: 6 * 7 = 42 is right."),
		chromedp.Click(chromedp.CSS(".task-send")),
		textContains("#conclusion", "Approved: 6 * 7 = 42 is right."),
		textContains("#goal-status", "concluded"),
	)
	png := screenshot(t, ctx, "person-answered")
	if os.Getenv("IOA_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "docs", "console.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("updated docs/console.png")
	}

	// A goal that needs alice's approval: the team concludes, she approves.
	run(t, ctx, "submit a goal that needs approval",
		chromedp.Navigate(e.srv.URL+"/#/goals"),
		chromedp.WaitVisible(chromedp.CSS("#goal-input")),
		chromedp.SendKeys(chromedp.CSS("#goal-input"), "Compute 12 * 12."),
		chromedp.SendKeys(chromedp.CSS("#approve-input"), "alice"),
		chromedp.Click(chromedp.CSS("#submit-goal")),
		chromedp.WaitVisible(chromedp.CSS("#approve-this")),
		textContains("#goal-status", "awaiting_approval"),
		textContains("#conclusion", "144"),
	)
	screenshot(t, ctx, "approval-required")
	run(t, ctx, "alice approves",
		chromedp.SendKeys(chromedp.CSS("#approve-note"), "checked"),
		chromedp.Click(chromedp.CSS("#approve-this")),
		textContains("#goal-status", "concluded"),
		textContains("#goal-head", "approved by alice: checked"),
	)

	// Agents: the search box shows scores.
	run(t, ctx, "search agents",
		chromedp.Navigate(e.srv.URL+"/#/agents"),
		chromedp.WaitVisible(chromedp.CSS("#agent-list .agent")),
		chromedp.SendKeys(chromedp.CSS("#search-input"), "multiply two numbers"),
		chromedp.Click(chromedp.CSS("#search-go")),
		textContains("#search-results", "calculator"),
	)
	screenshot(t, ctx, "agents")

	// A phone-width screen: the goal page still shows the chat.
	phone := browser(t, 390, 844)
	run(t, phone, "phone: emulate the screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	run(t, phone, "phone: open the goals",
		chromedp.Navigate(e.srv.URL+"/?token="+token),
		chromedp.WaitVisible(chromedp.CSS("#goals-table a")),
	)
	href := get(t, phone, "phone: a goal's link", chromedp.AttributeValue(chromedp.CSS("#goals-table a"), "href"))
	run(t, phone, "phone: open a goal",
		chromedp.Navigate(e.srv.URL+"/"+href.Value),
		textContains("#goal-status", "concluded"),
		chromedp.WaitVisible(chromedp.CSS("#chat .msg")),
	)
	overflow := get(t, phone, "phone: no sideways scrolling", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if overflow {
		t.Error("the goal page is wider than a phone's screen")
	}
	screenshot(t, phone, "phone-goal")

	// The browser's requests were the console's own: check the API saw
	// the four goals.
	code, out := e.call(t, "GET", "/api/goals?status=ended", token, nil)
	if code != http.StatusOK || len(out["goals"].([]any)) != 4 {
		t.Errorf("ended goals after the browser session: %d %v", code, out)
	}
}
