// locklab play: the page drives one session on the server. Every answer
// carries the whole state; the page only renders it. Each request that
// changes the run carries seq, the number of steps the page has seen, so a
// repeated click is refused by the server instead of running twice.
"use strict";

const EPOCH_MS = Date.UTC(2024, 0, 1);
const SOLVED_KEY = "locklab.play.solved";
const LEVEL_KEY = "locklab.play.level";

let levels = [];
let cur = null; // the last answer of the server
let busy = false;

const $ = (id) => document.getElementById(id);

function solvedSet() {
  try { return JSON.parse(localStorage.getItem(SOLVED_KEY) || "{}"); } catch (e) { return {}; }
}
function markSolved(id) {
  const s = solvedSet();
  s[id] = true;
  localStorage.setItem(SOLVED_KEY, JSON.stringify(s));
}

async function api(path, body) {
  const opts = body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: "bad answer from the server (" + r.status + ")" }; }
  return { status: r.status, data };
}

function notice(text, isError) {
  const n = $("notice");
  if (!text) { n.hidden = true; return; }
  n.textContent = text;
  n.className = isError ? "error" : "";
  n.hidden = false;
}

function setBusy(b, what) {
  busy = b;
  document.querySelectorAll("button").forEach((x) => { if (b) x.disabled = true; });
  $("status").textContent = b ? (what || "running…") : "";
  if (!b && cur) render();
}

// --- levels ---------------------------------------------------------------

function renderLevels() {
  const solved = solvedSet();
  const ol = $("level-list");
  ol.textContent = "";
  for (const l of levels) {
    const li = document.createElement("li");
    li.id = "level-" + l.id;
    if (solved[l.id]) li.classList.add("solved");
    if (cur && cur.level.id === l.id) li.classList.add("current");
    const a = document.createElement("a");
    a.textContent = l.title;
    a.href = "#" + l.id;
    a.onclick = (ev) => { ev.preventDefault(); switchLevel(l.id); };
    li.appendChild(a);
    if (l.unavailable) {
      // Listed, with the reason, but not started.
      li.classList.add("unavailable");
      a.title = l.unavailable;
      const why = document.createElement("span");
      why.className = "why";
      why.textContent = " (unavailable here)";
      why.title = l.unavailable;
      li.appendChild(why);
    }
    ol.appendChild(li);
  }
}

// unavailable says why a level cannot be played here; false when it can.
function unavailable(id) {
  const l = levels.find((x) => x.id === id);
  if (!l || !l.unavailable) return false;
  notice(l.title + " is unavailable here: " + l.unavailable);
  return true;
}

async function switchLevel(id) {
  if (busy || unavailable(id)) return;
  localStorage.setItem(LEVEL_KEY, id);
  history.replaceState(null, "", "#" + id);
  $("hint-text").hidden = true;
  if (!cur) return start(id, "");
  setBusy(true, "starting level…");
  const { status, data } = await api("/api/reset", { session: cur.session, level: id });
  handle(status, data, () => start(id, ""));
}

async function start(levelID, prefix) {
  setBusy(true, "starting servers…");
  const { status, data } = await api("/api/sessions", { level: levelID, prefix: prefix });
  if (status !== 200) {
    setBusy(false);
    notice(data.error, true);
    return false;
  }
  cur = data;
  notice("");
  setBusy(false);
  return true;
}

// handle applies an answer; onGone restarts when the session is gone.
async function handle(status, data, onGone) {
  if (status === 200) {
    cur = data;
    notice("");
  } else if (status === 404 && onGone) {
    notice("Your session had ended (idle too long); starting a new one and replaying your steps.");
    busy = false;
    await onGone();
    if (!$("notice").classList.contains("error")) notice("Your session had ended (idle too long): a new one replayed your steps.");
    return;
  } else if (status === 409 && data.state) {
    cur = data.state;
    notice(data.error, true);
  } else {
    notice(data.error || ("error " + status), true);
  }
  setBusy(false);
}

// --- actions ----------------------------------------------------------------

async function step(text) {
  if (busy || !cur) return;
  $("hint-text").hidden = true;
  setBusy(true, "running " + text + "…");
  const t0 = performance.now();
  const { status, data } = await api("/api/step", { session: cur.session, seq: cur.seq, step: text });
  const prev = cur.state.schedule;
  await handle(status, data, async () => {
    if (await start(cur.level.id, prev)) await step(text);
  });
  $("status").textContent = status === 200 ? text + " took " + Math.round(performance.now() - t0) + " ms" : "";
}

async function undo() {
  if (busy || !cur) return;
  setBusy(true, "replaying…");
  const prev = cur.state.schedule.split(" ").filter(Boolean);
  const { status, data } = await api("/api/undo", { session: cur.session, seq: cur.seq });
  await handle(status, data, () => start(cur.level.id, prev.slice(0, -1).join(" ")));
}

