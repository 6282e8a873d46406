// Braid dashboard: polls the admin API and draws what it says. Every
// string from the server goes in through textContent (names of shares,
// files and clients are the clients' choice).
"use strict";

const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(200, Number(params.get("interval")) || 1000);
const HISTORY_S = 300; // charts: the last five minutes
const RATE_S = 5; // rates: over the last five seconds
const PERCENTILE_S = 10; // latency percentiles: over the last ten seconds
// The server's bucket bounds (also sent in /api/v1/shares).
let BOUNDS_US = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000];
const CLASSES = ["create", "open", "close", "delete", "rename", "stat", "list", "read", "write", "lock", "other"];

const state = { polls: 0, errors: 0, history: {}, lastError: "" };
window.braidDashboard = state;

// The token: from #token=… (never sent to the server), kept for this tab.
(function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("braid-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

async function api(path) {
  const token = sessionStorage.getItem("braid-token");
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const r = await fetch(path, { headers, cache: "no-store" });
  if (r.status === 401) {
    document.getElementById("login").hidden = false;
    throw new Error("the admin API wants its token");
  }
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

document.getElementById("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("braid-token", document.getElementById("token").value.trim());
  document.getElementById("login").hidden = true;
});

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const svgNS = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
function svg(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits ?? 1, minimumFractionDigits: 0 });
}

// A value cell: the number in data-value, formatted text shown.
function num(field, value, digits, cls) {
  return el("td", { "data-field": field, "data-value": value ?? "", class: cls }, fmt(value, digits));
}

function percentile(buckets, zeros, q) {
  const total = zeros + buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  const rank = Math.max(1, Math.ceil(q * total));
  if (rank <= zeros) return 0;
  let seen = zeros;
  for (let i = 0; i < buckets.length; i++) {
    const n = buckets[i];
    if (n > 0 && seen + n >= rank) {
      const lo = i === 0 ? 0 : BOUNDS_US[i - 1];
      if (i >= BOUNDS_US.length) return lo;
      return lo + (BOUNDS_US[i] - lo) * ((rank - seen) / n);
    }
    seen += n;
  }
  return 0;
}

function diff(a, b) {
  return a.map((v, i) => Math.max(0, v - ((b && b[i]) || 0)));
}

// The sample at least `seconds` before the newest (or the oldest kept).
function before(hist, seconds) {
  const now = hist[hist.length - 1];
  for (let i = hist.length - 2; i >= 0; i--) {
    if (now.t - hist[i].t >= seconds) return hist[i];
  }
  return hist.length > 1 ? hist[0] : null;
}

function sample(share, t) {
  const byType = share.operations_by_type || {};
  const s = { t, classes: {}, ops: 0, read: 0, written: 0 };
  for (const c of CLASSES) {
    const o = byType[c];
    if (!o) continue;
    s.classes[c] = o;
    s.ops += o.count;
  }
  s.read = (byType.read || {}).data_bytes || 0;
  s.written = (byType.write || {}).data_bytes || 0;
  const q = share.qos;
  s.credits = q && q.enabled ? q.credits : null;
  return s;
}

function rates(hist) {
  const now = hist[hist.length - 1];
  const old = before(hist, RATE_S);
  if (!old || now.t <= old.t) return null;
  const dt = now.t - old.t;
  const r = { iops: (now.ops - old.ops) / dt, read: (now.read - old.read) / dt / 1048576, write: (now.written - old.written) / dt / 1048576, classes: {} };
  for (const c of CLASSES) {
    const a = now.classes[c], b = old.classes[c];
    if (a) r.classes[c] = (a.count - ((b && b.count) || 0)) / dt;
  }
  return r;
}

