// The ioa console: a few pages over the console's JSON API and its
// Server-Sent Events. Plain DOM, no build step; every text from the wire is
// set with textContent, never parsed as HTML.
"use strict";

const state = { me: { role: "", can_write: false }, live: null, listLive: null };

// el builds an element: el("td", {class: "x"}, "text", child, ...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function pill(s) { return el("span", { class: "pill s-" + (s || "none") }, s || "-"); }

function flash(msg) {
  const f = document.getElementById("flash");
  f.textContent = msg;
  f.hidden = false;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => (f.hidden = true), 5000);
}

async function api(method, path, body) {
  const opt = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opt.headers["Content-Type"] = "application/json";
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    if (r.status === 401) showLogin(true);
    const e = new Error((data.error && data.error.message) || r.statusText);
    e.status = r.status;
    throw e;
  }
  return data;
}

function closeLive() {
  if (state.live) { state.live.close(); state.live = null; }
  if (state.listLive) { state.listLive.close(); state.listLive = null; }
}

function showLogin(on) { document.getElementById("login").hidden = !on; }

function ago(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString();
}

function dur(ms) {
  if (!ms) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " m " + Math.round((ms % 60000) / 1000) + " s";
}

// ---------- goals ----------

async function goalsPage(view, params) {
  const status = params.get("status") || "all";
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const limit = 20;
  const form = state.me.can_write ? el("form", { id: "submit-form", class: "card", onsubmit: async (ev) => {
      ev.preventDefault();
      const goal = document.getElementById("goal-input").value.trim();
      const team = document.getElementById("team-input").value.split(/[\s,]+/).filter(Boolean);
      const approver = document.getElementById("approve-input").value.trim();
      try {
        const r = await api("POST", "/api/goals", { goal, team: team.length ? team : undefined, approve_by: approver || undefined });
        location.hash = "#/goal/" + r.goal_id;
      } catch (e) { flash("submit: " + e.message); }
    } },
    el("h2", {}, "Submit a goal"),
    el("textarea", { id: "goal-input", placeholder: "Convert 42 km to miles. Compute 19.5 * 4. Then write a Markdown report of the results.", required: true }),
    el("div", { class: "row" },
      el("input", { id: "team-input", type: "text", class: "grow", placeholder: "team (optional): calculator, alice" }),
      el("input", { id: "approve-input", type: "text", placeholder: "approval by (optional): alice" }),
      el("button", { id: "submit-goal", type: "submit" }, "Submit"))) :
    el("p", { class: "muted card" }, "Viewer: log in with the console token to submit, cancel or answer.");

  const filter = el("select", { id: "status-filter", onchange: (e) => { location.hash = "#/goals?status=" + e.target.value; } },
    ...["all", "running", "ended"].map((s) => el("option", { value: s, selected: s === status }, s)));
  const tbody = el("tbody");
  const pager = el("div", { class: "row" });
  view.replaceChildren(form, el("div", { class: "card" },
    el("div", { class: "row" }, el("h2", { class: "grow" }, "Goals"), el("label", { for: "status-filter" }, "status "), filter),
    el("table", { id: "goals-table" }, el("thead", {}, el("tr", {},
      el("th", {}, "goal"), el("th", {}, "status"), el("th", { class: "wide" }, "outcome"), el("th", { class: "wide" }, "created"), el("th", {}, ""))), tbody),
    pager));

  async function load() {
    let r;
    try { r = await api("GET", `/api/goals?status=${status}&offset=${offset}&limit=${limit}`); } catch (e) { flash(e.message); return; }
    tbody.replaceChildren(...r.goals.map((g) => {
      const running = !["concluded", "failed", "cancelled", "timed_out"].includes(g.status);
      return el("tr", { "data-goal-id": g.goal_id },
        el("td", { class: "goal-text" }, el("a", { href: "#/goal/" + g.goal_id }, g.goal),
          el("div", { class: "muted" }, g.goal_id, g.parent_goal_id ? " · sub-goal of " : "", g.parent_goal_id ? el("a", { href: "#/goal/" + g.parent_goal_id }, g.parent_goal_id) : "")),
        el("td", {}, pill(g.status)),
        el("td", { class: "wide" }, g.outcome ? pill(g.outcome) : ""),
        el("td", { class: "wide" }, ago(g.created_at)),
        el("td", {}, running && state.me.can_write ? el("button", { class: "danger cancel-goal", onclick: () => cancelGoal(g.goal_id, load) }, "Cancel") : ""));
    }));
    if (!r.goals.length) tbody.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no goals")));
    pager.replaceChildren(
      offset > 0 ? el("a", { href: `#/goals?status=${status}&offset=${Math.max(0, offset - limit)}` }, "← newer") : "",
      r.more ? el("a", { href: `#/goals?status=${status}&offset=${offset + limit}` }, "older →") : "");
  }
  await load();
  // Redraw when a goal is accepted, forms its team or ends.
  let t = null;
  state.listLive = new EventSource("/api/live");
  state.listLive.addEventListener("goal", () => { clearTimeout(t); t = setTimeout(load, 200); });
}