async function reset() {
  if (busy || !cur) return;
  setBusy(true, "resetting…");
  const { status, data } = await api("/api/reset", { session: cur.session });
  await handle(status, data, () => start(cur.level.id, ""));
}

async function hint() {
  if (busy || !cur) return;
  setBusy(true, "asking the explorer (the first time takes a few seconds)…");
  const { status, data } = await api("/api/hint", { session: cur.session });
  setBusy(false);
  const h = $("hint-text");
  if (status !== 200) { notice(data.error, true); return; }
  h.textContent = data.message + (data.schedule ? "  The counterexample: " + data.schedule : "");
  h.hidden = false;
  document.querySelectorAll("button.hinted").forEach((b) => b.classList.remove("hinted"));
  if (data.next) {
    const b = document.querySelector('button[data-step="' + CSS.escape(data.next) + '"]');
    if (b) b.classList.add("hinted");
  }
}

// --- rendering --------------------------------------------------------------

// owners names each token by the one client that wrote it ("c1's"): from
// the acquisitions, and from the value of every SET a client sent or is
// about to send (a Redlock token is known before the majority is).
function owners(h, clients) {
  const who = {};
  const add = (token, id) => {
    who[token] = who[token] || new Set();
    who[token].add("c" + id);
  };
  for (const a of h.acquisitions || []) add(a.token, a.client);
  const sent = (args, id) => { if (args && args[0] === "SET" && args.length >= 3) add(args[2], id); };
  for (const e of h.events || []) if (e.client) sent(e.command, e.client);
  for (const c of clients || []) for (const n of c.next || []) sent(n.command, c.id);
  const out = {};
  for (const t in who) if (who[t].size === 1) out[t] = [...who[t]][0] + "'s";
  return out;
}

function short(v, own) {
  if (v === undefined || v === null) return "";
  const s = String(v).replace(/^"(.*)"$/, "$1");
  if (own[s]) return own[s];
  if (/^\d{13}$/.test(s)) {
    const d = Number(s) - EPOCH_MS;
    if (Math.abs(d) < 86400000) return "@" + (d / 1000).toFixed(3).replace(/\.?0+$/, "") + "s";
  }
  if (s.length > 24) return s.slice(0, 22) + "…";
  return s;
}

function cmdText(args, own) {
  return args.map((a, i) => (i === 0 ? a : short(a, own))).join(" ");
}

// servers says what a level plays on, in its store's words.
function servers(l) {
  return l.servers || l.nodes + (l.nodes > 1 ? " servers" : " server");
}

function td(cls, text) {
  const c = document.createElement("td");
  if (cls) c.className = cls;
  if (text !== undefined) c.textContent = text;
  return c;
}

