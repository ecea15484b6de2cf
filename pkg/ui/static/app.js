// The page: one EventSource on /api/events, which sends every figure twice
// a second, and the journey of the Book picked.
"use strict";

const $ = (id) => document.getElementById(id);
let source = null;
let picked = "";
const previous = {};

function fmtNum(n) { return Number.isInteger(n) ? String(n) : n.toFixed(3); }
function fmtSec(s) {
  if (!s) return "0";
  if (s < 1) return (s * 1000).toFixed(1) + " ms";
  return s.toFixed(2) + " s";
}

// fill writes [label, value] pairs into a <dl>, and marks the box as moved
// when they changed since the last update.
function fill(id, pairs) {
  const dl = $(id);
  const text = JSON.stringify(pairs);
  const box = dl.closest(".box");
  if (previous[id] !== undefined && previous[id] !== text) {
    box.classList.add("moved");
    setTimeout(() => box.classList.remove("moved"), 400);
  }
  previous[id] = text;
  dl.replaceChildren(...pairs.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    return [dt, dd];
  }));
}

function drawPipeline(s) {
  const b = s.informers.books, c = s.informers.configmaps;
  const ev = (f) => `${f.events.add || 0} / ${f.events.update || 0} / ${f.events.delete || 0}`;
  fill("fig-reflector", [
    ["Books add/upd/del", ev(b)], ["ConfigMaps add/upd/del", ev(c)],
    ["initial list (B / CM)", `${b.initialList} / ${c.initialList}`],
    ["queued as backfill (B / CM)", `${b.backfill || 0} / ${c.backfill || 0}`],
    ["relists (B / CM)", `${b.relists} / ${c.relists}`],
  ]);
  const err = b.lastRelistError || c.lastRelistError;
  if (err) {
    const ago = Math.min(b.lastRelistAgoSeconds || Infinity, c.lastRelistAgoSeconds || Infinity);
    $("fig-reflector").append(Object.assign(document.createElement("dd"), {
      className: "note", textContent: `last watch error ${fmtSec(ago)} ago: ${err}`,
    }));
  }
  const total = (f) => (f.events.add || 0) + (f.events.update || 0) + (f.events.delete || 0);
  fill("fig-fifo", [["deltas delivered", String(total(b) + total(c))]]);
  fill("fig-indexer", [["Books stored", String(b.stored)], ["ConfigMaps stored", String(c.stored)]]);
  const h = s.handlers;
  fill("fig-handlers", [
    ["enqueued", String(h.enqueued || 0)], ["skipped: echo", String(h["skipped-echo"] || 0)],
    ["ignored: resync", String(h["ignored-resync"] || 0)], ["held back, released", String(h.released || 0)],
  ]);
  const q = s.queue;
  fill("fig-queue", [
    ["depth", fmtNum(q.depth)], ["adds", fmtNum(q.adds)], ["retries", fmtNum(q.retries)],
    ["longest wait now", fmtSec(q.longestWaitSeconds)], ["mean wait", fmtSec(q.meanWaitSeconds)],
    ["backoffs", String(q.backoffs)], ["last backoff", fmtSec(q.lastBackoffSeconds)],
  ]);
  drawWorkers(s.workers, q);
  drawSyncs(s);
  drawWrites(s.writes || []);
  fill("fig-requests", Object.entries(s.requests || {}).sort().map(([code, n]) => [`requests ${code}`, fmtNum(n)]));
  drawLeader(s.leadership);
  drawConversions(s.conversions); // fork:line v2
}
// fork:begin v2

// version is an apiVersion without its group: "webapp.ydzs.io/v2" is v2.
function version(v) { return (v || "?").split("/").pop(); }

