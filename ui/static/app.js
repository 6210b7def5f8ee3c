// kafkasim's web view: one page, no build step.  Live: Server-Sent Events from /api/stream; every message is
// applied to a local copy of the state at once, and the changes are drawn together on the next animation frame.
// Drawing touches only what changed: a partition row's cells are written only when their text differs, the
// event stream is a window of ~24 rows over the kept events (new events are inserted, old rows dropped), so a
// frame costs about as much as the news it carries.  Replay: /api/state?t=NS for the instant the scrubber
// points at, applied the same way (rows are kept and diffed, not rebuilt).
"use strict";
const $ = (s) => document.querySelector(s);
const S = { brokers: [], controller: { id: null, epoch: 0 }, controllers: [], parts: new Map(), coords: new Map(),
            groups: new Map(), txns: new Map(), failovers: [], events: [] };
const dirty = { brokers: false, controllers: false, parts: new Set(), groups: new Set(), failovers: false,
                txns: false, events: [], all: false };
let CFG = {}, frame = 0, shownAt = null;   // shownAt: the replay instant loaded and not yet drawn
// the controls' token: in the page when it is served on loopback (ui/guard.py), else typed in by the user
const PAGE_TOKEN = document.querySelector('meta[name="kafkasim-token"]')?.content ?? null;
// Measurement hooks for bench/ui.py, off unless it sets them to arrays: __lat gets, per event drawn, [event
// ts_ms, tail seen_ms, page drawn ms, type, server sent_ms, page arrived ms]; __render each frame's drawing ms.
window.__lat = null; window.__render = null;
const KEEP_EVENTS = 2000, EV_ROW_H = 16, EV_WINDOW = 24;

