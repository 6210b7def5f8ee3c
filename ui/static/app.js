// kafkasim's web view: one page, no build step.  Live: Server-Sent Events from /api/stream, each batch
// applied to a local copy of the state and drawn on the next animation frame, touching only changed rows.
// Replay: /api/state?t=NS for the instant the scrubber points at.
"use strict";
const $ = (s) => document.querySelector(s);
const S = { brokers: [], controller: { id: null, epoch: 0 }, controllers: [], parts: new Map(), coords: new Map(),
            groups: new Map(), failovers: [], events: [] };
const dirty = { brokers: false, controllers: false, parts: new Set(), groups: new Set(), failovers: false,
                events: [], all: false };
let CFG = {}, frame = 0;
window.__lat = [];  // [event ts_ms, tail seen_ms, page shown ms, type, server sent_ms, page arrived ms] for bench/ui.py
const KEEP_EVENTS = 2000, SHOW_EVENTS = 300, NEW_EVENTS_PER_FRAME = 100;

function esc(v) { return String(v ?? "–").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
function nowMs() { return performance.timeOrigin + performance.now(); }
function schedule() { if (!frame) frame = requestAnimationFrame(render); }

// ------------------------------------------------------------------ state updates
function load(snap) {
  S.brokers = snap.brokers; S.controller = snap.controller; S.controllers = snap.controllers;
  S.parts = new Map(snap.partitions.map((p) => [p.key, p]));
  S.coords = new Map(snap.coordinators.map((c) => [c.partition, c]));
  S.groups = new Map(snap.groups.map((g) => [g.group, g]));
  S.failovers = snap.failovers; S.events = (snap.events || []).slice(-KEEP_EVENTS);
  document.getElementById("topics").innerHTML = ""; rows.clear(); topicTables.clear();
  $("#groups .gbody").innerHTML = ""; groupRows.clear();
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
  if (p.failovers) { S.failovers = p.failovers; dirty.failovers = true; }
}
function onBatch(b) {
  const arrived = nowMs();
  for (const e of b.events) { e.__sent = b.sent_ms; e.__arrived = arrived; }
  applyPatch(b.patch);
  if (b.events.length) {
    for (const e of b.events) S.events.push(e);
    if (S.events.length > KEEP_EVENTS) S.events.splice(0, S.events.length - KEEP_EVENTS);
    dirty.events.push(...b.events);
  }
  schedule();
}

// ------------------------------------------------------------------ drawing
function render() {
  frame = 0;
  const all = dirty.all; dirty.all = false;
  if (all || dirty.brokers) drawBrokers();
  if (all || dirty.controllers || dirty.brokers) drawControllers();
  const keys = all ? [...S.parts.keys()] : [...dirty.parts];
  for (const k of keys) drawPartition(k);
  if (keys.length) drawSummary();
  const gs = all ? [...S.groups.keys()] : [...dirty.groups];
  for (const g of gs) drawGroup(g);
  if (all || dirty.failovers) drawFailovers();
  if (all) drawEvents(); else if (dirty.events.length) addEvents(dirty.events);
  const shown = nowMs();
  for (const e of dirty.events) { if (e.seen_ms) window.__lat.push([e.ts_ms, e.seen_ms, shown, e.type, e.__sent, e.__arrived]); }
  if (window.__lat.length > 20000) window.__lat.splice(0, 10000);
  dirty.brokers = dirty.controllers = dirty.failovers = false;
  dirty.parts.clear(); dirty.groups.clear(); dirty.events = [];
}

function drawBrokers() {
  $("#controller-id").textContent = S.controller.id ?? "none";
  $("#controller-epoch").textContent = S.controller.epoch;
  const ids = new Set((CFG.brokers || []).concat(S.brokers.map((b) => b.id)));
  const by = new Map(S.brokers.map((b) => [b.id, b]));
  const tb = $("#brokers tbody");
  tb.innerHTML = [...ids].sort((a, b) => a - b).map((id) => {
    const b = by.get(id) || { id, status: "unknown" };
    const acts = [["kill", "kill"], ["terminate", "term"], ["pause", "pause"], ["resume", "resume"], ["start", "start"],
                  ["expire-session", "expire session"]].map(([a, label]) =>
      `<button data-action="${a}" data-broker="${id}" title="${a} broker ${id}">${label}</button>`).join(" ");
    return `<tr data-broker="${id}" data-status="${esc(b.status)}" class="${esc(b.status)}"><td>${id}</td>` +
      `<td class="st">${esc(b.status)}${b.pid ? " <small>pid " + b.pid + "</small>" : ""}</td>` +
      `<td>${b.registered === true ? "registered" : b.registered === false ? "not registered" : "–"}</td>` +
      `<td>${esc(b.broker_epoch)}</td><td><small>${esc(b.session)}</small></td>` +
      `<td>${b.controller ? '<span class="ctrl-badge">controller</span>' : ""}</td>` +
      `<td class="controls">${acts}</td></tr>`;
  }).join("");
}

function drawControllers() {
  const cur = S.controller;
  $("#controllers").innerHTML = S.controllers.map((c) =>
    `<li class="${c.epoch === cur.epoch && c.broker === cur.id ? "current" : ""}" data-epoch="${c.epoch}">` +
    `epoch ${c.epoch}: broker ${c.broker}${c.ts_ms ? " at " + new Date(c.ts_ms).toLocaleTimeString() : ""}</li>`).join("");
}

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
  t = { div, tbody: div.querySelector(".pbody"), order: [] };
  topicTables.set(topic, t);
  return t;
}
// Rows off screen get only their data attributes and class (cheap); their content is drawn when they scroll
// into view.  So a batch touching hundreds of partitions costs a few attribute writes each.
const onScreen = new Set();
const stale = new Set();
const seer = new IntersectionObserver((entries) => {
  for (const en of entries) {
    const key = en.target.dataset.tp;
    if (en.isIntersecting) { onScreen.add(key); if (stale.has(key)) { stale.delete(key); fillPartition(key); } }
    else onScreen.delete(key);
  }
}, { rootMargin: "400px 0px" });
function drawPartition(key) {
  const p = S.parts.get(key);
  if (!p) return;
  let tr = rows.get(key);
  if (!tr) {
    const t = topicTable(p.topic);
    tr = document.createElement("div");
    tr.dataset.tp = key;
    let i = 0; while (i < t.order.length && t.order[i] < p.partition) i++;
    t.tbody.insertBefore(tr, t.tbody.children[i] || null);
    t.order.splice(i, 0, p.partition);
    rows.set(key, tr);
    seer.observe(tr);    // its first callback fills the row if it is on screen
  }
  const cls = "prow" + (p.offline ? " offline" : p.under_replicated ? " urp" : ""), isr = p.isr.join(",");
  if (tr.className !== cls) tr.className = cls;     // unchanged values are not written: no style work
  if (tr.dataset.leader !== String(p.leader)) tr.dataset.leader = p.leader;
  if (tr.dataset.isr !== isr) tr.dataset.isr = isr;
  if (tr.dataset.epoch !== String(p.leader_epoch)) tr.dataset.epoch = p.leader_epoch;
  filterRow(tr, p);
  if (onScreen.has(key)) fillPartition(key); else stale.add(key);
}
function fillPartition(key) {
  const p = S.parts.get(key), tr = rows.get(key);
  const max = Math.max(1, ...Object.values(p.leo || {}), ...Object.values(p.hw || {}));
  const reps = p.replicas.map((b) => {
    const leo = p.leo[b] ?? null, hw = p.hw[String(p.leader)] ?? p.hw[b] ?? null;
    const inIsr = p.isr.includes(b);
    return `<span class="rep ${inIsr ? "in" : "out"}" data-replica="${b}" title="broker ${b}: LEO ${leo ?? "?"}, HW ${hw ?? "?"}">` +
      `${b === p.leader ? "★" : ""}${b} <small>${leo ?? "?"}/${hw ?? "?"}</small>` +
      `<span class="bar"><span class="leo" style="width:${100 * (leo || 0) / max}%"></span>` +
      `<span class="hw" style="width:${100 * Math.min(hw || 0, leo ?? hw ?? 0) / max}%"></span></span></span>`;
  }).join("");
  let coord = "";
  if (p.topic === "__consumer_offsets") {
    const c = S.coords.get(p.partition);
    coord = c ? `<span class="coord ${esc(c.state)}" data-coordinator="${c.broker ?? ""}">${c.broker ?? "–"} ${esc(c.state)}` +
      `${c.load_ms != null ? " " + c.load_ms + " ms" : ""}${c.groups.length ? " (" + c.groups.map(esc).join(", ") + ")" : ""}</span>`
      : "<span></span>";
  }
  tr.innerHTML = `<span>${p.partition}</span><span class="ldr">${p.leader >= 0 ? p.leader : "none"}</span>` +
    `<span>${p.leader_epoch}</span><span class="reps">${reps}</span><span class="isr">${p.isr.join(",")}</span>${coord}`;
}
function filterRow(tr, p) {
  const f = $("#topic-filter").value.trim(), urp = $("#only-urp").checked;
  const hide = Boolean((f && !p.topic.includes(f)) || (urp && !p.offline && !p.under_replicated));
  if (tr.hidden !== hide) tr.hidden = hide;
}
function drawSummary() {
  let n = 0, u = 0, o = 0;
  for (const p of S.parts.values()) { n++; if (p.offline) o++; else if (p.under_replicated) u++; }
  $("#part-summary").textContent = `${n} partitions, ${u} under-replicated, ${o} offline`;
}