function drawConversions(c) {
  if (!c) return;
  const r = c.results || {};
  const pairs = [
    ["webhook", c.serving ? "served here" : "not served here (crd.yaml, or --webhook-bind-address 0)"],
    ["reviews", String(c.reviews)], ["success / failure", `${r.success || 0} / ${r.failure || 0}`],
    ["bad request / panic", `${r.bad_request || 0} / ${r.panic || 0}`], ["objects in them", String(c.objects)],
  ];
  if (c.dropped) pairs.push(["older, no longer kept", String(c.dropped)]);
  fill("fig-conversion", pairs);
  $("fig-reviews").tBodies[0].replaceChildren(...(c.recent || []).map((v) => {
    const tr = document.createElement("tr");
    const from = (v.fromVersions || []).map(version).join(", ") || "?";
    const books = (v.books || []).join(", ") + (v.objects > (v.books || []).length ? ", …" : "");
    const versions = v.desiredAPIVersion ? `${from} → ${version(v.desiredAPIVersion)}` : "—";
    const cells = [v.at.slice(11, 23), versions,
      books ? `${v.objects}: ${books}` : String(v.objects), v.message ? `${v.result}: ${v.message}` : v.result, fmtSec(v.tookSeconds)];
    for (const text of cells) {
      const td = document.createElement("td"); td.textContent = text; tr.append(td);
    }
    if (v.result !== "success") tr.className = "bad";
    return tr;
  }));
}
// fork:end v2

function drawWorkers(w, q) {
  const busy = w.busy || [];
  fill("fig-workers", [
    ["busy / total", `${busy.length} / ${w.total}`],
    ["keys taken", String(w.taken)],
    ["longest running", fmtSec(q.longestRunningSeconds)],
  ]);
  $("busy").replaceChildren(...busy.map((b) => {
    const li = document.createElement("li");
    li.textContent = `#${b.worker}: ${b.book} for ${fmtSec(b.sinceSeconds)}`;
    return li;
  }));
}

function drawSyncs(s) {
  const pairs = Object.entries(s.syncs).sort().map(([k, v]) => [k, String(v)]);
  for (const [res, n] of Object.entries(s.cacheWaits)) pairs.push([`waited for ${res} cache`, String(n)]);
  for (const [why, n] of Object.entries(s.refusals || {}).sort()) pairs.push([`refused: ${why}`, String(n)]);
  if (pairs.length === 0) pairs.push(["syncs", "0"]);
  fill("fig-sync", pairs);
}

function drawWrites(writes) {
  const body = $("fig-writes").tBodies[0];
  body.replaceChildren(...writes.map((w) => {
    const tr = document.createElement("tr");
    for (const v of [w.verb, w.resource, w.code || "none", w.count]) {
      const td = document.createElement("td"); td.textContent = String(v); tr.append(td);
    }
    return tr;
  }));
}

function drawLeader(l) {
  const pairs = [["leading", l.leading ? "yes" : "no"]];
  if (l.shardsHeld !== undefined) pairs.push(["shards held", String(l.shardsHeld)]);
  for (const [name, held] of Object.entries(l.leases || {}).sort()) {
    if (name) pairs.push([`Lease ${name}`, held ? "held" : "not held"]);
  }
  fill("fig-leader", pairs);
}

function drawBooks(books) {
  $("books").replaceChildren(...books.map((b) => {
    const li = document.createElement("li");
    const btn = document.createElement("button");
    btn.type = "button";
    btn.textContent = `${b.namespace}/${b.name}`;
    btn.title = `${b.steps} steps, last at ${b.last}`;
    btn.addEventListener("click", () => pick(`${b.namespace}/${b.name}`));
    li.append(btn);
    return li;
  }));
}