async function cancelGoal(id, then) {
  try { await api("POST", `/api/goals/${id}/cancel`, {}); flash("cancelled " + id); if (then) then(); }
  catch (e) { flash("cancel: " + e.message); }
}

// ---------- one goal, live ----------

function goalPage(view, id) {
  const goals = {};       // goal id -> GoalStatus
  const msgs = {};        // goal id -> [AgentMessage]
  const chats = {};       // goal id -> ChatState
  let selected = id;

  const head = el("div", { class: "card", id: "goal-head" });
  const tree = el("div", { class: "card" }, el("h2", {}, "Goal tree"), el("ul", { class: "tree", id: "goal-tree" }));
  const chatBox = el("div", { class: "card" });
  const board = el("div", { class: "card" });
  const usage = el("div", { class: "card" });
  view.replaceChildren(head, el("div", { class: "grid" }, chatBox, el("div", {}, tree, board, usage)));

  function drawHead() {
    const g = goals[id];
    if (!g) return;
    const ended = ["concluded", "failed", "cancelled", "timed_out"].includes(g.status);
    const awaiting = g.status === "awaiting_approval";
    const u = (g.result && g.result.usage) || (chats[id] && chats[id].total);
    head.replaceChildren(
      el("h1", { id: "goal-title" }, g.goal),
      el("div", { class: "row" },
        el("span", { id: "goal-status" }, pill(g.status)), g.outcome ? pill(g.outcome) : "",
        el("span", { class: "muted" }, g.goal_id), g.comm_id ? el("span", { class: "muted" }, "chat " + g.comm_id) : "",
        u ? el("span", { class: "muted", id: "goal-usage" }, `LLM calls ${u.llm_calls}, tokens ${u.prompt_tokens} in / ${u.completion_tokens} out`) : "",
        !ended && state.me.can_write ? el("button", { class: "danger", id: "cancel-this", onclick: () => cancelGoal(id) }, "Cancel") : ""),
      awaiting ? approvalForm(g) : "",
      g.result ? el("div", {}, el("h2", {}, awaiting ? "Proposed conclusion" : "Conclusion"), el("pre", { id: "conclusion" }, g.result.conclusion || ""),
        g.result.reason ? el("p", { class: "muted" }, g.result.reason) : "") : "");
  }

  // The team concluded; the goal waits for its approver's answer.
  function approvalForm(g) {
    const note = el("textarea", { id: "approve-note", "data-key": g.goal_id + "/approval", placeholder: "note (optional)" });
    const answer = (approve) => async (ev) => {
      ev.preventDefault();
      try { await api("POST", `/api/goals/${g.goal_id}/approve`, { approve, note: note.value }); flash(approve ? "approved" : "rejected"); }
      catch (e) { flash("answer: " + e.message); }
    };
    return el("div", { class: "you", id: "approval" }, el("h3", {}, `Approval required from ${g.approve_by}`),
      state.me.can_write ? el("form", {}, note, el("div", { class: "row" },
        el("button", { id: "approve-this", onclick: answer(true) }, "Approve"),
        el("button", { class: "danger", id: "reject-this", onclick: answer(false) }, "Reject"))) :
        el("p", { class: "muted" }, "Log in to answer."));
  }

  function drawTree() {
    function node(gid) {
      const g = goals[gid];
      const a = el("a", { class: gid === selected ? "sel" : "", onclick: () => { selected = gid; drawChat(); drawTree(); } },
        g ? g.goal : gid);
      const kids = (g && g.children) || [];
      return el("li", {}, a, " ", pill(g && g.status), kids.length ? el("ul", { class: "tree" }, ...kids.map(node)) : "");
    }
    tree.querySelector("#goal-tree").replaceChildren(node(id));
  }

  function msgView(m) {
    const c = chats[m.goal_id];
    const person = c && c.members.some((x) => x.name === m.sender && x.person);
    const body = [];
    if (m.tasks && m.tasks.length) body.push(el("ul", {}, ...m.tasks.map((t) => el("li", {}, `${t.task_id} → ${t.assignee}: ${t.task_desc}`))));
    if (m.type === "task_result") body.push(el("div", {}, `${m.task_id} ${m.task_status}: `, el("span", { class: "content" }, m.task_conclusion || "")));
    return el("div", { class: "msg" + (m.sender === "system" ? " system" : "") + (person ? " person" : ""), "data-seq": m.seq, "data-type": m.type },
      el("div", { class: "meta" },
        el("span", {}, "#" + m.seq), el("span", { class: "sender" }, m.sender), el("span", {}, m.type + (m.event ? ":" + m.event : "")),
        m.state ? el("span", {}, "→ " + m.state) : "",
        m.next_speaker && m.next_speaker.length ? el("span", {}, "next: " + m.next_speaker.join(", ")) : "",
        el("span", {}, ago(m.ts))),
      m.content ? el("div", { class: "content" }, m.content) : "", ...body);
  }

  // A redraw keeps what the person is typing (and the focus): the chat
  // moves on while they write.
  function typed() {
    const out = {};
    for (const t of chatBox.querySelectorAll("textarea[data-key]")) out[t.dataset.key] = { v: t.value, f: t === document.activeElement };
    return out;
  }
  function restore(saved) {
    for (const t of chatBox.querySelectorAll("textarea[data-key]")) {
      const s = saved[t.dataset.key];
      if (!s) continue;
      t.value = s.v;
      if (s.f) t.focus();
    }
  }

  function drawChat() {
    const saved = typed();
    const c = chats[selected];
    const list = msgs[selected] || [];
    const parts = [el("h2", {}, selected === id ? "Chat" : "Chat of sub-goal " + selected)];
    if (c) {
      parts.push(el("div", { class: "statebar", id: "chat-state" },
        el("span", {}, "state ", pill(c.state)), el("span", {}, "next speaker: ", el("b", { id: "speaker" }, c.speaker || "—")),
        el("span", {}, `turn ${c.turn}/${c.max_turns}`), c.waiting && c.waiting.length ? el("span", {}, "waiting for " + c.waiting.join(", ")) : ""));
      parts.push(...personForms(selected, c));
    } else {
      parts.push(el("p", { class: "muted" }, "no chat yet"));
    }
    parts.push(el("div", { class: "chat", id: "chat" }, ...list.map(msgView)));
    chatBox.replaceChildren(...parts);
    restore(saved);
    const box = chatBox.querySelector("#chat");
    box.scrollTop = box.scrollHeight;
    drawBoard();
  }

  function personForms(gid, c) {
    const out = [];
    if (c.your_turn) {
      const who = c.your_turn;
      const content = el("textarea", { id: "say-content", "data-key": `${gid}/turn/${c.turn}`, placeholder: `${who}, what do you say?` });
      const type = el("select", { id: "say-type" }, el("option", { value: "discussion" }, "discussion"), el("option", { value: "conclusion" }, "conclusion"));
      const next = el("select", { id: "say-next" }, ...c.members.filter((m) => m.name !== who).map((m) =>
        el("option", { value: m.name, selected: m.name === c.launcher }, m.name)));
      out.push(el("div", { class: "you", id: "your-turn" }, el("h3", {}, `Your turn, ${who}`),
        state.me.can_write ? el("form", { onsubmit: async (ev) => {
          ev.preventDefault();
          try {
            // A conclusion says the last entry shown: the referee refuses one
            // that missed a task's result, and the page shows that result.
            const shown = msgs[gid] || [];
            const seen = type.value === "conclusion" && shown.length ? shown[shown.length - 1].seq : undefined;
            await api("POST", `/api/goals/${gid}/say`, { as: who, type: type.value, content: content.value, next_speaker: type.value === "discussion" ? next.value : undefined, seen_seq: seen });
          } catch (e) { flash("send: " + e.message); }
        } }, content, el("div", { class: "row" }, type, el("label", {}, "next "), next, el("button", { id: "say-send", type: "submit" }, "Send"))) :
          el("p", { class: "muted" }, "log in to answer")));
    }
    for (const tid of c.input_required || []) {
      const t = c.tasks.find((x) => x.task_id === tid);
      if (!t) continue;
      const text = el("textarea", { class: "task-answer", "data-key": `${gid}/${tid}/${t.attempt}`, placeholder: "your answer" });
      const status = el("select", {}, el("option", { value: "completed" }, "completed"), el("option", { value: "failed" }, "failed"));
      out.push(el("div", { class: "you input-required", "data-task": tid }, el("h3", {}, `Input required: ${t.assignee}, task ${tid}`),
        el("p", { class: "task-desc" }, t.task_desc),
        state.me.can_write ? el("form", { onsubmit: async (ev) => {
          ev.preventDefault();
          try { await api("POST", `/api/goals/${gid}/tasks/${tid}/result`, { status: status.value, conclusion: text.value }); }
          catch (e) { flash("answer: " + e.message); }
        } }, text, el("div", { class: "row" }, status, el("button", { class: "task-send", type: "submit" }, "Answer"))) :
          el("p", { class: "muted" }, "log in to answer")));
    }
    return out;
  }

  function drawBoard() {
    const c = chats[selected];
    if (!c) { board.replaceChildren(); usage.replaceChildren(); return; }
    board.replaceChildren(el("h2", {}, "Tasks"), el("table", { id: "task-board" },
      el("thead", {}, el("tr", {}, el("th", {}, "task"), el("th", {}, "assignee"), el("th", {}, "state"), el("th", {}, "time"))),
      el("tbody", {}, ...c.tasks.map((t) => el("tr", { "data-task": t.task_id },
        el("td", {}, t.task_id + " ", el("span", { class: "muted" }, t.task_abstract || t.task_desc)),
        el("td", {}, t.assignee, t.person ? el("span", { class: "muted" }, " (person)") : ""),
        el("td", {}, pill(t.status), t.attempt > 1 ? ` #${t.attempt}` : ""),
        el("td", {}, dur(t.duration_ms)))))));
    // Every member, and anyone else whose messages carried usage.
    const names = [...new Set([...c.members.map((m) => m.name), ...Object.keys(c.usage || {})])];
    const zero = { llm_calls: 0, prompt_tokens: 0, completion_tokens: 0 };
    usage.replaceChildren(el("h2", {}, "Usage"), el("table", { id: "usage" },
      el("thead", {}, el("tr", {}, el("th", {}, "agent"), el("th", {}, "LLM calls"), el("th", {}, "tokens in"), el("th", {}, "tokens out"))),
      el("tbody", {}, ...names.map((n) => { const u = (c.usage && c.usage[n]) || zero; return el("tr", {}, el("td", {}, n), el("td", {}, u.llm_calls), el("td", {}, u.prompt_tokens), el("td", {}, u.completion_tokens)); }),
        el("tr", {}, el("th", {}, "goal"), el("th", {}, c.total.llm_calls), el("th", {}, c.total.prompt_tokens), el("th", {}, c.total.completion_tokens)))));
  }

  const es = new EventSource(`/api/goals/${id}/live`);
  state.live = es;
  es.addEventListener("goal", (e) => {
    const g = JSON.parse(e.data);
    const had = goals[g.goal_id];
    if (had && had.result && !g.result) { g.result = had.result; g.status = had.status; g.outcome = had.outcome; }
    goals[g.goal_id] = g;
    drawHead(); drawTree();
  });
  es.addEventListener("result", (e) => {
    const r = JSON.parse(e.data);
    const g = goals[r.goal_id] || { goal_id: r.goal_id, goal: r.goal_id, children: [] };
    goals[r.goal_id] = Object.assign({}, g, { result: r, status: r.status, outcome: r.outcome });
    drawHead(); drawTree();
  });
  // EventSource reconnects by itself (ioa serve restarted, the network
  // dropped) and the stream then starts again from the first message:
  // keep each seq once.
  es.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    const list = (msgs[m.goal_id] = msgs[m.goal_id] || []);
    if (!list.length || m.seq > list[list.length - 1].seq) list.push(m);
  });
  es.addEventListener("chat", (e) => { const c = JSON.parse(e.data); chats[c.goal_id] = c; if (c.goal_id === selected) drawChat(); if (c.goal_id === id) drawHead(); });
  es.addEventListener("error", (e) => { if (e.data) flash(JSON.parse(e.data).message); });
  drawChat();
}