const groupRows = new Map();
function drawGroup(name) {
  const g = S.groups.get(name);
  let tr = groupRows.get(name);
  if (!tr) {
    tr = document.createElement("div"); tr.dataset.group = name; tr.className = "grow";
    const tb = $("#groups .gbody");
    const after = [...tb.children].find((r) => r.dataset.group > name);
    tb.insertBefore(tr, after || null);
    groupRows.set(name, tr);
  }
  tr.dataset.coordinator = g.coordinator ?? "";
  tr.dataset.state = g.state ?? "";
  const members = Object.entries(g.members).map(([m, v]) =>
    `<div><small>${esc(v.client_id || m.slice(0, 28))}</small> → ${(v.assignment || []).map(esc).join(", ") || "–"}</div>`).join("");
  const offs = Object.entries(g.offsets).sort().map(([tp, o]) =>
    `<div>${esc(tp)}: ${esc(o)}${g.lag[tp] != null ? " (" + g.lag[tp] + ")" : ""}</div>`).join("");
  tr.innerHTML = `<span>${esc(name)}</span><span class="gc">${esc(g.coordinator)}</span><span>${g.partition}</span>` +
    `<span>${esc(g.state)}</span><span>${esc(g.generation)}</span><span>${g.rebalances}</span>` +
    `<span class="members">${members}</span><span class="offsets">${offs}</span>`;
}