// describe turns one step into a sentence.
function describe(st, index) {
  switch (st.kind) {
  case "event": {
    const what = `${st.informer || "held-back"} ${st.type}${st.initialList ? " (initial list)" : ""}`;
    const rv = st.resourceVersion ? ` at RV ${st.resourceVersion}` : "";
    let echo = "";
    if (st.echoOf !== undefined) {
      echo = `, the echo of step ${st.echoOf + 1}`;
      if (st.echoOf > index) echo += " (it came back before the write's answer)";
    }
    const line = st.queued ? ` (${st.queued})` : "";
    return ["watch event", `${what}${rv} → ${st.decision}${line}${echo}`, st.decision === "enqueued" ? "" : "skip"];
  }
  case "worker":
    return ["worker", `#${st.worker} took it after ${fmtSec(st.waitedSeconds)} in the queue`, ""];
  case "cache-wait":
    return ["waiting for cache", `${st.resource} cache at RV ${st.cacheResourceVersion}, our write at RV ${st.resourceVersion}`, "skip"];
  case "write": {
    const ans = st.error ? `${st.code || "no answer"}: ${st.error}` : `${st.code}, RV ${st.resourceVersion}`;
    return ["API write", `${st.verb} ${st.resource} → ${ans} (${fmtSec(st.tookSeconds)})`, st.error ? "bad" : ""];
  }
  // fork:begin v2
  case "conversion": {
    const from = (st.fromVersions || []).map(version).join(", ") || "?";
    let s = `the API server asked the webhook for ${from} → ${version(st.desiredAPIVersion)}, ${st.objects || 0} object(s): ${st.result} in ${fmtSec(st.tookSeconds)}`;
    if (st.error) s += `: ${st.error}`;
    return ["conversion", s, st.result === "success" ? "skip" : "bad"];
  }
  // fork:end v2
  case "sync": {
    let s = `${st.result} in ${fmtSec(st.tookSeconds)}`;
    if (st.refusal) s += ` (refused: ${st.refusal})`;
    if (st.error) s += `: ${st.error}; retry after ${fmtSec(st.backoffSeconds)}`;
    if (st.requeueAfterSeconds) s += `; again after ${fmtSec(st.requeueAfterSeconds)}`;
    return ["sync", s, st.error ? "bad" : "ok"];
  }
  }
  return [st.kind, "", ""];
}

function drawJourney(j) {
  $("timeline-title").textContent = `${j.namespace}/${j.name}`;
  $("timeline-note").textContent = j.dropped ? `${j.steps} steps; the oldest ${j.dropped} are no longer kept.` : `${j.steps} steps.`;
  // fork:begin v2
  if (j.conversions) $("timeline-note").textContent += ` With them, ${j.conversions} conversions of this Book by the webhook.`;
  // fork:end v2
  const t0 = j.path.length ? Date.parse(j.path[0].at) : 0;
  $("timeline").replaceChildren(...j.path.map((st, i) => {
    const [kind, text, cls] = describe(st, i);
    const li = document.createElement("li");
    li.dataset.kind = st.kind;
    if (cls) li.className = cls;
    const t = document.createElement("span"); t.className = "t";
    t.textContent = `+${((Date.parse(st.at) - t0) / 1000).toFixed(3)} s`;
    t.title = st.at;
    const k = document.createElement("span"); k.className = "k"; k.textContent = kind;
    li.append(t, k, document.createTextNode(text));
    return li;
  }));
}

// linkSources points the boxes' links to this repository's files at
// --ui-source-url, when the controller was given one.
function linkSources(base) {
  if (!base) return;
  for (const a of document.querySelectorAll("a[data-path]")) a.href = base + a.dataset.path;
}

function connect() {
  if (source) source.close();
  const url = picked ? `api/events?book=${encodeURIComponent(picked)}` : "api/events";
  source = new EventSource(url);
  source.onopen = () => { $("status").textContent = "live"; $("status").className = ""; };
  source.onerror = () => { $("status").textContent = "reconnecting…"; $("status").className = "off"; };
  source.onmessage = (msg) => {
    const u = JSON.parse(msg.data);
    linkSources(u.snapshot.sourceURL);
    drawPipeline(u.snapshot);
    drawBooks(u.snapshot.books || []);
    if (u.journey) drawJourney(u.journey);
    else if (picked) {
      $("timeline-title").textContent = picked;
      $("timeline-note").textContent = "No journey kept for this Book yet: create or edit it, and its steps appear here.";
      $("timeline").replaceChildren();
    }
  };
}

function pick(name) {
  picked = name.trim();
  $("book").value = picked;
  connect();
}

$("pick").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("book").value.trim();
  if (v && !/^[^/\s]+\/[^/\s]+$/.test(v)) {
    $("timeline-note").textContent = `"${v}" is not namespace/name: type e.g. default/my-book.`;
    return;
  }
  pick(v);
});

connect();
