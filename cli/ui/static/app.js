// earshot ui: the page. It reads the documents the CLI's --json prints
// (/api/...), hears what changes (/api/events, turn.js) and sends what the
// person does (POST, with the token in a header; dialogs.js for rewind, undo
// and redo). This file: helpers, the sessions, one session's transcript.
// Text goes in as text; the only HTML taken from the server is what it made
// itself (markdown, diffs).
"use strict";

const TOKEN = document.querySelector('meta[name="earshot-token"]').content;
// The token stays out of the address bar (and of screenshots, and history).
if (location.search.includes("token=")) history.replaceState(null, "", "/");

const state = {
  about: null,
  sessions: [],
  session: null, // the id shown
  at: null, // an entry whose branch is shown instead of the current path
  doc: null, // {transcript, log, running, questions}
  live: { text: "", command: null, output: "", running: false },
  opened: new Set(), // <details> kept open across refreshes
  acting: false,
};

// -- small helpers ------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "html") el.innerHTML = v; // server-made HTML only
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function $(id) {
  return document.getElementById(id);
}

async function api(path, body) {
  const init = body === undefined
    ? { headers: { "X-Earshot-Token": TOKEN } }
    : {
        method: "POST",
        headers: { "X-Earshot-Token": TOKEN, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      };
  const response = await fetch(path, init);
  let doc;
  try {
    doc = await response.json();
  } catch {
    throw new Error(`${response.status}: ${await response.text()}`);
  }
  if (!response.ok) throw new Error(doc.error ? doc.error.message : String(response.status));
  return doc;
}

function toast(text, bad = false) {
  const el = $("toast");
  el.textContent = text;
  el.className = bad ? "bad" : "";
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (el.hidden = true), bad ? 8000 : 4000);
}