// ---------- agents ----------

async function agentsPage(view) {
  const results = el("div", { id: "search-results" });
  const q = el("input", { id: "search-input", type: "search", class: "grow", placeholder: "what should the agent do? e.g. how many miles is 42 km" });
  const list = el("div", { class: "agents", id: "agent-list" });
  view.replaceChildren(
    el("form", { class: "card", onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const r = await api("GET", "/api/search?q=" + encodeURIComponent(q.value) + "&offline=1");
        results.replaceChildren(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "agent"), el("th", {}, "score"), el("th", {}, "match"), el("th", { class: "wide" }, "description"))),
          el("tbody", {}, ...r.results.map((x) => el("tr", {}, el("td", { class: "nowrap" }, el("span", { class: "dot" + (x.online ? " on" : "") }), x.name),
            el("td", { class: "score" }, x.score.toFixed(3)), el("td", { class: "score" }, x.match.toFixed(2)), el("td", { class: "wide" }, x.description))))));
        if (!r.results.length) results.replaceChildren(el("p", { class: "muted" }, "no agent matches"));
      } catch (e) { flash("search: " + e.message); }
    } }, el("h2", {}, "Find an agent by what it can do"), el("div", { class: "row" }, q, el("button", { type: "submit", id: "search-go" }, "Search")), results),
    el("div", { class: "card" }, el("h2", {}, "Registered agents"), list));
  const r = await api("GET", "/api/agents?limit=1000");
  list.replaceChildren(...r.agents.map((a) => el("div", { class: "agent", "data-agent": a.name },
    el("h3", {}, el("span", { class: "dot" + (a.online ? " on" : ""), title: a.online ? "online" : "offline" }), a.name, " ", el("span", { class: "pill" }, a.type)),
    el("div", {}, a.description),
    a.capabilities && a.capabilities.length ? el("div", { class: "tags" }, "can: " + a.capabilities.join("; ")) : "",
    a.tags && a.tags.length ? el("div", { class: "tags" }, "tags: " + a.tags.join(", ")) : "")));
}

