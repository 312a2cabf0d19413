// earshot ui: the rewind, undo and redo dialogs. Each shows the dry run the
// server made (the CLI's --dry-run --json) and sends it back with the
// confirmation; overwriting conflicts is a second, explicit yes.
"use strict";


function closeDialog() {
  $("dialog-back").hidden = true;
  $("dialog").replaceChildren();
}

function openDialog(...children) {
  $("dialog").replaceChildren(...children);
  $("dialog-back").hidden = false;
}

$("dialog-back").addEventListener("click", (e) => {
  if (e.target === $("dialog-back") && !state.acting) closeDialog();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && !$("dialog-back").hidden && !state.acting) closeDialog();
});

function impactList(doc, notCovered) {
  const rows = [];
  const add = (what, paths, cls) => {
    for (const p of paths) rows.push(h("li", { class: cls }, h("span", { class: "what" }, what), " ", p));
  };
  add("restore", doc.restored, "restore");
  add("delete", doc.deleted, "delete");
  add("rmdir", doc.removed_dirs.map((d) => d + "/"), "delete");
  for (const m of doc.moved) rows.push(h("li", { class: "restore" }, h("span", { class: "what" }, "move"), ` ${m.from} → ${m.to}`));
  add("conflict", doc.conflicts, "conflict");
  for (const k of doc.kept) rows.push(h("li", { class: "kept" }, h("span", { class: "what" }, "kept"), ` ${k.path}: ${k.reason}`));
  for (const u of notCovered || []) rows.push(h("li", { class: "uncovered" }, h("span", { class: "what" }, "not covered"), ` ${u.path}: ${u.reason}`));
  if (!rows.length) rows.push(h("li", { class: "muted" }, "no file changes"));
  return h("ul", { class: "impact" }, ...rows);
}

function busy(on) {
  state.acting = on;
  for (const b of $("dialog").querySelectorAll("button")) b.disabled = on;
}

async function rewindPopover(item, button) {
  if (state.acting) return toast("a rewind runs already: wait for it", true);
  const n = item.n;
  const head = h("h2", {}, `Rewind to before prompt ${n}`);
  const quote = h("blockquote", {}, firstLine(item.text, 200));
  const body = h("div", { class: "choices" }, h("p", { class: "muted" }, "looking at what it would do…"));
  openDialog(head, quote, body, h("div", { class: "dialog-buttons" }, h("button", { type: "button", class: "cancel", onclick: closeDialog }, "Cancel")));
  let preview = null;
  let refusal = null;
  try {
    preview = await api(sessionPath(state.session) + "/rewind/preview", { n });
  } catch (err) {
    refusal = err.message;
  }
  const choices = [];
  choices.push(h("button", { type: "button", class: "conversation-only", onclick: () => doRewind(n, false, null, false) },
    "Conversation only"));
  if (preview && preview.code) {
    choices.push(h("button", { type: "button", class: "with-code", onclick: () => showCodeImpact(n, preview) },
      "Conversation and code…"));
  }
  const notes = [];
  if (state.live.running) notes.push(h("p", { class: "warn" }, "A turn is running: it is stopped first."));
  if (refusal) notes.push(h("p", { class: "warn" }, `The code cannot be rewound now: ${refusal}`));
  else if (preview && !preview.code) notes.push(h("p", { class: "muted" }, "Nothing after this prompt is left to undo: only the conversation goes back."));
  body.replaceChildren(...notes, h("div", { class: "choice-buttons" }, ...choices));
}

function showCodeImpact(n, preview) {
  const code = preview.code;
  const conflicts = code.conflicts.length;
  const buttons = [
    h("button", { type: "button", class: "cancel", onclick: closeDialog }, "Cancel"),
    h("button", { type: "button", id: "confirm", class: "confirm", onclick: () => doRewind(n, true, code, false) },
      conflicts ? `Rewind; leave the ${conflicts} conflicting alone` : "Rewind conversation and code"),
  ];
  if (conflicts) {
    buttons.push(h("button", { type: "button", class: "force", onclick: () => {
      if (confirm(`Overwrite ${conflicts} file${conflicts === 1 ? "" : "s"} changed since the batch? Their current content is lost from the tree (earshot redo brings the batch's back, not theirs).`)) doRewind(n, true, code, true);
    } }, `Overwrite ${conflicts} conflicting…`));
  }
  openDialog(
    h("h2", {}, `Rewind to before prompt ${n}, and its code`),
    h("p", {}, `Undoes batch${code.batches.length === 1 ? "" : "es"} ${code.batches.join(", ")}:`),
    impactList(code, preview.not_covered),
    h("div", { class: "dialog-buttons" }, ...buttons),
  );
}

async function doRewind(n, code, shown, force) {
  busy(true);
  let doc;
  try {
    doc = await api(sessionPath(state.session) + "/rewind", { n, code, shown, force });
  } catch (err) {
    toast(err.message, true);
    return;
  } finally {
    busy(false); // done: the next action may start while the page reads again
  }
  closeDialog();
  $("prompt").value = doc.text;
  toast(`back before prompt ${n}${code ? ", code included" : ""}; its text is in the composer`);
  $("prompt").focus();
  await refresh();
}

async function undoRedo(what) {
  if (state.acting) return;
  openDialog(h("h2", {}, what === "undo" ? "Undo the last batch" : "Redo the last undo"), h("p", { class: "muted" }, "looking at what it would do…"));
  let preview;
  try {
    preview = await api(`${sessionPath(state.session)}/${what}/preview`, { count: 1 });
  } catch (err) {
    openDialog(h("h2", {}, what === "undo" ? "Undo" : "Redo"), h("p", { class: "warn" }, err.message),
      h("div", { class: "dialog-buttons" }, h("button", { type: "button", onclick: closeDialog }, "Close")));
    return;
  }
  const conflicts = preview.conflicts.length;
  const buttons = [
    h("button", { type: "button", class: "cancel", onclick: closeDialog }, "Cancel"),
    h("button", { type: "button", id: "confirm", class: "confirm", onclick: () => doUndoRedo(what, preview, false) },
      conflicts ? `${what === "undo" ? "Undo" : "Redo"}; leave the ${conflicts} conflicting alone` : (what === "undo" ? "Undo" : "Redo")),
  ];
  if (conflicts) {
    buttons.push(h("button", { type: "button", class: "force", onclick: () => {
      if (confirm(`Overwrite ${conflicts} file${conflicts === 1 ? "" : "s"} changed since?`)) doUndoRedo(what, preview, true);
    } }, `Overwrite ${conflicts} conflicting…`));
  }
  openDialog(
    h("h2", {}, `${what === "undo" ? "Undo" : "Redo"} batch${preview.batches.length === 1 ? "" : "es"} ${preview.batches.join(", ")}`),
    impactList(preview, preview.not_covered),
    h("div", { class: "dialog-buttons" }, ...buttons),
  );
}

async function doUndoRedo(what, shown, force) {
  busy(true);
  let doc;
  try {
    doc = await api(`${sessionPath(state.session)}/${what}`, { count: 1, shown, force });
  } catch (err) {
    toast(err.message, true);
    return;
  } finally {
    busy(false);
  }
  closeDialog();
  toast(doc.lines.join("\n"));
  await refresh();
}