function render() {
  const r = cur, st = r.state, h = st.history, own = owners(h, st.clients);
  const l = r.level;
  if (r.solved) markSolved(l.id);
  renderLevels();
  $("level-title").textContent = l.title;
  $("level-goal").textContent = l.goal;
  $("level-meta").textContent = "strategy " + l.strategy + " · scenario " + l.scenario + " · checks " + l.property +
    " · " + servers(l);
  $("level-docs").href = l.docs;
  $("level-story").textContent = l.story;

  // Banner: a violation, or a safe level played to its end.
  const b = $("banner");
  b.className = "";
  if (r.violation) {
    $("banner-title").textContent = r.violation.outcome + " (" + r.violation.property + ") at step " + r.violation.step +
      (r.solved ? " — level solved!" : "");
    $("banner-text").textContent = r.violation.message;
    $("banner-replay").textContent = r.replay;
    b.hidden = false;
  } else if (r.solved) {
    b.className = "solved-safe";
    $("banner-title").textContent = "Level solved: nothing broke.";
    $("banner-text").textContent = l.why || "";
    $("banner-replay").textContent = r.replay;
    b.hidden = false;
  } else {
    b.hidden = true;
  }
  if (r.message && !r.solved) notice(r.message, !!st.error);
  else if (st.done && !r.violation && !r.solved) notice("The run is over and nothing broke: undo, or reset and try another order.");

  // Head: one column per client and per node.
  const head = $("lane-head"), next = $("lane-next");
  head.textContent = ""; next.textContent = "";
  const th = (t) => { const x = document.createElement("th"); x.textContent = t; return x; };
  head.appendChild(th("#")); head.appendChild(th("event"));
  next.appendChild(th("")); next.appendChild(th("next"));
  for (const c of st.clients) {
    const x = th("c" + c.id + " ");
    const s = document.createElement("span");
    s.className = "client-state";
    const bits = [];
    if (c.crashed) bits.push(c.holding ? "crashed holding the lock" : "crashed");
    else if (c.holding) bits.push("holds the lock");
    if (c.done && !c.crashed) bits.push("done");
    if (c.isolated) bits.push("cut off");
    if (c.paused) bits.push("paused");
    if (c.skew) bits.push("clock " + c.skew);
    s.textContent = bits.join(", ") || c.program;
    if (c.holding && !c.crashed) s.classList.add("holding");
    s.title = c.program;
    x.appendChild(s);
    head.appendChild(x);
    const cell = document.createElement("th");
    for (const n of c.next || []) {
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "step";
      btn.dataset.step = n.step;
      btn.id = "step-" + n.step.replace("@", "-");
      btn.textContent = "▶ " + n.step + ": " + cmdText(n.command, own) + (n.local && (n.command[0] === "acquire" || n.command[0] === "release") && h.nodes.length === 1 ? " (and its first command)" : "");
      btn.title = n.command.join(" ");
      btn.disabled = busy || st.done;
      btn.onclick = () => step(n.step);
      cell.appendChild(btn);
    }
    next.appendChild(cell);
  }
  for (const n of h.nodes) { head.appendChild(th("key on " + n)); next.appendChild(th("")); }

  const body = $("lane-body");
  body.textContent = "";
  for (const e of h.events) {
    const tr = document.createElement("tr");
    tr.id = "row-" + e.step;
    if (e.violation) tr.classList.add("violation");
    tr.appendChild(td("num", String(e.step)));
    tr.appendChild(td("ev", e.label));
    for (const c of st.clients) {
      const cell = td("cmd");
      if (e.client === c.id) {
        cell.appendChild(document.createTextNode(cmdText(e.command || [], own)));
        if (e.reply) {
          const rp = document.createElement("div");
          rp.className = "reply";
          rp.textContent = "→ " + short(e.reply, own);
          cell.appendChild(rp);
        }
      }
      for (const n of e.notes || []) {
        const who = e.client ? (n.startsWith("c" + c.id + " ") && e.client === c.id) : n.startsWith("c" + c.id + " ");
        if (!who) continue;
        const d = document.createElement("div");
        d.className = "note" + (/deleted|stale|refused/.test(n) ? " bad" : "");
        d.textContent = n.replace(/^c\d+ /, "");
        cell.appendChild(d);
      }
      tr.appendChild(cell);
    }
    for (const k of e.keys || []) tr.appendChild(td("key", short(k, own)));
    body.appendChild(tr);
    if ((e.holders || []).length > 1 || e.violation) {
      const vr = document.createElement("tr");
      vr.className = "violation";
      const c = td("", "");
      c.colSpan = 2 + st.clients.length + h.nodes.length;
      c.textContent = (e.holders || []).length > 1 ? "!! " + e.holders.map((x) => "c" + x).join(" and ") + " hold the lock at once" : "!! " + e.violation;
      vr.appendChild(c);
      body.appendChild(vr);
    }
  }

  // Faults and controls.
  const f = $("faults");
  f.textContent = "";
  for (const x of st.faults || []) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "fault";
    btn.dataset.step = x;
    btn.id = "fault-" + x.replace(/[^a-z0-9]+/gi, "-");
    btn.textContent = "⚡ " + x;
    btn.title = "a fault: " + x;
    btn.disabled = busy || st.done;
    btn.onclick = () => step(x);
    f.appendChild(btn);
  }
  $("undo").disabled = busy || st.steps === 0;
  $("reset").disabled = busy;
  $("hint").disabled = busy;
  $("timeline").textContent = r.timeline + "\n" + r.replay + (r.labels ? "\n\n" + r.labels : "");
  document.body.dataset.steps = String(st.steps);
  document.body.dataset.solved = r.solved ? "yes" : "no";
}

// --- start --------------------------------------------------------------------

window.addEventListener("pagehide", () => {
  if (cur) navigator.sendBeacon("/api/end", new Blob([JSON.stringify({ session: cur.session })], { type: "application/json" }));
});

(async function main() {
  $("undo").onclick = undo;
  $("reset").onclick = reset;
  $("hint").onclick = hint;
  const { status, data } = await api("/api/levels");
  if (status !== 200) { notice(data.error, true); return; }
  levels = data;
  renderLevels();
  const playable = levels.filter((l) => !l.unavailable);
  if (playable.length === 0) { notice("No level can be played here: " + levels[0].unavailable, true); return; }
  let id = location.hash.slice(1) || localStorage.getItem(LEVEL_KEY) || playable[0].id;
  if (!levels.some((l) => l.id === id)) id = playable[0].id;
  if (unavailable(id)) {
    const why = $("notice").textContent;
    id = playable[0].id;
    if (await start(id, "")) notice(why);
    return;
  }
  await start(id, "");
})();