function firstLine(text, max = 72) {
  const line = (text || "").trim().split("\n", 1)[0];
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

function sessionPath(id) {
  return `/api/sessions/${encodeURIComponent(id)}`;
}

// -- sessions -------------------------------------------------------------------

async function loadState() {
  const doc = await api("/api/state");
  state.about = doc;
  state.sessions = doc.sessions;
  $("root").textContent = doc.root;
  $("model").textContent = doc.model_error ? `${doc.model} (cannot send)` : doc.model;
  renderSessions();
  if (!state.session && state.sessions.length) await show(state.sessions[0].id);
  else if (!state.session) renderEmpty();
}

function renderSessions() {
  const list = $("sessions");
  list.replaceChildren(
    ...state.sessions.map((s) =>
      h(
        "li",
        {
          class: s.id === state.session ? "chosen" : "",
          "data-session": s.id,
          onclick: () => show(s.id),
        },
        h("div", { class: "s-top" },
          h("span", { class: "s-id" }, s.id.slice(0, 12)),
          h("span", { class: "s-agent" }, s.agent ? s.agent.name : "earshot")),
        h("div", { class: "s-first" }, firstLine(s.first_prompt) || "(no prompt yet)"),
        h("div", { class: "s-counts muted" },
          `${s.prompts} prompt${s.prompts === 1 ? "" : "s"} · ${s.batches} batch${s.batches === 1 ? "" : "es"} · ${s.last_activity}`),
      ),
    ),
  );
}

function renderEmpty() {
  $("session-head").replaceChildren(
    h("p", { class: "muted" }, "No sessions in this root yet. Start one with New chat, earshot chat, or an agent with earshot's hooks."),
  );
  $("transcript").replaceChildren();
  $("composer").hidden = true;
}

async function show(id, at = null) {
  if (state.session !== id) {
    state.live = { text: "", command: null, output: "", running: false };
    state.opened.clear();
  }
  state.session = id;
  state.at = at;
  renderSessions();
  await refresh();
}

// -- one session ----------------------------------------------------------------

async function refresh() {
  if (!state.session) return;
  const id = state.session;
  const query = state.at ? `?at=${encodeURIComponent(state.at)}` : "";
  const doc = await api(sessionPath(id) + query);
  if (id !== state.session) return; // another was chosen meanwhile
  state.doc = doc;
  state.live.running = doc.running;
  render();
}

function summaryOf(id) {
  return state.sessions.find((s) => s.id === id) || null;
}

function render() {
  const doc = state.doc;
  const t = doc.transcript;
  const summary = summaryOf(state.session);
  const agent = t.agent || (summary && summary.agent);
  const canChat = !agent;
  $("session-head").replaceChildren(
    h("h1", {}, `session ${state.session}`),
    h("span", { class: "muted" }, agent ? `recorded from ${agent.name}` : "earshot chat"),
    h("span", { class: "head-buttons" },
      h("button", { id: "undo", type: "button", onclick: () => undoRedo("undo") }, "Undo"),
      h("button", { id: "redo", type: "button", onclick: () => undoRedo("redo") }, "Redo")),
  );
  const note = $("branch-note");
  note.hidden = t.current;
  if (!t.current) {
    note.replaceChildren(
      "This is a branch an earlier rewind left. ",
      h("a", { href: "#", onclick: (e) => { e.preventDefault(); show(state.session); } }, "Back to the current path"),
    );
  }
  const scroller = document.scrollingElement;
  const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  $("transcript").replaceChildren(...transcriptItems(t, doc.log));
  renderLive();
  renderQuestions(doc.questions || []);
  $("composer").hidden = !canChat;
  $("composer-off").hidden = canChat;
  if (!canChat) {
    $("composer-off").textContent = `This session was recorded from ${agent.name}: go on there; the ↶, Undo and Redo buttons work here.`;
  }
  renderComposer();
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;
}

function batchesBySeq(log) {
  const out = new Map();
  for (const b of log.batches) out.set(b.seq, b);
  return out;
}

function transcriptItems(t, log) {
  const batches = batchesBySeq(log);
  const items = [];
  for (const item of t.items) {
    const el = itemElement(item, batches, t.current);
    if (el) items.push(el);
  }
  // Batches the log has and no link of the transcript names (a hook session
  // whose log links none): listed after the conversation.
  const linked = new Set(t.items.filter((i) => i.type === "batch").map((i) => i.batch));
  const unlinked = log.batches.filter((b) => !linked.has(b.seq));
  if (unlinked.length && t.current) {
    items.push(h("h2", { class: "muted" }, "Batches"));
    for (const b of unlinked) items.push(batchElement(b));
  }
  if (!items.length) items.push(h("p", { class: "muted empty" }, "Nothing said yet in this session."));
  return items;
}

function alternativesElement(item) {
  if (!item.alternatives || !item.alternatives.length) return null;
  return h("div", { class: "branches" },
    `${item.alternatives.length} other branch${item.alternatives.length === 1 ? "" : "es"} here: `,
    ...item.alternatives.map((alt) =>
      h("a", {
        href: "#",
        class: "branch",
        "data-leaf": alt.leaf,
        onclick: (e) => { e.preventDefault(); show(state.session, alt.leaf); },
      }, firstLine(alt.first_line, 40) || alt.type),
    ),
  );
}

function itemElement(item, batches, current) {
  switch (item.type) {
    case "user":
      return h("article", { class: "item user", "data-prompt": item.n, "data-entry": item.id },
        h("div", { class: "item-head" },
          h("span", { class: "n" }, `#${item.n}`),
          h("span", { class: "muted" }, item.time),
          current ? h("button", {
            type: "button",
            class: "rewind",
            title: `Rewind to before prompt ${item.n}`,
            onclick: (e) => rewindPopover(item, e.currentTarget),
          }, "↶") : null),
        h("div", { class: "text" }, item.text),
        alternativesElement(item));
    case "assistant":
      return h("article", { class: "item assistant", "data-entry": item.id },
        h("div", { class: "md", html: item.html }), alternativesElement(item));
    case "tool_call":
      return toolElement(item);
    case "tool_result":
      return h("details", { class: "item tool" }, h("summary", {}, "result"),
        h("pre", {}, item.output));
    case "batch": {
      const b = batches.get(item.batch);
      return b ? batchElement(b) : h("div", { class: "item batch muted" }, `batch ${item.batch}`);
    }
    case "navigation":
      return h("div", { class: "item navigation muted", "data-where": item.where },
        item.where === "to"
          ? `↶ rewound to here${item.prompt ? ` (before prompt ${item.prompt})` : ""} · ${item.time}`
          : `↶ rewound from here · ${item.time}`);
    case "compaction":
      return keptOpen(`c-${item.id}`, h("details", { class: "item compaction" },
        h("summary", {}, `compacted: the context went on from a summary (${item.summary.length.toLocaleString()} characters)`),
        h("div", { class: "md", html: item.html })));
    case "permission":
      return h("div", { class: "item permission muted" }, `allowed ${item.tool} for the session`);
    default:
      return h("div", { class: "item other muted" }, item.type);
  }
}

function keptOpen(key, details) {
  details.dataset.key = key;
  if (state.opened.has(key)) details.open = true;
  details.addEventListener("toggle", () => {
    if (details.open) state.opened.add(key);
    else state.opened.delete(key);
  });
  return details;
}

function callTitle(item) {
  const input = item.input || {};
  if (item.name === "bash") return `bash: ${input.command || ""}`;
  if (input.path) return `${item.name} ${input.path}`;
  return item.name;
}

function toolElement(item) {
  const result = item.result;
  const status = !result ? "no result yet" : result.interrupted ? "interrupted" : result.is_error ? "error" : "";
  return keptOpen(`t-${item.id}`, h("details", { class: `item tool${result && result.is_error ? " error" : ""}` },
    h("summary", {}, h("code", {}, firstLine(callTitle(item), 100)), status ? h("span", { class: "muted" }, ` · ${status}`) : null),
    h("pre", { class: "input" }, JSON.stringify(item.input, null, 2)),
    result ? h("pre", { class: "output" }, result.output) : null));
}

function counts(b) {
  let added = 0, deleted = 0;
  for (const c of b.changes) {
    if (c.before_kind === null) added++;
    else if (c.after_kind === null) deleted++;
  }
  return [added, b.changes.length - added - deleted, deleted];
}

function batchFlags(b) {
  const flags = [];
  if (b.undone) flags.push(`undone by ${b.undone_by}`);
  if (b.self_created) flags.push(`${b.kind} of ${b.targets.join(", ")}`);
  if (b.folded) flags.push("folded: changes go to the next snapshot");
  if (b.interrupted) flags.push("interrupted");
  if (b.uncovered.length) flags.push(`${b.uncovered.length} not covered by undo`);
  if (!b.changes.length && !b.folded) flags.push("changed nothing");
  return flags;
}

function batchElement(b) {
  const [a, m, d] = counts(b);
  const key = `b-${b.seq}`;
  const details = h("details", { class: `item batch${b.undone ? " undone" : ""}`, "data-batch": b.seq },
    h("summary", {},
      h("span", { class: "b-seq" }, `batch ${b.seq}`),
      h("span", { class: "b-counts" }, h("span", { class: "add" }, `+${a}`), " ", h("span", { class: "mod" }, `~${m}`), " ", h("span", { class: "del" }, `-${d}`)),
      ...batchFlags(b).map((f) => h("span", { class: "flag" }, f))),
    h("div", { class: "b-files" }, "…"),
  );
  details.addEventListener("toggle", () => {
    if (details.open) {
      state.opened.add(key);
      loadDiff(b, details.querySelector(".b-files"));
    } else state.opened.delete(key);
  });
  if (state.opened.has(key)) {
    details.open = true;
  }
  return details;
}

async function loadDiff(b, box) {
  try {
    const doc = await api(`${sessionPath(state.session)}/batches/${b.seq}`);
    const uncovered = new Map(b.uncovered.map((u) => [u.path, u.reason]));
    box.replaceChildren(
      ...doc.changes.map((c) =>
        h("div", { class: "file", "data-path": c.path },
          h("div", { class: `f-head ${c.change}` }, `${{ added: "+", deleted: "-", modified: "~" }[c.change] || "m"} ${c.path}`,
            uncovered.has(c.path) ? h("span", { class: "flag" }, `not covered by undo: ${uncovered.get(c.path)}`) : null),
          c.html ? h("pre", { class: "diff hl", html: c.html }) : null),
      ),
      ...(doc.changes.length ? [] : [h("p", { class: "muted" }, "no changes")]),
    );
  } catch (err) {
    box.textContent = err.message;
  }
}