function esc(v) { return String(v ?? "–").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
function clock(ms) { return new Date(ms).toISOString().slice(11, 23); }   // one 24-hour format, as the event logs
function nowMs() { return performance.timeOrigin + performance.now(); }
function schedule() { if (!frame) frame = requestAnimationFrame(render); }
function put(el, v) { v = String(v); if (el.__v !== v) { el.__v = v; el.textContent = v; } }   // write text only if changed
function setHtml(el, html) { if (el.__h !== html) { el.__h = html; el.innerHTML = html; } }
function bounded(arr, max) { if (arr.length > max * 1.25) arr.splice(0, arr.length - max); }  // amortized trim

// ------------------------------------------------------------------ state updates
function load(snap) {   // a whole state (first message, a reconnect, a replay instant): rows are kept and diffed
  S.brokers = snap.brokers; S.controller = snap.controller; S.controllers = snap.controllers;
  S.parts = new Map(snap.partitions.map((p) => [p.key, p]));
  S.coords = new Map(snap.coordinators.map((c) => [c.partition, c]));
  S.groups = new Map(snap.groups.map((g) => [g.group, g]));
  S.txns = new Map((snap.transactions || []).map((t) => [t.transactional_id, t]));
  S.failovers = snap.failovers; S.events = (snap.events || []).slice(-KEEP_EVENTS);
  for (const [k, tr] of rows) if (!S.parts.has(k)) dropRow(k, tr);
  for (const [t, tt] of topicTables) if (!tt.chunks.size) { tt.div.remove(); topicTables.delete(t); }
  for (const [g, tr] of groupRows) if (!S.groups.has(g)) { tr.remove(); groupRows.delete(g); }
  if (groupRows.size <= 16) $("#groups .gbody").classList.remove("full");
  evRebuild();
  dirty.all = true; schedule();
}
function applyPatch(p) {
  if (!p) return;
  if (p.brokers) { S.brokers = p.brokers; S.controller = p.controller; dirty.brokers = true; }
  if (p.controllers) { S.controllers = p.controllers; dirty.controllers = true; }
  for (const x of p.partitions || []) { S.parts.set(x.key, x); dirty.parts.add(x.key); }
  for (const c of p.coordinators || []) {
    S.coords.set(c.partition, c); dirty.parts.add("__consumer_offsets-" + c.partition);
  }
  for (const g of p.groups || []) { S.groups.set(g.group, g); dirty.groups.add(g.group); }
  for (const t of p.transactions || []) { S.txns.set(t.transactional_id, t); dirty.txns = true; }
  if (p.failovers) { S.failovers = p.failovers; dirty.failovers = true; }
}
function onBatch(b) {
  const arrived = nowMs();
  applyPatch(b.patch);
  if (b.events.length) {
    for (const e of b.events) { e.__sent = b.sent_ms; e.__arrived = arrived; S.events.push(e); }
    bounded(S.events, KEEP_EVENTS);
    for (const e of b.events) dirty.events.push(e);
  }
  schedule();
}

// ------------------------------------------------------------------ drawing
function render() {
  frame = 0;
  const r0 = performance.now();
  const all = dirty.all; dirty.all = false;
  if (all || dirty.brokers) drawBrokers();
  if (all || dirty.controllers || dirty.brokers) drawControllers();
  const keys = all ? S.parts.keys() : dirty.parts;
  let n = 0;
  for (const k of keys) { drawPartition(k); n++; }
  if (n) drawSummary();
  for (const g of all ? S.groups.keys() : dirty.groups) drawGroup(g);
  if (all || dirty.txns) drawTxns();
  if (all || dirty.failovers) drawFailovers();
  const added = evAdd(dirty.events);
  if (all || added) drawEventWindow(added);
  if (window.__lat) {
    const shown = nowMs();
    for (const e of dirty.events) if (e.seen_ms) window.__lat.push([e.ts_ms, e.seen_ms, shown, e.type, e.__sent, e.__arrived]);
    bounded(window.__lat, 20000);
  }
  dirty.brokers = dirty.controllers = dirty.failovers = dirty.txns = false;
  dirty.parts.clear(); dirty.groups.clear(); dirty.events = [];
  if (window.__render) { window.__render.push(performance.now() - r0); bounded(window.__render, 5000); }
  if (shownAt !== null) { document.body.dataset.t = shownAt; shownAt = null; }   // the replay instant now drawn
}

const BROKER_ACTIONS = [["kill", "kill"], ["terminate", "term"], ["pause", "pause"], ["resume", "resume"],
                        ["start", "start"], ["expire-session", "expire session"]];
function drawBrokers() {
  $("#controller-id").textContent = S.controller.id ?? "none";
  $("#controller-epoch").textContent = S.controller.epoch;
  const ids = [...new Set((CFG.brokers || []).concat(S.brokers.map((b) => b.id)))].sort((a, b) => a - b);
  const by = new Map(S.brokers.map((b) => [b.id, b]));
  // The rows and their buttons are made once per set of brokers; an update rewrites only a row's other cells.
  // Rewritten buttons lost clicks: a mousedown on a button the next update replaced, and its mouseup on the new
  // one, make no click at all.
  const tbody = $("#brokers tbody");
  if (tbody.__ids !== ids.join(",")) {
    tbody.__ids = ids.join(",");
    tbody.innerHTML = ids.map((id) => `<tr data-broker="${id}"><td>${id}</td><td class="controls">` + BROKER_ACTIONS.map(([a, label]) =>
        `<button data-action="${a}" data-broker="${id}" title="${a} broker ${id}">${label}</button>`).join(" ") +
      `</td></tr>`).join("");
  }
  for (const tr of tbody.rows) {
    const id = Number(tr.dataset.broker);
    const b = by.get(id) || { id, status: "unknown" };
    if (tr.dataset.status !== String(b.status)) { tr.dataset.status = b.status; tr.className = b.status; }
    const cells = `<td class="st">${esc(b.status)}${b.pid ? " <small>pid " + b.pid + "</small>" : ""}` +
      ((b.offline_dirs || []).length ? `<div class="offline-dirs" title="log directories offline until the broker ` +
        `restarts (KAFKA_STORAGE_ERROR)">offline: ${b.offline_dirs.map((d) => `<code>${esc(d)}</code>`).join(" ")}</div>`
        : "") + (b.disk_fault ? ` <span class="disk-fault">${esc(b.disk_fault)}</span>` : "") + `</td>` +
      `<td>${b.registered === true ? "registered" : b.registered === false ? "not registered" : "–"}</td>` +
      `<td>${esc(b.broker_epoch)}</td><td><small>${esc(b.session)}</small></td>` +
      `<td>${b.controller ? '<span class="ctrl-badge">controller</span>' : ""}</td>`;
    if (tr.__cells !== cells) {   // the cells between the id and the buttons, replaced together
      tr.__cells = cells;
      while (tr.cells.length > 2) tr.deleteCell(1);
      tr.cells[0].insertAdjacentHTML("afterend", cells);
    }
  }
}

function drawControllers() {
  const cur = S.controller;
  setHtml($("#controllers"), S.controllers.map((c) =>
    `<li class="${c.epoch === cur.epoch && c.broker === cur.id ? "current" : ""}" data-epoch="${c.epoch}">` +
    `epoch ${c.epoch}: broker ${c.broker}${c.ts_ms ? " at " + clock(c.ts_ms) : ""}</li>`).join(""));
}

// A topic's rows are held in blocks of CHUNK partitions (partition p in block p / CHUNK), each block with
// `content-visibility: auto` (style.css): a block off screen keeps its rows in the document (the tests and the
// filters read every row's data attributes) but Chromium skips their style, layout, paint and property trees,
// and tracks one element per block instead of one per row.  Rows off screen get only their data attributes and
// class; their cells are drawn when their block comes near the screen (one IntersectionObserver target a block).
const CHUNK = 25, ROW_H = 23;
const rows = new Map(), topicTables = new Map();
function topicTable(topic) {
  let t = topicTables.get(topic);
  if (t) return t;
  const div = document.createElement("div");
  div.className = "topic"; div.dataset.topic = topic;
  const coordCol = topic === "__consumer_offsets" ? "<span>coordinator (loaded groups)</span>" : "";
  div.innerHTML = `<h3>${esc(topic)}</h3><div class="prow phead"><span>p.</span><span>leader</span><span>epoch</span>` +
    `<span>replicas (LEO vs HW)</span><span>ISR</span>${coordCol}</div><div class="pbody"></div>`;
  const host = $("#topics");
  const after = topic === "__consumer_offsets" ? null : [...host.children].find((c) => c.dataset.topic > topic);
  host.insertBefore(div, after || null);
  t = { div, tbody: div.querySelector(".pbody"), chunks: new Map() };
  topicTables.set(topic, t);
  return t;
}
function chunkOf(t, partition) {
  const i = Math.floor(partition / CHUNK);
  let c = t.chunks.get(i);
  if (c) return c;
  c = document.createElement("div");
  c.className = "pchunk"; c.__i = i; c.__stale = new Set(); c.__near = false;
  let at = null;
  for (const o of t.tbody.children) if (o.__i > i) { at = o; break; }
  t.tbody.insertBefore(c, at);
  t.chunks.set(i, c);
  seer.observe(c);     // its first callback fills the block's rows if it is near the screen
  return c;
}
const seer = new IntersectionObserver((entries) => {
  for (const en of entries) {
    const c = en.target;
    c.__near = en.isIntersecting;
    if (c.__near && c.__stale.size) { for (const k of c.__stale) fillPartition(k); c.__stale.clear(); }
  }
}, { rootMargin: "600px 0px" });
function sizeChunk(c) {   // exact: rows are ROW_H high, so a skipped block takes the room its shown rows would
  let n = 0;
  for (const r of c.children) if (!r.hidden) n++;
  const h = n * ROW_H + "px";
  if (c.__h !== h) { c.__h = h; c.style.containIntrinsicHeight = h; }
}
function dropRow(k, tr) {
  const c = tr.parentElement;
  tr.remove(); rows.delete(k);
  if (!c) return;
  c.__stale.delete(k);
  if (c.children.length) { sizeChunk(c); return; }
  seer.unobserve(c); c.remove();
  for (const tt of topicTables.values()) if (tt.chunks.get(c.__i) === c) tt.chunks.delete(c.__i);
}
function drawPartition(key) {
  const p = S.parts.get(key);
  if (!p) return;
  let tr = rows.get(key);
  if (!tr) {
    const c = chunkOf(topicTable(p.topic), p.partition);
    tr = document.createElement("div");
    tr.dataset.tp = key; tr.__p = p.partition;
    // rows arrive in order (snapshot) or one by one (a new topic): a new row goes before the first greater one
    let at = null;
    const last = c.lastElementChild;
    if (last && last.__p > p.partition) for (const o of c.children) if (o.__p > p.partition) { at = o; break; }
    c.insertBefore(tr, at);
    sizeChunk(c);
    rows.set(key, tr);
  }
  const cls = "prow" + (p.offline ? " offline" : p.under_replicated ? " urp" : ""), isr = p.isr.join(",");
  if (tr.className !== cls) tr.className = cls;     // unchanged values are not written: no style work
  if (tr.dataset.leader !== String(p.leader)) tr.dataset.leader = p.leader;
  if (tr.dataset.isr !== isr) tr.dataset.isr = isr;
  if (tr.dataset.epoch !== String(p.leader_epoch)) tr.dataset.epoch = p.leader_epoch;
  filterRow(tr, p);
  const c = tr.parentElement;
  if (c.__near) fillPartition(key); else c.__stale.add(key);
}
function span(parent, cls, tag = "span") {
  const s = document.createElement(tag);
  if (cls) s.className = cls;
  parent.appendChild(s);
  return s;
}
function fillPartition(key) {   // the row's cells are made once (again if its replicas change), then only written
  const p = S.parts.get(key), tr = rows.get(key);
  if (!p || !tr) return;
  const sig = p.replicas.join(",");
  let x = tr.__x;
  if (!x || x.sig !== sig) {
    tr.textContent = "";
    x = { sig, part: span(tr), ldr: span(tr, "ldr"), epoch: span(tr), reps: span(tr, "reps") };
    x.rep = p.replicas.map((b) => {
      const r = span(x.reps, "rep"); r.dataset.replica = b;
      const o = { b, el: r, label: span(r), small: null, leo: null, hw: null };
      r.appendChild(document.createTextNode(" "));
      o.small = span(r, "", "small");
      // the HW bar inside the LEO bar inside the track, plain blocks: no positioned element, no layer to paint
      const bar = span(r, "bar"); o.leo = span(bar, "leo"); o.hw = span(o.leo, "hw");
      return o;
    });
    x.isr = span(tr, "isr");
    if (p.topic === "__consumer_offsets") x.coord = span(tr, "coord");
    put(x.part, p.partition);
    tr.__x = x;
  }
  put(x.ldr, p.leader >= 0 ? p.leader : "none");
  put(x.epoch, p.leader_epoch);
  put(x.isr, p.isr.join(","));
  let max = 1;
  for (const v of Object.values(p.leo || {})) if (v > max) max = v;
  for (const v of Object.values(p.hw || {})) if (v > max) max = v;
  for (const o of x.rep) {
    const b = o.b, leo = p.leo[b] ?? null, hw = p.hw[String(p.leader)] ?? p.hw[b] ?? null;
    const cls = "rep " + (p.isr.includes(b) ? "in" : "out");
    if (o.el.className !== cls) o.el.className = cls;
    put(o.label, (b === p.leader ? "★" : "") + b);
    const lh = `${leo ?? "?"}/${hw ?? "?"}`;
    if (o.small.__v !== lh) { put(o.small, lh); o.el.title = `broker ${b}: LEO ${leo ?? "?"}, HW ${hw ?? "?"}`; }
    const wl = (100 * (leo || 0) / max).toFixed(1) + "%";
    const wh = (leo ? 100 * Math.min(hw || 0, leo) / leo : 0).toFixed(1) + "%";    // of the LEO bar
    if (o.leo.__w !== wl) { o.leo.__w = wl; o.leo.style.width = wl; }
    if (o.hw.__w !== wh) { o.hw.__w = wh; o.hw.style.width = wh; }
  }
  if (x.coord) {
    const c = S.coords.get(p.partition);
    const cls = "coord" + (c && c.state ? " " + c.state : "");
    if (x.coord.className !== cls) x.coord.className = cls;
    const who = c ? String(c.broker ?? "") : "";
    if (x.coord.dataset.coordinator !== who) x.coord.dataset.coordinator = who;
    put(x.coord, c ? `${c.broker ?? "–"} ${c.state ?? "–"}${c.load_ms != null ? " " + c.load_ms + " ms" : ""}` +
      `${c.groups.length ? " (" + c.groups.join(", ") + ")" : ""}` : "");
  }
}
let partFilter = { f: "", urp: false };
function filterRow(tr, p) {
  const hide = Boolean((partFilter.f && !p.topic.includes(partFilter.f)) || (partFilter.urp && !p.offline && !p.under_replicated));
  if (tr.hidden !== hide) { tr.hidden = hide; if (tr.parentElement) sizeChunk(tr.parentElement); }
}
function drawSummary() {
  let n = 0, u = 0, o = 0;
  for (const p of S.parts.values()) { n++; if (p.offline) o++; else if (p.under_replicated) u++; }
  put($("#part-summary"), `${n} partitions, ${u} under-replicated, ${o} offline`);
}

const groupRows = new Map();
function drawGroup(name) {
  const g = S.groups.get(name);
  if (!g) return;
  let tr = groupRows.get(name);
  if (!tr) {
    tr = document.createElement("div"); tr.dataset.group = name; tr.className = "grow";
    const tb = $("#groups .gbody");
    const after = [...tb.children].find((r) => r.dataset.group > name);
    tb.insertBefore(tr, after || null);
    groupRows.set(name, tr);
    // past a screenful of groups the box takes its full height and contains its layout: a row that changes
    // (most often a lag) is laid out inside the box, not the whole page with it
    const full = groupRows.size > 16;
    if (tb.classList.contains("full") !== full) tb.classList.toggle("full", full);
  }
  if (tr.dataset.coordinator !== String(g.coordinator ?? "")) tr.dataset.coordinator = g.coordinator ?? "";
  if (tr.dataset.state !== String(g.state ?? "")) tr.dataset.state = g.state ?? "";
  let x = tr.__x;
  if (!x) {   // the row's cells are made once; a change (most often a lag) rewrites only its own cell
    x = tr.__x = { name: span(tr), gc: span(tr, "gc"), part: span(tr), state: span(tr), gen: span(tr), reb: span(tr),
                   members: span(tr, "members"), offsets: span(tr, "offsets") };
    put(x.name, name);
  }
  put(x.gc, g.coordinator ?? "–"); put(x.part, g.partition); put(x.state, g.state ?? "–");
  put(x.gen, g.generation ?? "–"); put(x.reb, g.rebalances);
  setHtml(x.members, Object.entries(g.members).map(([m, v]) =>
    `<div><small>${esc(v.client_id || m.slice(0, 28))}</small> → ${(v.assignment || []).map(esc).join(", ") || "–"}</div>`).join(""));
  setHtml(x.offsets, Object.entries(g.offsets).sort().map(([tp, o]) =>
    `<div>${esc(tp)}: ${esc(o)}${g.lag[tp] != null ? " (" + g.lag[tp] + ")" : ""}</div>`).join(""));
}

// each transactional id: its coordinator (the leader of its __transaction_state partition, and whether it has
// loaded it), its state, producer id and epoch, the partitions of its open transaction, what it completed
function drawTxns() {
  setHtml($("#transactions tbody"), [...S.txns.keys()].sort().map((id) => {
    const t = S.txns.get(id);
    const coord = t.coordinator == null ? "–" : `${esc(t.coordinator)}${t.coordinator_state ? " (" + esc(t.coordinator_state) + ")" : ""}`;
    return `<tr data-txn="${esc(id)}" data-state="${esc(t.state ?? "")}" data-coordinator="${esc(t.coordinator ?? "")}">` +
      `<td>${esc(id)}</td><td class="tc">${coord}</td><td>${esc(t.partition)}</td><td class="ts">${esc(t.state)}</td>` +
      `<td>${esc(t.producer_id)}</td><td>${esc(t.producer_epoch)}</td>` +
      `<td>${(t.partitions || []).map(esc).join(", ") || "–"}</td><td>${esc(t.commits)}</td><td>${esc(t.aborts)}</td></tr>`;
  }).join(""));
}

function ms(v) { return v == null ? "–" : v.toFixed(0) + " ms"; }
function drawFailovers() {
  setHtml($("#failovers tbody"), S.failovers.slice(-50).reverse().map((r) =>
    `<tr data-fault="${esc(r.fault)}" data-group="${esc(r.group ?? "")}"><td>${esc(r.fault)}</td><td>${esc(r.kind)}</td>` +
    `<td>${esc(r.group ?? "(controller)")}</td><td>${esc(r.partition)}</td>` +
    `<td>${r.group ? esc(r.old_leader) + " → " + esc(r.new_leader) : esc(r.old_controller) + " → " + esc(r.new_controller)}</td>` +
    `<td class="stage detect">${ms(r.detect_ms)}</td><td class="stage elect">${ms(r.elect_ms)}</td>` +
    `<td class="stage load">${ms(r.load_ms)}</td><td class="stage first_commit">${ms(r.first_commit_ms)}</td>` +
    `<td class="stage">${ms(r.controller_failover_ms)}</td></tr>`).join(""));
}

// The event stream, filtered by broker, partition, group and kind: the matching kept events (at most
// KEEP_EVENTS) under a scroll box of their full height, of which only the rows in view exist (EV_WINDOW rows of
// EV_ROW_H px, newest first).  New events add rows at the top of the window and drop as many at its bottom.
let evView = [], evFilter = { b: "", p: "", g: "", k: "" };
const evBox = $("#events"), evSpace = span(evBox, "ev-space", "div"), evWin = span(evBox, "ev-win", "div");
function readFilters() {
  evFilter = { b: $("#f-broker").value.trim(), p: $("#f-partition").value.trim(),
               g: $("#f-group").value.trim(), k: $("#f-kind").value.trim() };
}
function matches(e, f) {
  if (f.b && String(e.broker) !== f.b && String(e.target) !== f.b) return false;
  // a coordinator's event without a topic is of its partition: __transaction_state's for the transaction ones
  const own = String(e.type).startsWith("txn_") ? "__transaction_state" : "__consumer_offsets";
  if (f.p && `${e.topic ?? own}-${e.partition}` !== f.p) return false;
  if (f.g && e.group !== f.g && e.transactional_id !== f.g) return false;
  if (f.k && !String(e.type).includes(f.k) && !String(e.action || "").includes(f.k)) return false;
  return true;
}
function evRebuild() { evView = S.events.filter((e) => matches(e, evFilter)); }
function evAdd(evs) {
  let n = 0;
  for (const e of evs) if (matches(e, evFilter)) { evView.push(e); n++; }
  bounded(evView, KEEP_EVENTS);
  return n;
}
const SKIP = new Set(["ts_ms", "mono_ns", "broker", "type", "seen_ms", "__sent", "__arrived"]);
function eventRow(e) {
  const r = document.createElement("div");
  r.className = "erow"; r.dataset.type = e.type; r.__e = e;
  const rest = Object.entries(e).filter(([k]) => !SKIP.has(k)).map(([k, v]) =>
    `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
  span(r).textContent = e.ts_ms ? clock(e.ts_ms) : "";
  span(r).textContent = e.broker >= 0 ? "b" + e.broker : "ui";
  const last = span(r);
  span(last, "", "b").textContent = e.type;
  last.appendChild(document.createTextNode(" " + rest));
  r.title = `${e.type} ${rest}`;
  return r;
}
// The box's scroll position is read in its scroll handler only: reading it while drawing would force a layout
// of the rows just written (then a second one for the frame).
let evTop = 0;
function drawEventWindow(added) {
  let top = evTop;
  evSpace.style.height = evView.length * EV_ROW_H + "px";
  if (added && top > 0) { top += added * EV_ROW_H; evTop = evBox.scrollTop = top; }   // a reader scrolled back keeps their rows
  const first = Math.max(0, Math.min(Math.floor(top / EV_ROW_H), evView.length - EV_WINDOW));
  evWin.style.transform = `translateY(${first * EV_ROW_H}px)`;
  const want = [];
  for (let i = evView.length - 1 - first; i >= 0 && want.length < EV_WINDOW; i--) want.push(evView[i]);
  const have = new Map();
  for (const r of evWin.children) have.set(r.__e, r);
  for (let i = 0; i < want.length; i++) {
    let r = have.get(want[i]);
    if (r) have.delete(want[i]); else r = eventRow(want[i]);
    const at = evWin.children[i];
    if (at !== r) evWin.insertBefore(r, at || null);
  }
  for (const r of have.values()) r.remove();
}
evBox.addEventListener("scroll", () => { evTop = evBox.scrollTop; drawEventWindow(0); }, { passive: true });
for (const id of ["#f-broker", "#f-partition", "#f-group", "#f-kind"]) $(id).addEventListener("input", () => {
  readFilters(); evRebuild(); evTop = evBox.scrollTop = 0; drawEventWindow(0);
});
for (const id of ["#topic-filter", "#only-urp"]) $(id).addEventListener("input", () => {
  partFilter = { f: $("#topic-filter").value.trim(), urp: $("#only-urp").checked };
  for (const [k, tr] of rows) filterRow(tr, S.parts.get(k));
});

// ------------------------------------------------------------------ controls
async function control(body) {
  const out = $("#control-result");
  out.className = ""; out.textContent = `${body.action}…`;
  const headers = { "Content-Type": "application/json" };
  headers["X-Kafkasim-Token"] = PAGE_TOKEN ?? $("#token").value.trim();
  try {
    const r = await fetch("/api/control", { method: "POST", headers, body: JSON.stringify(body) });
    const j = await r.json();
    out.className = j.ok ? "ok" : "err";
    out.textContent = j.ok ? `${body.action}: ${j.detail || "done"}` : `${body.action} failed: ${j.error}`;
    if (body.action === "member-start" && j.ok) {
      const id = j.detail.split(" ")[1];
      $("#member-id").insertAdjacentHTML("beforeend", `<option>${esc(id)}</option>`);
    }
    if (body.action === "member-stop" && j.ok) $("#member-id").querySelector(`option[value="${body.member}"]`)?.remove();
  } catch (err) { out.className = "err"; out.textContent = `${body.action} failed: ${err}`; }
}
document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button[data-action]");
  if (b) control({ action: b.dataset.action, broker: Number(b.dataset.broker) });
});
$("#btn-preferred").onclick = () => control({ action: "preferred-election" });
$("#btn-produce").onclick = () => control({ action: "produce", topic: $("#produce-topic").value,
  value: $("#produce-value").value, count: Number($("#produce-count").value) });
$("#btn-member-start").onclick = () => control({ action: "member-start", group: $("#member-group").value, topic: $("#member-topic").value });
$("#btn-member-stop").onclick = () => control({ action: "member-stop", member: $("#member-id").value });

// ------------------------------------------------------------------ live
function live() {
  const es = new EventSource("/api/stream");
  es.addEventListener("snapshot", (m) => { load(JSON.parse(m.data)); $("#conn").textContent = "live"; $("#conn").className = "badge ok"; });
  es.addEventListener("batch", (m) => onBatch(JSON.parse(m.data)));
  es.onerror = () => { $("#conn").textContent = "reconnecting"; $("#conn").className = "badge bad"; };
}

// ------------------------------------------------------------------ replay
let META = null, T = 0, playing = false, busy = false, pending = null;
async function fetchAt(t) {
  if (busy) { pending = t; return; }
  busy = true;
  try {
    const r = await fetch("/api/state?t=" + Math.round(t));
    load(await r.json());
    $("#conn").textContent = "replay"; $("#conn").className = "badge ok";
    shownAt = String(Math.round(t));   // on <body data-t> once the frame that draws it has run (render)
  } finally {
    busy = false;
    if (pending !== null) { const p = pending; pending = null; fetchAt(p); }
  }
}
function showTime() {
  const rel = (T - META.start_ns) / 1e9;
  const wall = META.wall_offset_ms != null ? clock(META.wall_offset_ms + T / 1e6) : "";
  $("#time").textContent = `${rel.toFixed(3)} s  ${wall}`;
  $("#scrubber").value = String(Math.round(1000 * (T - META.start_ns) / Math.max(1, META.end_ns - META.start_ns)));
}
window.seekTo = (t) => { T = Math.max(META.start_ns, Math.min(META.end_ns, t)); showTime(); return fetchAt(T); };
async function replay() {
  META = await (await fetch("/api/meta")).json();
  $("#replay-bar").hidden = false;
  const span = Math.max(1, META.end_ns - META.start_ns);
  const pct = (t) => (100 * (t - META.start_ns) / span).toFixed(3) + "%";
  const marks = [];
  for (const f of META.faults) marks.push(`<span class="fault" style="left:${pct(f.mono_ns)}" title="fault ${esc(f.id)}: ${esc(f.kind)} ${f.brokers.join(",")}"></span>`);
  for (const s of META.stages) for (const k of ["detect", "elect", "load", "first_commit"]) {
    const v = s[k + "_ms"];
    if (v != null && s.t0 != null) marks.push(`<span class="${k}" style="left:${pct(s.t0 + v * 1e6)}" title="${esc(s.group)}: ${k} ${v} ms after fault ${esc(s.fault)}"></span>`);
  }
  $("#markers").innerHTML = marks.join("");
  $("#markers").addEventListener("click", (ev) => ev.stopPropagation());
  $("#scrubber").addEventListener("input", () => window.seekTo(META.start_ns + span * Number($("#scrubber").value) / 1000));
  $("#play").onclick = () => { playing = !playing; $("#play").textContent = playing ? "❚❚ pause" : "▶ play"; };
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    if (playing) {
      T += (now - last) * 1e6 * Number($("#speed").value);
      if (T >= META.end_ns) { T = META.end_ns; playing = false; $("#play").textContent = "▶ play"; }
      showTime(); fetchAt(T);
    }
    last = now;
  }, 100);
  await window.seekTo(META.start_ns);
}

(async function main() {
  CFG = await (await fetch("/api/config")).json();
  $("#mode").textContent = CFG.mode === "replay" ? "replay: " + CFG.run_dir : "live: " + CFG.run_dir;
  if (CFG.read_only) document.body.classList.add("readonly");
  if (CFG.mode === "live" && CFG.read_only) $("#notice").textContent = "read-only: controls are off";
  if (CFG.mode === "live" && !CFG.read_only && !CFG.token_in_page) {
    $("#notice").textContent = `bound to ${CFG.host}: controls need the token printed when the server started`;
    $("#token-box").hidden = false;
  }
  document.body.dataset.mode = CFG.mode;
  if (CFG.mode === "replay") await replay(); else live();
})();