// ---------- people ----------

async function peoplePage(view) {
  const r = await api("GET", "/api/people");
  view.replaceChildren(el("div", { class: "card" }, el("h2", {}, "People"),
    el("p", { class: "muted" }, "Members of type human. Their turns, tasks and approvals wait here (or in ioa chat join NAME) until answered, bounded by the speaker and task timeouts and the goal's deadline."),
    r.people.length ? el("ul", { id: "people" }, ...r.people.map((p) => el("li", { "data-person": p.name },
      el("span", { class: "dot" + (p.online ? " on" : "") }), el("b", {}, p.name), " — ", p.description,
      p.waiting.length ? el("ul", {}, ...p.waiting.map((w) => el("li", {},
        el("a", { href: "#/goal/" + w.goal_id }, w.goal), " ", w.turn ? el("span", { class: "badge" }, "your turn") : "",
        (w.tasks || []).length ? el("span", { class: "badge" }, "input required: " + w.tasks.join(", ")) : "",
        w.approval ? el("span", { class: "badge" }, "approval required") : ""))) :
        el("span", { class: "muted" }, " (nothing waits)")))) :
      el("p", {}, "No person is registered. Add one to the configuration: ", el("code", {}, "{name: alice, type: human, description: ...}"))));
}

// ---------- routing ----------

