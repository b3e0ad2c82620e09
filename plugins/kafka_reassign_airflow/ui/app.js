// Kafka reassignment progress page: polls api/progress and renders it. Plain JS, no build
// step and no CDN. Auth: inside the Airflow UI the session cookie is sent (same origin);
// outside it (curl, a wall screen, tests) a token can be given as #token=<JWT> in the URL,
// which stays in the browser (fragments are never sent to the server).
"use strict";

const params = new URLSearchParams(window.location.search);
const hash = new URLSearchParams(window.location.hash.replace(/^#/, ""));
const token = hash.get("token");
const REFRESH_MS = Number(params.get("refresh_ms") || 5000);

function $(id) { return document.getElementById(id); }

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let v = Math.abs(n), i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (n < 0 ? "-" : "") + (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : 1)) + " " + units[i];
}
function fmtRate(n) { return n === null || n === undefined ? "–" : fmtBytes(n) + "/s"; }
function fmtDuration(s) {
  if (s === null || s === undefined) return "–";
  s = Math.round(s);
  if (s < 60) return s + " s";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h ? `${h} h ${m} min` : `${m} min ${sec} s`;
}
// Nothing to move is an empty bar, not a full one: a full bar reads as "finished".
function pct(moved, total) { return total > 0 ? Math.max(0, Math.min(100, 100 * moved / total)) : 0; }
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "title") e.title = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c === null || c === undefined ? "–" : String(c)));
  return e;
}
function bar(moved, total) {
  const p = pct(moved, total);
  const b = el("span", { class: "bar" + (p >= 100 ? " done" : ""), title: p.toFixed(1) + " %" });
  const inner = el("span"); inner.style.width = p.toFixed(1) + "%"; b.append(inner);
  return b;
}
function list(xs) { return xs && xs.length ? "[" + xs.join(",") + "]" : "[]"; }
function statusClass(s) {
  if (!s) return "";
  if (/^(done|in sync|success)/i.test(s)) return "status-ok";
  if (/(offline|failed|stalled|timed out|under min isr|unknown)/i.test(s)) return "status-bad";
  return "status-warn";
}
function fill(tbodyParent, rows, emptyText, cols) {
  const tbody = tbodyParent.querySelector("tbody");
  tbody.replaceChildren();
  if (!rows.length) {
    tbody.append(el("tr", {}, el("td", { class: "empty", colspan: String(cols) }, emptyText)));
    return;
  }
  for (const r of rows) tbody.append(r);
}

