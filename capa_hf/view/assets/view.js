// CAPA's transcript viewer: reads window.CAPA_VIEW (data.js, written by `capa view`) and draws
// the session list with its filters, or one session as a chat, alone or beside another run's.
// Every text from a run is inserted as text, never as HTML.
"use strict";

const DATA = window.CAPA_VIEW || {runs: [], sessions: [], contexts: {}, notes: []};
const FILTERS = ["run", "condition", "persona", "mechanisms", "role", "solved", "turns"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function pct(x) { return x === undefined || x === null ? "" : (100 * x).toFixed(1) + "%"; }
function runName(i) { return DATA.runs[i] ? DATA.runs[i].name : String(i); }
function solvedLabel(s) { return s.incomplete ? "incomplete" : (s.solved ? "yes" : "no"); }

// ---- the value a filter compares, and the options it offers ----
function fieldValues(s, field) {
  if (field === "mechanisms") return s.mechanisms;
  if (field === "solved") return [solvedLabel(s)];
  if (field === "run") return [runName(s.run)];
  return [s[field] === null || s[field] === undefined ? "" : String(s[field])];
}

function fillFilters() {
  for (const field of FILTERS) {
    const select = document.querySelector(`#filters select[data-field="${field}"]`);
    const values = new Set();
    DATA.sessions.forEach(s => fieldValues(s, field).forEach(v => v !== "" && values.add(v)));
    const sorted = [...values].sort((a, b) => (field === "turns" ? Number(a) - Number(b) : a.localeCompare(b)));
    select.replaceChildren(el("option", {value: "", text: "any"}),
                           ...sorted.map(v => el("option", {value: v, text: v})));
    select.addEventListener("change", drawList);
  }
  document.getElementById("filter-text").addEventListener("input", drawList);
  document.getElementById("filter-reset").addEventListener("click", () => {
    document.querySelectorAll("#filters select").forEach(s => { s.value = ""; });
    document.getElementById("filter-text").value = "";
    drawList();
  });
}

function matching() {
  const wanted = {};
  document.querySelectorAll("#filters select").forEach(s => { if (s.value) wanted[s.dataset.field] = s.value; });
  const text = document.getElementById("filter-text").value.trim().toLowerCase();
  return DATA.sessions.filter(s =>
    Object.entries(wanted).every(([field, v]) => fieldValues(s, field).includes(v)) &&
    (!text || `${s.session_id} ${s.task} ${s.cell}`.toLowerCase().includes(text)));
}

// ---- the list ----
function drawRuns() {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren(...DATA.runs.map(r => el("tr", {},
    el("td", {text: r.name}), el("td", {text: r.model}), el("td", {text: r.condition}),
    el("td", {text: r.split}), el("td", {text: r.records + (r.incomplete ? ` (${r.incomplete} incomplete)` : "")}),
    el("td", {text: pct(r.es)}), el("td", {text: pct(r.ft_es)}),
    el("td", {text: r.ttc === undefined ? "" : r.ttc.toFixed(2)}))));
  document.getElementById("notes").replaceChildren(...DATA.notes.map(n => el("li", {text: n})));
}

function drawList() {
  const rows = matching();
  document.getElementById("count").textContent =
    `${rows.length} of ${DATA.sessions.length} session records`;
  document.querySelector("#session-table tbody").replaceChildren(...rows.map(s => {
    const row = el("tr", {"data-key": s.key, "data-run": s.run, class: "session-row " + solvedLabel(s)},
      el("td", {text: runName(s.run)}), el("td", {text: s.condition}),
      el("td", {}, el("a", {href: sessionHash(s.key, s.run), text: s.key})),
      el("td", {text: s.persona || ""}), el("td", {text: s.mechanisms.join(" + ")}),
      el("td", {text: s.task}), el("td", {text: s.role || ""}),
      el("td", {class: "solved", text: solvedLabel(s)}), el("td", {class: "turns", text: s.turns}));
    row.addEventListener("click", ev => { if (ev.target.tagName !== "A") location.hash = sessionHash(s.key, s.run); });
    return row;
  }));
}

// ---- one session ----
function sessionHash(key, run, compare) {
  let h = `#s=${encodeURIComponent(key)}&r=${run}`;
  if (compare !== undefined && compare !== null) h += `&c=${compare}`;   // "&c=" shows one run alone
  return h;
}

function findSession(key, run) { return DATA.sessions.find(s => s.key === key && String(s.run) === String(run)); }

// Text with ``` fences as code blocks, and the given phrases marked.
function richText(text, marks) {
  const out = [];
  const parts = text.split(/```[^\n]*\n?/);
  parts.forEach((part, i) => {
    const trimmed = parts.length > 1 ? part.replace(/^\n+|\s+$/g, "") : part;
    if (i % 2 === 1) { out.push(el("pre", {class: "code"}, el("code", {text: trimmed}))); return; }
    if (trimmed) out.push(el("span", {}, ...markPhrases(trimmed, marks || [])));
  });
  return out;
}

function markPhrases(text, marks) {
  for (const m of marks) {
    const at = m.phrase ? text.indexOf(m.phrase) : -1;
    if (at >= 0) {
      return [...markPhrases(text.slice(0, at), marks), el("mark", {class: "clarification", title: m.id, text: m.phrase}),
              ...markPhrases(text.slice(at + m.phrase.length), marks)];
    }
  }
  return [text];
}

function itemLabel(h) {
  const what = h.kind === "convention" ? `convention ${h.dimension}` : `task ${h.keypoint_id}`;
  return `${h.id} (${what}, ${h.mechanism})`;
}

function revealText(s, h) {
  const t = s.hidden.find(x => x.id === h.id);
  return t && t.revealed_turn ? `after turn ${t.revealed_turn}` : "never";
}

// The session's hidden items, once, with where each run's user revealed them.
function hiddenPanel(s, pair) {
  if (!s.hidden.length) return el("p", {class: "muted", text: "hidden items: not known for this record"});
  const runs = [s, ...(pair ? [pair] : [])];
  return el("table", {class: "grid hidden-items"},
    el("thead", {}, el("tr", {}, el("th", {text: "hidden item"}), el("th", {text: "the request says"}),
      el("th", {text: "the user's clarification"}), el("th", {text: "in history"}),
      ...runs.map(r => el("th", {text: `revealed (${runName(r.run)})`})))),
    el("tbody", {}, ...s.hidden.map(h => el("tr", {class: "hidden-item", "data-item": h.id},
      el("td", {}, el("b", {text: itemLabel(h)})),
      el("td", {class: "muted", text: h.obscured_as ? `"${h.obscured_as}"` : "(left out)"}),
      el("td", {text: h.clarification}),
      el("td", {text: h.resolvable_from_history ? "shown" : "no"}),
      ...runs.map(r => el("td", {class: "revealed-at " + (revealText(r, h) === "never" ? "unrevealed" : "revealed"),
                                 "data-run": r.run, text: revealText(r, h)}))))));
}

function contextPanel(s) {
  const text = s.context ? DATA.contexts[s.context] : undefined;
  if (text === undefined) return el("p", {class: "muted context-missing", text: "context the model saw: not stored in this run"});
  const sources = s.context_sources.length ? `; from ${s.context_sources.join(", ")}` : "";
  return el("details", {class: "context"},
    el("summary", {text: `system prompt and history context (${text.length} chars${sources})`}),
    el("pre", {class: "context-text", text: text}));
}

function submissionBox(sub, turn) {
  const extraction = Object.entries(sub.extraction).map(([k, v]) =>
    el("li", {text: `${k}: ${Array.isArray(v) ? v.join(" | ") : (typeof v === "object" ? JSON.stringify(v) : v)}`}));
  const f = sub.failure;
  return el("div", {class: `submission status-${sub.status}`, "data-turn": turn},
    el("div", {class: "verdict"}, el("b", {text: `submission, turn ${turn}: ${sub.status}`}),
      sub.sandbox_status && sub.sandbox_status !== sub.status ? ` (sandbox: ${sub.sandbox_status})` : ""),
    sub.veto ? el("div", {class: "veto", text: `veto: ${sub.veto}`}) : null,
    f ? el("div", {class: "failing-check"}, el("b", {text: f.type || "failure"}),
      f.line ? el("code", {text: " " + f.line}) : null, f.message ? el("div", {class: "muted", text: f.message}) : null) : null,
    extraction.length ? el("ul", {class: "extraction"}, ...extraction) : null,
    el("details", {}, el("summary", {text: "code that ran"}), el("pre", {class: "code"}, el("code", {text: sub.code}))));
}

function message(m, s) {
  const items = Object.fromEntries(s.hidden.map(h => [h.id, h]));
  const reveals = (m.reveals || []).map(id => items[id]).filter(Boolean);
  const head = m.role === "assistant" ? `assistant, turn ${m.turn} (${m.kind})` : (m.turn === 0 ? "user: the request" : "user");
  return el("div", {class: `msg ${m.role}` + (reveals.length ? " reveal" : ""), "data-turn": m.turn},
    el("div", {class: "who", text: head},
      ...reveals.map(h => el("span", {class: "badge reveal-badge", text: `reveals ${itemLabel(h)}`}))),
    el("div", {class: "text"}, ...richText(m.text, reveals.map(h => ({id: h.id, phrase: h.clarification})))),
    m.submission ? submissionBox(m.submission, m.turn) : null);
}

function outcomeLine(s) {
  if (s.incomplete) return el("p", {class: "outcome incomplete", text: `incomplete (not scored): ${s.error || "engine error"}`});
  return el("p", {class: "outcome " + (s.solved ? "yes" : "no"),
    text: s.solved ? `solved at turn ${s.success_turn}` : `not solved in ${s.turns} turns`});
}

function column(s) {
  const run = DATA.runs[s.run] || {};
  return el("div", {class: "column", "data-run": s.run},
    el("h3", {text: `${runName(s.run)}: ${s.condition}`}), el("p", {class: "muted", text: run.model || ""}),
    outcomeLine(s), contextPanel(s),
    el("div", {class: "chat"}, ...s.chat.map(m => message(m, s))));
}

function drawSession(key, run, compare) {
  const s = findSession(key, run);
  if (!s) { document.getElementById("session-head").textContent = `no record ${key} in run ${runName(run)}`; return; }
  document.getElementById("session-head").replaceChildren(el("h2", {text: s.key}),
    el("p", {text: `cell ${s.cell || "-"}, persona ${s.persona || "-"}, ${s.mechanisms.join(" + ") || "no mechanism"}, ` +
      `task ${s.task}, role ${s.role || "-"}, items: ${s.item_kinds.join(", ") || "none"}`}));
  const others = DATA.sessions.filter(o => o.key === key && o.run !== s.run);
  const select = document.getElementById("compare-select");
  select.replaceChildren(el("option", {value: "", text: "(nothing)"}),
    ...others.map(o => el("option", {value: o.run, text: `${runName(o.run)}: ${o.condition}`})));
  select.value = compare === null ? "" : String(compare);
  select.onchange = () => { location.hash = sessionHash(key, run, select.value); };
  const pair = compare === null ? null : others.find(o => String(o.run) === String(compare));
  document.getElementById("hidden").replaceChildren(hiddenPanel(s, pair));
  document.getElementById("columns").className = pair ? "two" : "one";
  document.getElementById("columns").replaceChildren(column(s), ...(pair ? [column(pair)] : []));
}

// ---- routing: #s=<key>&r=<run>[&c=<run>] opens a session; no hash shows the list ----
function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  const key = params.get("s");
  document.getElementById("list-view").hidden = Boolean(key);
  document.getElementById("session-view").hidden = !key;
  if (key) {
    const run = params.get("r") || "0";
    let compare = params.get("c");
    if (compare === null) {   // by default, beside the first other run that played this session
      const other = DATA.sessions.find(o => o.key === key && String(o.run) !== String(run));
      compare = other ? String(other.run) : null;
    } else if (compare === "") compare = null;
    drawSession(key, run, compare);
    window.scrollTo(0, 0);
  }
}

drawRuns();
fillFilters();
drawList();
window.addEventListener("hashchange", route);
route();