// The People badge counts what waits on people in running goals.
async function peopleBadge() {
  const b = document.getElementById("people-badge");
  try {
    const r = await api("GET", "/api/people");
    const n = r.people.reduce((k, p) => k + p.waiting.reduce((m, w) => m + (w.turn ? 1 : 0) + (w.tasks || []).length + (w.approval ? 1 : 0), 0), 0);
    b.textContent = n;
    b.hidden = n === 0;
  } catch (e) { b.hidden = true; }
}

async function route() {
  closeLive();
  peopleBadge();
  document.getElementById("flash").hidden = true;
  const view = document.getElementById("view");
  const [path, query] = (location.hash.slice(1) || "/goals").split("?");
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", path.startsWith(a.getAttribute("href").slice(1)));
  try {
    if (path.startsWith("/goal/")) goalPage(view, decodeURIComponent(path.slice(6)));
    else if (path === "/agents") await agentsPage(view);
    else if (path === "/people") await peoplePage(view);
    else await goalsPage(view, params);
  } catch (e) {
    view.replaceChildren(el("p", { class: "error card" }, e.message));
  }
}

async function boot() {
  document.getElementById("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("POST", "/api/login", { token: document.getElementById("login-token").value });
      location.reload();
    } catch (e) { document.getElementById("login-error").textContent = e.message; }
  });
  state.me = await api("GET", "/api/me").catch(() => ({ role: "" }));
  document.getElementById("role").textContent = state.me.role ? state.me.role : "not logged in";
  if (!state.me.role) { showLogin(true); return; }
  if (state.me.login_required && !state.me.can_write) showLogin(true);
  window.addEventListener("hashchange", route);
  route();
}

document.addEventListener("DOMContentLoaded", boot);