// A line chart of series [[t, v]...] over the last HISTORY_S seconds,
// with dashed limit lines.
function chart(name, title, series, limits, unit) {
  const W = 300, H = 90;
  const all = series.flat().map((p) => p[1]).concat(limits.filter((l) => l != null));
  const max = Math.max(1e-9, ...all) * 1.1;
  const tmax = Math.max(...series.flat().map((p) => p[0]), 0);
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", "data-chart": name, "data-points": series[0].length });
  series.forEach((pts, i) => {
    const d = pts.map(([t, v]) => `${(W - ((tmax - t) / HISTORY_S) * W).toFixed(1)},${(H - (v / max) * H).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { class: "s" + i, points: d }));
  });
  for (const l of limits) {
    if (l == null) continue;
    const y = (H - (l / max) * H).toFixed(1);
    root.append(svg("polyline", { class: "limit", points: `0,${y} ${W},${y}` }));
  }
  const last = series.map((s) => (s.length ? s[s.length - 1][1] : 0));
  return el("div", {}, el("div", { class: "caption" }, `${title}: ${last.map((v) => fmt(v, 1)).join(" / ")} ${unit}`), root);
}

function renderShare(share, hist) {
  const r = rates(hist);
  const q = share.qos;
  const cache = share.metadata_cache;
  const throttled = !!(q && q.enabled && q.throttled);
  const card = el("div", { class: "share" + (throttled ? " throttled" : ""), "data-share": share.name, "data-throttled": throttled });
  const h = el("h3", {}, share.name);
  if (throttled) h.append(el("span", { class: "badge", "data-field": "throttled" }, "throttled"));
  card.append(h);
  const kpis = el("div", { class: "kpis" });
  const kpi = (label, field, value, digits) => kpis.append(el("span", {}, label + " ", el("b", { "data-field": field, "data-value": value ?? "" }, fmt(value, digits))));
  kpi("IOPS", "iops", r ? r.iops : null, 0);
  kpi("read MiB/s", "read_mibps", r ? r.read : null, 1);
  kpi("write MiB/s", "write_mibps", r ? r.write : null, 1);
  kpi("operations", "operations_total", hist[hist.length - 1].ops, 0);
  kpi("opens", "opens", share.opens, 0);
  if (cache) {
    const lookups = cache.hits + cache.misses + (cache.negative_hits || 0);
    kpi("cache hit rate %", "cache_hit_rate", cache.enabled && lookups ? (100 * (cache.hits + (cache.negative_hits || 0))) / lookups : null, 1);
  }
  if (q && q.enabled) {
    kpi("provisioned IOPS", "provisioned_iops", q.iops, 0);
    kpi("burst IOPS", "burst_iops", q.burst_iops, 0);
    kpi("credits", "credits", q.credits, 0);
    kpi("of", "credit_capacity", q.credit_capacity, 0);
    if (q.ingress_mibps != null) kpi("ingress limit MiB/s", "ingress_mibps", q.ingress_mibps, 0);
    if (q.egress_mibps != null) kpi("egress limit MiB/s", "egress_mibps", q.egress_mibps, 0);
  }
  card.append(kpis);
  // Charts from the history: IOPS, MiB/s, and credits when provisioned.
  const iops = [], rd = [], wr = [], md = [], cr = [];
  for (let i = 1; i < hist.length; i++) {
    const a = hist[i], b = hist[i - 1], dt = a.t - b.t;
    if (dt <= 0) continue;
    iops.push([a.t, (a.ops - b.ops) / dt]);
    rd.push([a.t, (a.read - b.read) / dt / 1048576]);
    wr.push([a.t, (a.written - b.written) / dt / 1048576]);
    let m = 0;
    for (const c of ["create", "open", "close", "delete", "rename", "stat", "list"]) {
      m += ((a.classes[c] || {}).count || 0) - ((b.classes[c] || {}).count || 0);
    }
    md.push([a.t, m / dt]);
    if (a.credits != null) cr.push([a.t, a.credits]);
  }
  const charts = el("div", { class: "charts" });
  charts.append(chart("iops", "ops/s all / metadata", [iops, md], q && q.enabled ? [q.iops, q.burst_iops] : [], ""));
  charts.append(chart("mibps", "MiB/s read / write", [rd, wr], q && q.enabled ? [q.egress_mibps, q.ingress_mibps] : [], ""));
  if (cr.length) charts.append(chart("credits", "burst credits", [cr], [q.credit_capacity], ""));
  card.append(charts);
  // Operations by type: rate, percentiles over the last seconds, results.
  const table = el("table", { class: "ops" });
  table.append(el("thead", {}, el("tr", {}, ...["type", "ops/s", "count", "p50 µs", "p99 µs", "throttled p50 µs", "throttled p99 µs", "ok", "ok after throttling", "errors"].map((t) => el("th", {}, t)))));
  const body = el("tbody");
  const now = hist[hist.length - 1];
  const old = before(hist, PERCENTILE_S);
  for (const c of CLASSES) {
    const o = now.classes[c];
    if (!o || o.count === 0) continue;
    const b = old && old.classes[c];
    const lat = b ? diff(o.latency_buckets, b.latency_buckets) : o.latency_buckets;
    const thr = b ? diff(o.throttled_buckets, b.throttled_buckets) : o.throttled_buckets;
    const n = lat.reduce((x, y) => x + y, 0);
    const zeros = Math.max(0, n - thr.reduce((x, y) => x + y, 0));
    const thrCls = zeros < n ? "throttled" : undefined;
    body.append(el("tr", { "data-type": c },
      el("td", {}, c),
      num("ops_per_second", r ? r.classes[c] || 0 : null, 1),
      num("count", o.count, 0),
      num("p50_us", n ? percentile(lat, 0, 0.5) : o.latency_p50_us, 0),
      num("p99_us", n ? percentile(lat, 0, 0.99) : o.latency_p99_us, 0),
      num("throttled_p50_us", n ? percentile(thr, zeros, 0.5) : o.throttled_p50_us, 0, thrCls),
      num("throttled_p99_us", n ? percentile(thr, zeros, 0.99) : o.throttled_p99_us, 0, thrCls),
      num("success", o.success, 0),
      num("success_after_throttling", o.success_after_throttling, 0),
      num("errors", o.errors, 0)));
  }
  table.append(body);
  card.append(table);
  return card;
}

function renderSessions(sessions, clients) {
  // Keys from hex: session ids do not all fit a JavaScript number.
  const work = new Map(clients.sessions.map((w) => [w.session_key, w]));
  const rows = sessions.sessions.map((s) => {
    const key = s.protocol + ":" + s.id_hex.replace(/^0x/, "").slice(-16);
    const w = work.get(key) || {};
    const version = s.protocol === "nfs" ? "4." + s.minor_version : s.dialect;
    return el("tr", { "data-session": key },
      el("td", { "data-field": "protocol" }, s.protocol),
      el("td", { "data-field": "id" }, s.id_hex),
      el("td", { "data-field": "user" }, s.user),
      el("td", { "data-field": "client_address" }, s.client_address || ""),
      el("td", { "data-field": "dialect" }, version),
      el("td", { "data-field": "signing" }, s.signing || "off"),
      el("td", { "data-field": "encryption" }, s.encryption || "off"),
      el("td", { "data-field": "channels", "data-value": s.current_channels + "/" + s.max_channels }, s.current_channels + " / " + s.max_channels),
      el("td", { "data-field": "share" }, w.share || ""),
      num("operations_per_second", w.operations_per_second, 1),
      num("read_mibps", w.read_mibps, 1),
      num("write_mibps", w.write_mibps, 1),
      el("td", { "data-field": "in_flight" }, w.in_flight === undefined ? "–" : `${w.in_flight} (${fmt(w.mean_in_flight, 1)})`),
      num("metadata_percent", w.metadata_fraction === undefined ? null : 100 * w.metadata_fraction, 0));
  });
  document.querySelector("#sessions tbody").replaceChildren(...rows);
}

function renderTops(clients) {
  document.querySelector("#top-clients tbody").replaceChildren(...clients.top_clients.map((c) =>
    el("tr", { "data-client": c.client_address },
      el("td", {}, c.client_address), el("td", {}, c.protocol), num("sessions", c.sessions, 0),
      num("operations", c.operations, 0), num("operations_per_second", c.operations_per_second, 1), num("mibps", c.mibps, 1))));
  document.querySelector("#top-files tbody").replaceChildren(...clients.top_files.map((f) =>
    el("tr", { "data-file": f.file }, el("td", {}, f.file), num("operations", f.operations, 0))));
}

// What waits for its client: the NFS grace period after a restart (only
// when NFS is served), and the SMB durable and persistent opens of lost
// connections.
function renderKept(sessions, opens) {
  const line = document.getElementById("nfs-grace");
  const g = sessions.nfs_grace;
  if (!g) {
    line.hidden = true;
    line.replaceChildren();
  } else {
    line.hidden = false;
    line.dataset.active = g.active;
    line.dataset.clientsToReclaim = g.clients_to_reclaim;
    line.dataset.endsInMs = g.ends_in_ms ?? "";
    if (!g.active) {
      line.replaceChildren("NFS: no grace period");
    } else {
      const n = g.clients_to_reclaim;
      const ends = g.ends_in_ms == null ? "" : `, ends within ${fmt(Math.ceil(g.ends_in_ms / 1000), 0)} s`;
      line.replaceChildren(el("b", {}, "NFS grace period: "),
        `${fmt(n, 0)} client${n === 1 ? "" : "s"} still to reclaim${ends} (only reclaims are served until then)`);
    }
  }
  const waiting = opens.opens.filter((o) => o.disconnected);
  const rows = waiting.map((o) => {
    // As `braid status --opens` shows it: the root is \, a directory ends in \.
    const shown = o.path === "" ? "\\" : o.path + (o.directory ? "\\" : "");
    return el("tr", { "data-open": o.share + "\\" + o.path },
      el("td", { "data-field": "share" }, o.share),
      el("td", { "data-field": "path", "data-value": o.path }, shown),
      el("td", { "data-field": "user" }, o.user),
      el("td", { "data-field": "caching" }, o.caching),
      el("td", { "data-field": "persistent", "data-value": !!o.persistent }, o.persistent ? "yes" : "no"),
      num("locks", o.locks, 0));
  });
  if (!rows.length) rows.push(el("tr", { class: "none" }, el("td", { colspan: 6 }, "No open is waiting for its client.")));
  document.querySelector("#kept tbody").replaceChildren(...rows);
}

function renderAdvice(advice) {
  const list = document.getElementById("advice");
  if (!advice.advice.length) {
    list.replaceChildren(el("li", { class: "none" }, "No advice: no session did 100 operations in the last minute, or none has a pattern worth a word."));
    return;
  }
  list.replaceChildren(...advice.advice.map((a) =>
    el("li", { "data-advice": a.id, "data-session": a.session_key },
      el("b", {}, `${a.protocol} ${a.client_address}${a.share ? " on " + a.share : ""}: `), a.headline,
      el("ul", { class: "evidence" }, ...a.evidence.map((e) => el("li", {}, e))))));
}

async function poll() {
  try {
    const [shares, sessions, clients, advice, opens] = await Promise.all([
      api("api/v1/shares"), api("api/v1/sessions"), api("api/v1/clients"), api("api/v1/advice"),
      api("api/v1/opens")]);
    if (Array.isArray(shares.latency_bounds_us)) BOUNDS_US = shares.latency_bounds_us;
    const t = performance.now() / 1000;
    const cards = [];
    for (const share of shares.shares) {
      const hist = (state.history[share.name] = state.history[share.name] || []);
      const next = sample(share, t);
      // Counters that went down: the server restarted, and its counters
      // start again from zero; the old history would chart negative rates.
      const last = hist[hist.length - 1];
      if (last && (next.ops < last.ops || next.read < last.read || next.written < last.written)) hist.length = 0;
      hist.push(next);
      while (hist.length > 2 && t - hist[0].t > HISTORY_S) hist.shift();
      cards.push(renderShare(share, hist));
    }
    document.getElementById("shares").replaceChildren(...cards);
    renderSessions(sessions, clients);
    renderKept(sessions, opens);
    renderTops(clients);
    renderAdvice(advice);
    state.polls++;
    const status = document.getElementById("status");
    status.textContent = "live";
    status.dataset.state = "live";
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    state.errors++;
    state.lastError = String(e.message || e);
    const status = document.getElementById("status");
    status.textContent = state.lastError;
    status.dataset.state = "error";
  }
  setTimeout(poll, POLL_MS);
}

poll();