function ms(v) { return v == null ? "–" : v.toFixed(0) + " ms"; }
function drawFailovers() {
  $("#failovers tbody").innerHTML = S.failovers.slice(-50).reverse().map((r) =>
    `<tr data-fault="${esc(r.fault)}" data-group="${esc(r.group ?? "")}"><td>${esc(r.fault)}</td><td>${esc(r.kind)}</td>` +
    `<td>${esc(r.group ?? "(controller)")}</td><td>${esc(r.partition)}</td>` +
    `<td>${r.group ? esc(r.old_leader) + " → " + esc(r.new_leader) : esc(r.old_controller) + " → " + esc(r.new_controller)}</td>` +
    `<td class="stage detect">${ms(r.detect_ms)}</td><td class="stage elect">${ms(r.elect_ms)}</td>` +
    `<td class="stage load">${ms(r.load_ms)}</td><td class="stage first_commit">${ms(r.first_commit_ms)}</td>` +
    `<td class="stage">${ms(r.controller_failover_ms)}</td></tr>`).join("");
}

// events, filtered by broker, partition, group and kind
function filters() {
  return { b: $("#f-broker").value.trim(), p: $("#f-partition").value.trim(),
           g: $("#f-group").value.trim(), k: $("#f-kind").value.trim() };
}
function matches(e, f) {
  if (f.b && String(e.broker) !== f.b && String(e.target) !== f.b) return false;
  if (f.p && `${e.topic ?? "__consumer_offsets"}-${e.partition}` !== f.p) return false;
  if (f.g && e.group !== f.g) return false;
  if (f.k && !String(e.type).includes(f.k) && !String(e.action || "").includes(f.k)) return false;
  return true;
}
const SKIP = new Set(["ts_ms", "mono_ns", "broker", "type", "seen_ms", "__sent", "__arrived"]);
function eventRow(e) {
  const rest = Object.entries(e).filter(([k]) => !SKIP.has(k)).map(([k, v]) =>
    `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
  const t = e.ts_ms ? new Date(e.ts_ms).toISOString().slice(11, 23) : "";
  return `<div class="erow" data-type="${esc(e.type)}"><span>${t}</span><span>${e.broker >= 0 ? "b" + e.broker : "ui"}</span><span><b>${esc(e.type)}</b> ${esc(rest)}</span></div>`;
}
function drawEvents() {
  const out = [], f = filters();
  for (let i = S.events.length - 1; i >= 0 && out.length < SHOW_EVENTS; i--) if (matches(S.events[i], f)) out.push(eventRow(S.events[i]));
  $("#events").innerHTML = out.join("");
}
function addEvents(evs) {
  const tb = $("#events");
  const f = filters();
  const html = evs.filter((e) => matches(e, f)).slice(-NEW_EVENTS_PER_FRAME).reverse().map(eventRow).join("");
  if (!html) return;
  tb.insertAdjacentHTML("afterbegin", html);
  while (tb.children.length > SHOW_EVENTS) tb.lastElementChild.remove();
}
for (const id of ["#f-broker", "#f-partition", "#f-group", "#f-kind"]) $(id).addEventListener("input", drawEvents);
for (const id of ["#topic-filter", "#only-urp"]) $(id).addEventListener("input", () => {
  for (const [k, tr] of rows) filterRow(tr, S.parts.get(k));
});

// ------------------------------------------------------------------ controls
async function control(body) {
  const out = $("#control-result");
  out.className = ""; out.textContent = `${body.action}…`;
  const headers = { "Content-Type": "application/json" };
  if (CFG.token_required) headers["X-Kafkasim-Token"] = $("#token").value.trim();
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
    document.body.dataset.t = String(Math.round(t));
  } finally {
    busy = false;
    if (pending !== null) { const p = pending; pending = null; fetchAt(p); }
  }
}
function showTime() {
  const rel = (T - META.start_ns) / 1e9;
  const wall = META.wall_offset_ms != null ? new Date(META.wall_offset_ms + T / 1e6).toISOString().slice(11, 23) : "";
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
  if (CFG.token_required) {
    $("#notice").textContent = `bound to ${CFG.host}: controls need the token printed when the server started`;
    $("#token-box").hidden = false;
  }
  document.body.dataset.mode = CFG.mode;
  if (CFG.mode === "replay") await replay(); else live();
})();