async function api(path, method = "GET") {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(path, { method, headers, credentials: "same-origin" });
  const body = await resp.text();
  if (!resp.ok) {
    let detail = body;
    try { detail = JSON.parse(body).detail || body; } catch (e) { /* not JSON */ }
    throw new Error(`${resp.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
  return JSON.parse(body);
}

function query() {
  const q = new URLSearchParams();
  for (const k of ["dag_id", "run_id", "conn_id"]) if (params.get(k)) q.set(k, params.get(k));
  return q.toString();
}

// "Behind 383820984 bytes" (KIP-179 wording, exact) is shown as "behind 384 MB" here.
function replicaText(r) {
  const what = /^Behind/.test(r.status) ? `behind ${fmtBytes(r.bytes_left)}` : r.status.toLowerCase();
  return `broker ${r.broker} ${r.role}: ${what}`;
}

// ETA only while something moves; otherwise say what the state is.
function etaCard(s) {
  if (!s.partitions_total) return ["ETA", "idle: nothing to move", "idle"];
  if (s.bytes_left === 0) return ["ETA", "done", "ok"];
  if (!s.partitions_in_flight) return ["ETA", "not moving", "idle"];
  return ["ETA", fmtDuration(s.eta_seconds), ""];
}

let chartShownFor = null;
async function showChart(run) {
  const key = `${run.dag_id}|${run.run_id}`;
  if (chartShownFor === key) return;
  chartShownFor = key;
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const q = new URLSearchParams({ dag_id: run.dag_id, run_id: run.run_id });
  const resp = await fetch("api/chart?" + q.toString(), { headers, credentials: "same-origin" });
  if (!resp.ok) { $("plan-chart-box").hidden = true; return; }
  $("plan-chart").src = URL.createObjectURL(await resp.blob());
  $("plan-chart").onload = () => { document.body.dataset.chart = "1"; };
  $("plan-chart-box").hidden = false;
}

function renderPlan(plan, run) {
  $("plan").hidden = !plan;
  if (!plan) return;
  $("plan-headline").querySelector("tbody").replaceChildren(
    ...(plan.headline || []).map(h => el("tr", {}, el("td", {}, h.label), el("td", {}, h.value))));
  const warn = $("plan-warnings"); warn.replaceChildren();
  for (const w of plan.warnings || []) warn.append(el("div", { class: "banner warn" }, w));
  fill($("plan-brokers"), (plan.brokers || []).map(b => el("tr", {},
    el("td", {}, b.broker), el("td", {}, b.rack), el("td", { class: "num" }, b.disk_before),
    el("td", { class: "num" }, b.disk_after),
    el("td", { class: "num " + (b.change > 0 ? "status-warn" : b.change < 0 ? "status-ok" : "") },
       (b.change > 0 ? "+" : "") + b.change.toFixed(1) + " pt"),
    el("td", { class: "num" }, b.data_after), el("td", { class: "num" }, b.replicas),
    el("td", { class: "num" }, b.leaders))), "The plan summary has no broker rows.", 8);
  if (plan.chart && run) showChart(run).catch(() => { $("plan-chart-box").hidden = true; });
  // Opened from the plan task's "Plan summary & chart" link: show the plan once it is rendered.
  if (/^#plan\b/.test(window.location.hash) && !document.body.dataset.scrolled) {
    document.body.dataset.scrolled = "1";
    $("plan").scrollIntoView();
  }
}

// Prepare's estimate (rehearsal or KIP-73 formula, it says which) and the rehearsal report.
function renderEstimate(est) {
  $("estimate").hidden = !est;
  if (!est) return;
  $("estimate-source").textContent = (est.estimate && est.estimate.source) || "";
  $("estimate-text").textContent = (est.estimate && est.estimate.text) || "";
  const rehearsal = est.rehearsal && est.rehearsal.text;
  $("rehearsal-text").hidden = !rehearsal;
  $("rehearsal-text").textContent = rehearsal || "";
}

function render(d) {
  document.body.dataset.loaded = "1";
  const s = d.summary || {};
  const run = d.run;
  $("context").textContent = run
    ? `${run.dag_id} · ${run.run_id} · run ${run.state} · connection ${d.conn_id}` + (d.cluster_id ? ` · cluster ${d.cluster_id}` : "")
    : `All reassignments in flight on connection ${d.conn_id}` + (d.cluster_id ? ` · cluster ${d.cluster_id}` : "");

  const warnings = $("warnings"); warnings.replaceChildren();
  for (const w of d.warnings || []) warnings.append(el("div", { class: "banner warn" }, w));
  if (s.held) warnings.append(el("div", { class: "banner warn" }, "New moves held back: " + s.held));
  renderPause(run, s);

  const umi = (d.under_min_isr || []).length;
  const cards = [
    ["Bytes moved", fmtBytes(s.bytes_moved), ""],
    ["Bytes left", fmtBytes(s.bytes_left), ""],
    ["Rate", fmtRate(s.rate_bytes_per_sec), ""],
    etaCard(s),
    ["Partitions moving", `${s.partitions_in_flight ?? 0} / ${s.partitions_total ?? 0}`, ""],
    ["Steps", s.steps_total ? `${s.steps_done} done · ${s.steps_in_flight} in flight · ${s.steps_queued} queued` : "–",
     s.outcome && s.outcome !== "in_progress" && s.outcome !== "done" ? "bad" : ""],
    ["Under min ISR", String(umi), umi ? "bad" : "ok"],
    ...(s.caps ? [["Moves at once (adaptive)", s.caps, ""]] : []),
    ...(s.throttle ? [["Throttle (adaptive)", s.throttle, ""]] : []),
  ];
  $("cards").replaceChildren(...cards.map(([label, value, cls]) =>
    el("div", { class: "card " + cls }, el("div", { class: "label" }, label), el("div", { class: "value" }, value))));
  $("overall-bar").style.width = (s.partitions_total ? pct(s.bytes_moved || 0, s.bytes_total || 0) : 0).toFixed(1) + "%";
  renderPlan(d.plan, run);
  renderEstimate(d.estimate);

  $("umi-count").textContent = String(umi);
  $("umi-count").className = "pill" + (umi ? " bad" : "");
  fill($("under-min-isr"), (d.under_min_isr || []).map(p => el("tr", { class: "bad" },
    el("td", {}, `${p.topic}-${p.partition}`), el("td", {}, list(p.isr)), el("td", {}, list(p.replicas)),
    el("td", { class: "num" }, p.min_isr))), "None: every partition has at least min.insync.replicas in sync.", 4);

  fill($("throttles"), (d.throttles || []).map(t => el("tr", {},
    el("td", {}, t.broker), el("td", { class: "num" }, fmtRate(t.leader_rate)),
    el("td", { class: "num" }, fmtRate(t.follower_rate)), el("td", { class: "num" }, fmtRate(t.log_dir_rate)),
    el("td", {}, t.set_by))), "No replication throttle set on any broker.", 5);

  fill($("partitions"), (d.partitions || []).map(p => el("tr", { class: p.under_min_isr ? "bad" : (p.in_flight ? "active" : "") },
    el("td", {}, `${p.topic}-${p.partition}`), el("td", {}, p.step), el("td", { class: statusClass(p.status), title: p.message || "" }, p.status),
    el("td", {}, list(p.current)), el("td", {}, list(p.target)), el("td", {}, list(p.isr)),
    el("td", {}, bar(p.bytes_moved || 0, p.bytes_total || 0)),
    el("td", { class: "num" }, fmtBytes(p.bytes_moved)), el("td", { class: "num" }, fmtBytes(p.bytes_left)),
    el("td", {}, (p.replicas || []).map(replicaText).join("; ") || "–"))),
    "No partition is moving.", 10);

  $("updated").textContent = "updated " + new Date(d.generated_at || Date.now()).toLocaleTimeString();
  $("error").hidden = true;
}

// Pause / resume: no new move starts while paused, those in flight finish (api/pause, api/resume).
function renderPause(run, s) {
  const box = $("pause-box");
  const live = run && run.state === "running" && (!s.outcome || s.outcome === "in_progress");
  box.hidden = !live;
  if (!live) return;
  const btn = $("pause-btn");
  btn.textContent = run.paused ? "Resume new moves" : "Pause new moves";
  btn.onclick = async () => {
    const q = new URLSearchParams({ dag_id: run.dag_id, run_id: run.run_id });
    btn.disabled = true;
    try { await api((run.paused ? "api/resume?" : "api/pause?") + q.toString(), "POST"); await refresh(); }
    catch (e) { $("error").textContent = String(e); $("error").hidden = false; }
    finally { btn.disabled = false; }
  };
}

async function loadConnections() {
  try {
    const sel = $("conn-select");
    const current = params.get("conn_id") || "";
    const data = await api("api/connections");
    sel.replaceChildren(el("option", { value: "" }, "the run's (or kafka_default)"),
      ...(data.connections || []).map(c => el("option", { value: c }, c)));
    sel.value = current;
    sel.addEventListener("change", () => {
      const q = new URLSearchParams(window.location.search);
      if (sel.value) q.set("conn_id", sel.value); else q.delete("conn_id");
      window.location.search = q.toString();
    });
  } catch (e) { /* the picker is a convenience; progress still renders */ }
}

async function loadRuns() {
  try {
    const runs = await api("api/runs");
    const sel = $("run-select");
    for (const r of runs.runs || []) {
      const o = el("option", { value: `${r.dag_id}|${r.run_id}` }, `${r.dag_id} · ${r.run_id} (${r.state})`);
      // An unencoded '+' in a run id (from the UI's {RUN_ID} link) arrives here as a space.
      if (r.dag_id === params.get("dag_id") && r.run_id === (params.get("run_id") || "").replace(/ /g, "+")) o.selected = true;
      sel.append(o);
    }
    sel.addEventListener("change", () => {
      const [dag, runId] = sel.value.split("|");
      const q = new URLSearchParams(window.location.search);
      if (dag) { q.set("dag_id", dag); q.set("run_id", runId); } else { q.delete("dag_id"); q.delete("run_id"); }
      window.location.search = q.toString();
    });
  } catch (e) { /* the run list is a convenience; progress still renders */ }
}

// Fleet: one row per cluster from stored state only (api/fleet never connects to Kafka), shown
// on the cluster-wide view; a run's own page shows that run alone.
const SHOW_FLEET = !params.get("dag_id");
function link(href, text) { return href ? el("a", { href }, text) : el("span", {}, text); }
function sub(text) { return el("span", { class: "sub" }, text); }
function ratio(x) { return x === null || x === undefined ? "–" : Number(x).toFixed(3); }
function fmtAgo(iso) {
  if (!iso) return "";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  return s >= 0 ? fmtDuration(s) + " ago" : "";
}

function fleetCells(c) {
  const b = c.balance, f = c.in_flight, r = c.reconciler, last = c.last_rebalance;
  const q = new URLSearchParams({ conn_id: c.conn_id });
  const throttles = (c.throttles || []).map(t => el("div", {},
    link(t.link, t.run_id), sub(`${t.settings} setting(s)` + (t.run_active ? " · run still active" : " · run ended")
                                + (t.pending && t.pending.length ? " · pending: " + t.pending.join(", ") : ""))));
  return [
    el("td", {}, link("?" + q.toString(), c.conn_id), sub(c.cluster_id ? "cluster " + c.cluster_id : "cluster id not seen yet")),
    el("td", {}, el("span", { class: "status-word " + c.status.replace(/ /g, "-") }, c.status)),
    el("td", { class: "num" }, b ? ratio(b.disk) : "–", sub(b ? `threshold ${ratio(b.threshold)}` : "no plan stored")),
    el("td", { class: "num" }, b ? ratio(b.leaders) : "–"),
    el("td", {}, f ? link(f.link, f.run_id) : "none",
       f ? sub(`${f.dag_id} · ${f.percent === null ? "not started" : f.percent.toFixed(1) + " %"} · ETA ${fmtDuration(f.eta_seconds)}`) : ""),
    el("td", {}, ...(throttles.length ? throttles : ["none"])),
    el("td", {}, r ? r.text : "no sweep yet", r && r.run_id ? sub(r.run_id) : ""),
    el("td", {}, last ? link(last.link, last.state) : "never run", last ? sub(`${last.run_id} · ${fmtAgo(last.end_date || last.start_date)}`) : ""),
  ];
}

function renderFleet(d) {
  $("fleet").hidden = false;
  $("fleet-error").hidden = true;
  const counts = Object.entries(d.counts || {}).filter(([, n]) => n).map(([w, n]) => `${n} ${w}`).join(" · ");
  $("fleet-counts").textContent = `${(d.clusters || []).length} cluster(s)` + (counts ? " · " + counts : "");
  fill($("fleet-table"), (d.clusters || []).map(c => el("tr", { "data-conn": c.conn_id, "data-status": c.status },
    ...fleetCells(c))), "No cluster listed.", 8);
  const other = $("fleet-other"); other.replaceChildren();
  for (const t of d.other_throttles || []) {
    other.append(el("div", { class: "banner warn" }, `Unrestored throttle record of run ${t.run_id}`
      + ` (cluster ${t.cluster_id || "unknown"}) matches no cluster of the fleet.`));
  }
  document.body.dataset.fleet = "1";
  return d;
}

// With a fleet and no cluster picked, the page is the fleet overview: no cluster is read live
// until one is picked (a click on its name), so an unreachable cluster never blocks the page.
async function refreshFleet() {
  if (!SHOW_FLEET) return false;
  try {
    const d = renderFleet(await api("api/fleet"));
    return Boolean(d.configured) && !params.get("conn_id");
  } catch (e) {
    $("fleet").hidden = false;
    $("fleet-error").textContent = "Could not read the fleet: " + e.message;
    $("fleet-error").hidden = false;
    document.body.dataset.fleet = "error";
    return false;
  }
}

async function refresh() {
  try {
    render(await api("api/progress?" + query()));
  } catch (e) {
    document.body.dataset.loaded = "error";
    $("error").textContent = "Could not read progress: " + e.message;
    $("error").hidden = false;
  }
}

async function loop() {
  const overview = await refreshFleet();
  $("cluster-view").hidden = overview;
  if (overview) $("context").textContent = "Fleet overview: pick a cluster (its name) for its live view, a run for its progress.";
  else await refresh();
  if ($("auto").checked) setTimeout(loop, REFRESH_MS);
}
$("auto").addEventListener("change", () => { if ($("auto").checked) loop(); });
loadConnections();
loadRuns();
loop();
