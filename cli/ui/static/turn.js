// earshot ui: the running turn (the composer, Stop, questions) and what the
// page hears (/api/events): a turn's events as they come, and "changed" when
// anything appended to a session, the page then reading it again.
"use strict";


function renderLive() {
  const live = state.live;
  const box = $("live");
  const parts = [];
  if (live.text) parts.push(h("div", { class: "stream" }, live.text));
  if (live.command !== null) {
    parts.push(h("div", { class: "running-command" }, h("code", {}, `$ ${live.command}`),
      h("pre", {}, live.output)));
  }
  if (live.running && !parts.length) parts.push(h("div", { class: "muted" }, "working…"));
  box.hidden = !parts.length;
  box.replaceChildren(...parts);
}

function renderComposer() {
  $("stop").hidden = !state.live.running;
  $("composer-note").textContent = state.live.running ? "a turn is running: text sent now steers it" : "";
}

function renderQuestions(questions) {
  $("questions").replaceChildren(
    ...questions.map((q) =>
      h("div", { class: "question", "data-question": q.id },
        h("p", {}, `May ${q.tool} run? `, h("code", {}, firstLine(q.detail, 200))),
        h("button", { type: "button", "data-answer": "once", onclick: () => answer(q.id, "once") }, "Yes, once"),
        h("button", { type: "button", "data-answer": "session", onclick: () => answer(q.id, "session") }, "Always, this session"),
        h("button", { type: "button", "data-answer": "deny", onclick: () => answer(q.id, "deny") }, "No")),
    ),
  );
}

async function answer(id, given) {
  try {
    await api(`/api/questions/${id}`, { answer: given });
  } catch (err) {
    toast(err.message, true);
  }
  await refresh();
}

async function send(text) {
  try {
    const doc = await api(sessionPath(state.session) + "/prompt", { text });
    if (doc.sent !== "started") toast(doc.sent === "steered" ? "sent into the running turn" : "queued: it goes next");
    state.live.running = true;
    renderLive();
    renderComposer();
    return true;
  } catch (err) {
    toast(err.message, true);
    return false;
  }
}

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const box = $("prompt");
  const text = box.value;
  if (!text.trim()) return;
  if (await send(text)) box.value = "";
});

$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  } else if (e.key === "Escape" && state.live.running) {
    stop();
  }
});

async function stop() {
  try {
    await api(sessionPath(state.session) + "/stop", {});
  } catch (err) {
    toast(err.message, true);
  }
}
$("stop").addEventListener("click", stop);

$("new-session").addEventListener("click", async () => {
  try {
    const doc = await api("/api/sessions", {});
    await loadState();
    await show(doc.session);
    $("prompt").focus();
  } catch (err) {
    toast(err.message, true);
  }
});


// -- live -----------------------------------------------------------------------

let refreshTimer = null;
let stateTimer = null;

function soon(which) {
  if (which === "session") {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => refresh().catch((err) => toast(err.message, true)), 60);
  } else {
    clearTimeout(stateTimer);
    stateTimer = setTimeout(() => loadState().catch((err) => toast(err.message, true)), 60);
  }
}

function onTurn(ev) {
  const live = state.live;
  switch (ev.event) {
    case "started":
      live.running = true;
      live.text = "";
      break;
    case "text":
      live.text += ev.text;
      break;
    case "reply":
      live.text = "";
      break;
    case "command":
      live.command = ev.command;
      live.output = "";
      break;
    case "output":
      live.output += ev.text;
      break;
    case "command_ended":
      live.command = null;
      live.output = "";
      break;
    case "ended":
      live.running = false;
      live.text = "";
      live.command = null;
      if (ev.stop === "error") toast(ev.error, true);
      else if (ev.stop === "interrupted") toast("stopped: every call has its result");
      soon("session");
      break;
    case "notice":
      toast(ev.text);
      break;
  }
  renderLive();
  renderComposer();
}

function connect() {
  const events = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  events.onopen = () => {
    $("link").className = "link-state up";
    soon("state");
    soon("session");
  };
  events.onerror = () => {
    $("link").className = "link-state down";
  };
  events.onmessage = (message) => {
    const ev = JSON.parse(message.data);
    if (ev.kind === "changed") {
      soon("state");
      if (ev.store || ev.sessions.includes(state.session)) soon("session");
    } else if (ev.kind === "resync") {
      soon("state");
      soon("session");
    } else if (ev.kind === "turn" && ev.session === state.session) {
      onTurn(ev);
    } else if (ev.kind === "question" || ev.kind === "answered") {
      if (ev.session === state.session) soon("session");
    } else if (ev.kind === "notice") {
      toast(ev.text);
    }
  };
}

loadState().catch((err) => toast(err.message, true));
connect();
