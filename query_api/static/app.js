// ldpstream dashboard: a collection over time (GET …/series) and over the selected time
// range (frequencies, CDF and quantiles, mean, heavy hitters), with intervals.
// Plain DOM + SVG, nothing fetched from elsewhere.  Live updates come over Server-Sent
// Events, opened only once the page has loaded and is visible; `?static=1` never opens
// them (nor does a headless browser without `?live=1`).  `#<collection>/<range>` selects
// a view.
"use strict";
const $ = (id) => document.getElementById(id);
const NS = "http://www.w3.org/2000/svg";
const PARAMS = new URLSearchParams(location.search);
// A snapshot without live updates: `?static=1`, or a headless browser (an open event
// stream would keep `chromium --headless --virtual-time-budget` from ever finishing)
// unless `?live=1`.
const STATIC = PARAMS.has("static") ||
  (/HeadlessChrome/.test(navigator.userAgent) && !PARAMS.has("live"));
const RANGES = { "15m": 900, "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800 };
const COLORS = ["#2f6fde", "#e0533d", "#1a9c6b", "#9b51e0", "#e8a317", "#17a2b8", "#d63384",
                "#6c757d"];
const TOP = 40, MAX_POINTS = 60;
let collections = [], current = null, detail = null, range = "1h", source = null;
let methods = [], guideline = {}, renderSeq = 0, pending = null, lastRender = 0;

// ---- formatting ----------------------------------------------------------------------
const HEX = /^[0-9a-f]{2,6}(-[0-9a-f]{2,6})*$/i;
function emojiDomain(labels) {
  // Labels that are all Unicode code points in hex ("1F602", "0031-20E3") are emoji.
  return labels.length > 0 && labels.every((l) => HEX.test(l)) &&
    labels.some((l) => l.split("-").some((h) => parseInt(h, 16) >= 0x2000));
}
function showLabel(label) {
  if (detail && detail.emoji && HEX.test(label)) {
    try { return String.fromCodePoint(...label.split("-").map((h) => parseInt(h, 16))); }
    catch (e) { return label; }
  }
  return String(label);
}
const fmtInt = (n) => Number(n).toLocaleString("en-US");
function fmtNum(v) {
  if (v === null || v === undefined) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.01 || a >= 1e6)) return v.toPrecision(3);
  return (+v.toPrecision(4)).toLocaleString("en-US", { maximumFractionDigits: 3 });
}
function fmtPct(v) {
  const p = v * 100, a = Math.abs(p);
  return (a >= 10 ? p.toFixed(1) : a >= 1 ? p.toFixed(2) : p.toFixed(3)) + " %";
}
// An interval of a share, clamped to [0, 100 %] (the true share lies there).
const ciPct = (lo, hi) => `${fmtPct(Math.max(0, lo))} – ${fmtPct(Math.min(1, hi))}`;
const DATE = { month: "short", day: "numeric" };
const HM = { hour: "2-digit", minute: "2-digit", hour12: false };
function fmtDateTime(t, seconds) {
  const d = new Date(t * 1000);
  const opt = { ...DATE, ...HM, year: "numeric" };
  if (seconds) opt.second = "2-digit";
  return d.toLocaleString("en-GB", opt);
}
function fmtSpan(t0, t1) {
  const a = new Date(t0 * 1000), b = new Date(t1 * 1000);
  const sameDay = a.toDateString() === new Date((t1 - 1) * 1000).toDateString();
  return `${a.toLocaleString("en-GB", { ...DATE, ...HM })} – ` +
    (sameDay ? b.toLocaleTimeString("en-GB", HM) : b.toLocaleString("en-GB", { ...DATE, ...HM }));
}
function fmtDuration(s) {
  if (s % 86400 === 0) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

// ---- SVG helpers ---------------------------------------------------------------------
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}
function frame(svg, m) {
  svg.replaceChildren();
  const w = svg.clientWidth || 800, h = svg.clientHeight || 300;
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const f = { svg, w, h, L: 64, R: 16, T: 12, B: 40, ...(m || {}) };
  f.x0 = f.L; f.x1 = w - f.R; f.y0 = f.T; f.y1 = h - f.B;
  const id = svg.id + "-clip";
  const clip = el("clipPath", { id }, el("defs", {}, svg));
  el("rect", { x: f.x0, y: f.y0 - 1, width: f.x1 - f.x0, height: f.y1 - f.y0 + 2 }, clip);
  f.clip = `url(#${id})`;
  return f;
}
function niceStep(span, count) {
  const raw = span / Math.max(1, count), p = Math.pow(10, Math.floor(Math.log10(raw)));
  const m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}
function ticks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const s = niceStep(hi - lo, count), out = [];
  for (let v = Math.ceil(lo / s - 1e-9) * s; v <= hi + s * 1e-9; v += s) out.push(+v.toPrecision(12));
  return out;
}
function yAxis(f, lo, hi, y, fmt, title) {
  for (const v of ticks(lo, hi, 4)) {
    const yy = y(v);
    el("line", { x1: f.x0, x2: f.x1, y1: yy, y2: yy, class: v === 0 ? "axis0" : "axis" }, f.svg);
    el("text", { x: f.x0 - 6, y: yy + 4, "text-anchor": "end" }, f.svg).textContent = fmt(v);
  }
  if (title) {
    const t = el("text", { x: 12, y: (f.y0 + f.y1) / 2, class: "title", "text-anchor": "middle",
                           transform: `rotate(-90 12 ${(f.y0 + f.y1) / 2})` }, f.svg);
    t.textContent = title;
  }
}
function timeTicks(t0, t1) {
  const steps = [60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400];
  const step = steps.find((s) => (t1 - t0) / s <= 7) || 7 * 86400;
  const off = new Date(t0 * 1000).getTimezoneOffset() * 60;  // ticks at local round times
  const out = [];
  for (let t = Math.ceil((t0 - off) / step) * step + off; t <= t1; t += step) out.push(t);
  return { out, step };
}
function timeAxis(f, t0, t1, x, title) {
  const { out, step } = timeTicks(t0, t1);
  let lastDay = "";
  for (const t of out) {
    const xx = x(t), d = new Date(t * 1000), day = d.toLocaleDateString("en-GB", DATE);
    el("line", { x1: xx, x2: xx, y1: f.y0, y2: f.y1, class: "axis" }, f.svg);
    const time = d.toLocaleTimeString("en-GB", HM);
    const label = step >= 86400 ? day : day !== lastDay ? `${day} ${time}` : time;
    lastDay = day;
    el("text", { x: xx, y: f.y1 + 14, "text-anchor": "middle" }, f.svg).textContent = label;
  }
  if (title) el("text", { x: (f.x0 + f.x1) / 2, y: f.y1 + 32, class: "title",
                          "text-anchor": "middle" }, f.svg).textContent = title;
}
function tip(node, text) { node.dataset.tip = text; return node; }

// ---- tooltips ------------------------------------------------------------------------
function onMove(ev) {
  const t = ev.target && ev.target.closest ? ev.target.closest("[data-tip]") : null;
  const box = $("tip");
  if (!t) { box.hidden = true; return; }
  box.textContent = t.dataset.tip;
  box.hidden = false;
  const r = box.getBoundingClientRect();
  let x = ev.clientX + 14, y = ev.clientY + 14;
  if (x + r.width > innerWidth - 4) x = ev.clientX - r.width - 14;
  if (y + r.height > innerHeight - 4) y = ev.clientY - r.height - 14;
  box.style.left = `${Math.max(4, x)}px`; box.style.top = `${Math.max(4, y)}px`;
}
document.addEventListener("mousemove", onMove);
document.addEventListener("mouseover", onMove);

// ---- data ----------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) { super(body?.error?.message || `HTTP ${status}`); this.status = status; this.body = body; }
}
async function getJSON(url) {
  const r = await fetch(url);
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}
function kindOf(c) {
  const q = c.queries || [];
  if (q.includes("attributes")) return "attributes";
  // Set-valued collections (devices hold sets of items): one panel per phase kind.
  if (q.includes("top-items")) return "items";
  if (q.includes("top-itemsets")) return "itemsets";
  if (q.includes("set-sizes")) return "sizes";
  if (q.includes("mean")) return "numeric";
  if (q.includes("cdf")) return "ordered";
  if (q.includes("frequencies")) return "categorical";
  return "heavy";
}
function base(path) { return `/v1/collections/${encodeURIComponent(current.id)}/${path}`; }
let rangeSince = 0;
function rangeParams(extra) {
  // An absolute start on a window boundary: every request of one view reads the same
  // windows, so the API reads the state once and answers the rest from its cache.
  return new URLSearchParams({ since: String(rangeSince), ...(extra || {}) });
}
function methodParam(qs) {
  // "recommended": auto — the method of least simulated error for the query (the answer
  // names the method it used).
  const m = $("method").value;
  qs.set("method", m && m !== "recommended" ? m : guideline.frequent || "norm");
  return qs;
}
function domainText(d) {
  if (d.kind === "attributes") return `${d.attributes.length} attributes: ${d.attributes.map((a) => a.name).join(", ")}`;
  if (d.kind === "categories") return `${fmtInt(d.labels.length)} categories`;
  if (d.kind === "integers") return `whole numbers ${fmtInt(d.low)} to ${fmtInt(d.high)}`;
  return `numbers ${fmtNum(d.low)} to ${fmtNum(d.high)} (${d.bins} bins)`;
}

// ---- page ----------------------------------------------------------------------------
async function init() {
  const [c, r] = (location.hash.slice(1) || "").split("/");
  if (r && RANGES[r]) range = r;
  try {
    const m = await getJSON("/v1/methods");
    methods = m.methods; guideline = m.guideline;
  } catch (e) { methods = []; }
  for (const b of document.querySelectorAll("#ranges button")) {
    b.addEventListener("click", () => { range = b.dataset.range; updateHash(); render(); });
  }
  $("method").addEventListener("change", () => render());
  if (STATIC) $("conn").textContent = "snapshot (not live)";
  await loadCollections(c);
  if (!STATIC) {
    setInterval(() => loadCollections(), 30000);
    const start = () => { if (document.visibilityState === "visible") openStream(); };
    document.addEventListener("visibilitychange", start);
    if (document.readyState === "complete") setTimeout(start, 500);
    else addEventListener("load", () => setTimeout(start, 500));
  }
}

function updateHash() {
  if (current) history.replaceState(null, "", `${location.pathname}${location.search}#${current.id}/${range}`);
}

async function loadCollections(wanted) {
  let data;
  try { data = await getJSON("/v1/collections"); } catch (e) { $("conn").textContent = "API unreachable"; return; }
  collections = data.collections;
  const ul = $("collections");
  ul.replaceChildren();
  for (const c of collections) {
    const li = document.createElement("li");
    li.dataset.id = c.id;
    const strong = document.createElement("strong"), small = document.createElement("small");
    strong.textContent = c.id;
    small.textContent = c.description || `${c.mechanism}, ε = ${c.epsilon}`;
    li.append(strong, small);
    li.title = `${c.mechanism}, ε = ${c.epsilon}`;
    li.addEventListener("click", () => select(c));
    if (current && current.id === c.id) li.classList.add("active");
    ul.appendChild(li);
  }
  const pick = collections.find((c) => c.id === wanted) || (!current && collections[0]);
  if (pick) await select(pick);
}

async function select(c) {
  current = c;
  for (const li of $("collections").children) li.classList.toggle("active", li.dataset.id === c.id);
  $("empty").hidden = true; $("panel").hidden = false;
  try { detail = await getJSON(base("").slice(0, -1)); } catch (e) { detail = { ...c }; }
  detail.kind = kindOf(c);
  detail.window = (detail.spec && detail.spec.window_seconds) || 3600;
  detail.emoji = detail.domain.kind === "categories" && emojiDomain(detail.domain.labels || []);
  $("cid").textContent = c.id;
  $("desc").textContent = c.description || "(no description)";
  $("mech").textContent = c.mechanism;
  $("eps").textContent = c.epsilon;
  $("domain").textContent = domainText(detail.domain);
  $("wlen").textContent = fmtDuration(detail.window);
  const sel = $("method");
  sel.replaceChildren();
  const frequencyLike = detail.kind === "categorical";
  sel.closest("div").hidden = !frequencyLike;  // post-processing applies to frequencies
  const rec = guideline.frequent ? `recommended (${guideline.frequent})` : "recommended";
  for (const [v, t] of [["recommended", rec], ...(frequencyLike ? methods.map((m) => [m, m]) : [])]) {
    const o = document.createElement("option"); o.value = v; o.textContent = t; sel.appendChild(o);
  }
  updateHash();
  if (source) { source.close(); source = null; openStream(); }
  await render();
}

function openStream() {
  if (STATIC || source || !current) return;
  source = new EventSource(`${base("stream")}?top=1`);
  source.onopen = () => { $("conn").textContent = "live"; $("conn").classList.add("live"); };
  source.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").classList.remove("live"); };
  source.addEventListener("estimates", () => {
    // New reports counted: refresh, at most every 5 s, and less often for long ranges
    // (the whole selected range is read anew when it changed): up to every 2 min for 7 days.
    const period = Math.min(120000, Math.max(5000, RANGES[range] * 1000 / 1000));  // range / 1000
    const wait = Math.max(0, period - (Date.now() - lastRender));
    if (!pending) pending = setTimeout(() => { pending = null; render(); }, wait);
  });
}

function bucketFor(seconds) {
  const w = detail.window;
  return Math.max(1, Math.ceil(seconds / MAX_POINTS / w)) * w;
}

async function render() {
  const seq = ++renderSeq;
  lastRender = Date.now();
  document.body.dataset.ready = "";
  for (const b of document.querySelectorAll("#ranges button")) b.classList.toggle("active", b.dataset.range === range);
  const seconds = RANGES[range], bucket = bucketFor(seconds);
  rangeSince = Math.floor((Date.now() / 1000 - seconds) / detail.window) * detail.window;
  $("rangeinfo").textContent = `one point per ${fmtDuration(bucket)}`;
  const results = await Promise.allSettled([drawHistory(bucket), drawNow()]);
  if (seq !== renderSeq) return;
  const errs = results.filter((r) => r.status === "rejected").map((r) => r.reason);
  const status = $("status");
  status.classList.toggle("warn", errs.length > 0);
  const waiting = errs.find((e) => e.body?.error?.need);
  if (waiting) {
    const e = waiting.body.error;
    status.textContent = `Waiting for reports: ${fmtInt(e.have)} received in this time range, ` +
      `${fmtInt(e.need)} needed before estimates are shown.`;
  } else if (errs.length) {
    status.textContent = errs.map((e) => e.message).join(" · ");
  } else {
    status.textContent = "";
  }
  document.body.dataset.ready = "1";
}

// ---- history (GET …/series) ----------------------------------------------------------
function seriesQuery(bucket) {
  const qs = rangeParams({ bucket: String(bucket) });
  if (detail.kind === "categorical") { qs.set("kind", "frequencies"); qs.set("top", "5"); methodParam(qs); }
  else if (detail.kind === "ordered") { qs.set("kind", "quantiles"); qs.append("q", "0.5"); qs.append("q", "0.9"); }
  else if (detail.kind === "numeric") qs.set("kind", "mean");
  else return null;
  return qs;
}
const SERIES_NAME = { "q0.5": "median", "q0.9": "90th percentile", mean: "mean" };

async function drawHistory(bucket) {
  const svg = $("history"), strip = $("counts"), legend = $("legend");
  const qs = seriesQuery(bucket);
  legend.replaceChildren();
  const hideHistory = detail.kind === "attributes";  // no per-attribute series yet
  svg.style.display = strip.style.display = hideHistory ? "none" : "";
  if (!qs) {
    frame(svg); frame(strip, { B: 18, T: 4 });
    $("histTitle").textContent = "History";
    $("histNote").textContent = detail.kind === "attributes"
      ? "Multi-attribute collections have no history over time yet: below, each attribute " +
        "in the selected time range."
      : SETVALUED[detail.kind]
      ? "Set-valued collections have no history view: below, the selected time range."
      : "Heavy-hitter searches have no history over time: the table " +
        "below lists the most frequent values in the selected time range.";
    return;
  }
  const data = await getJSON(`${base("series")}?${qs}`);
  const t0 = data.since, t1 = data.until;
  const names = data.series;
  const pct = detail.kind === "categorical";
  const unitTitle = { categorical: "share of reports", ordered: "value", numeric: "value" }[detail.kind];
  $("histTitle").textContent = {
    categorical: `Share of reports over time — the ${names.length} most frequent values`,
    ordered: "Median and 90th percentile over time", numeric: "Mean over time" }[detail.kind] +
    (pct || !current.description ? "" : ` — ${current.description}`);
  const pts = data.points;
  const vals = pts.flatMap((p) => p.estimate === null ? [] : [p.ci_low ?? p.estimate, p.ci_high ?? p.estimate]);
  let lo = Math.min(...vals), hi = Math.max(...vals);
  if (!vals.length) { lo = 0; hi = 1; }
  if (pct) { lo = 0; hi = Math.min(1, Math.max(...pts.map((p) => p.estimate ?? 0)) * 1.3); }
  if (pct && !(hi > 0)) hi = 0.01;
  if (!pct && vals.length) {
    // Wide (conservative) intervals must not flatten the estimates: the scale shows the
    // estimates with room around them, and bands beyond it are cut at the plot's edge.
    const est = pts.flatMap((p) => p.estimate === null ? [] : [p.estimate]);
    const e0 = Math.min(...est), e1 = Math.max(...est), room = Math.max(e1 - e0, Math.abs(e1) * 0.1, 1e-9);
    lo = Math.max(lo, e0 - room); hi = Math.min(hi, e1 + room);
  }
  const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.1 || 1;
  if (!pct) { lo -= pad; hi += pad; }
  const f = frame(svg, { B: 40 });
  const x = (t) => f.x0 + (t - t0) / (t1 - t0) * (f.x1 - f.x0);
  const y = (v) => f.y1 - (v - lo) / (hi - lo) * (f.y1 - f.y0);
  yAxis(f, lo, hi, y, pct ? (v) => fmtPct(v).replace(/\.?0+ %$/, " %") : fmtNum,
        pct ? "share of reports" : detail.kind === "numeric" ? "mean" : unitTitle);
  timeAxis(f, t0, t1, x, "");
  const method = data.method;
  names.forEach((name, k) => {
    const color = COLORS[k % COLORS.length];
    const mine = pts.filter((p) => p.series === name);
    const shown = SERIES_NAME[name] || showLabel(name);
    const item = document.createElement("span");
    item.style.setProperty("--c", color); item.textContent = shown; legend.appendChild(item);
    const g = el("g", { "clip-path": f.clip }, svg);
    // Interval band and line, broken where a bucket has no estimate.
    let run = [];
    const flush = () => {
      if (!run.length) return;
      const mid = (p) => x((p.start + p.end) / 2);
      if (run.length === 1 && run[0].ci_low !== null) {  // a lone point: a whisker
        const p = run[0];
        el("line", { x1: mid(p), x2: mid(p), y1: y(p.ci_low), y2: y(p.ci_high), class: "whisker",
                     stroke: color }, g);
      } else if (run.every((p) => p.ci_low !== null)) {
        const up = run.map((p) => `${mid(p)},${y(p.ci_high)}`);
        const down = run.slice().reverse().map((p) => `${mid(p)},${y(p.ci_low)}`);
        el("polygon", { points: up.concat(down).join(" "), class: "band", fill: color }, g);
      }
      el("polyline", { points: run.map((p) => `${mid(p)},${y(p.estimate)}`).join(" "),
                       class: "line", stroke: color }, g);
      run = [];
    };
    for (const p of mine) { if (p.estimate === null) flush(); else run.push(p); }
    flush();
    for (const p of mine) {
      if (p.estimate === null) continue;
      const v = pct ? fmtPct : fmtNum;
      const ci = p.ci_low === null ? "no analytic interval" :
        `${Math.round(data.confidence * 100)} % interval ` +
        (pct ? ciPct(p.ci_low, p.ci_high) : `${fmtNum(p.ci_low)} – ${fmtNum(p.ci_high)}`);
      tip(el("circle", { cx: x((p.start + p.end) / 2), cy: y(p.estimate), r: mine.length > 60 ? 2.5 : 4,
                         class: "pt", fill: color, "data-series": name }, g),
        `${fmtSpan(p.start, p.end)}\n${shown}: ${v(p.estimate)}\n${ci}\n` +
        `n = ${fmtInt(p.n)} reports (${p.windows} window${p.windows === 1 ? "" : "s"})\nmethod: ${method}`);
    }
  });
  // Reports per bucket, and the buckets without an estimate.
  const fs = frame(strip, { B: 18, T: 4 });
  const first = pts.filter((p) => p.series === names[0]);
  const nmax = Math.max(1, ...first.map((p) => p.n));
  const ys = (v) => fs.y1 - v / nmax * (fs.y1 - fs.y0);
  el("text", { x: fs.x0 - 6, y: fs.y0 + 10, "text-anchor": "end" }, strip).textContent = fmtInt(nmax);
  el("text", { x: 4, y: fs.y1 - 2 }, strip).textContent = "reports";
  el("line", { x1: fs.x0, x2: fs.x1, y1: fs.y1, y2: fs.y1, class: "axis0" }, strip);
  for (const p of first) {
    const x0 = x(p.start), x1 = x(p.end);
    tip(el("rect", { x: x0 + 0.5, width: Math.max(1, x1 - x0 - 1), y: ys(p.n), height: fs.y1 - ys(p.n),
                     class: "nbar" }, strip),
      `${fmtSpan(p.start, p.end)}\nn = ${fmtInt(p.n)} reports` + (p.reason ? `\nno estimate: ${p.reason}` : ""));
  }
  const total = first.reduce((a, p) => a + p.n, 0);
  const missing = first.filter((p) => p.estimate === null && p.n > 0).length;
  $("histNote").textContent = `${fmtSpan(t0, t1)} · one point per ${fmtDuration(data.bucket_seconds)} · ` +
    `${fmtInt(total)} reports · shaded: ${Math.round(data.confidence * 100)} % intervals` +
    (missing ? ` · ${missing} period(s) below the ${fmtInt(data.min_reports)} reports needed for an estimate` : "");
  if (data.as_of) $("asof").textContent = fmtDateTime(Date.parse(data.as_of) / 1000, true);
}

// ---- the selected time range ---------------------------------------------------------
async function drawNow() {
  const svg = $("chart");
  $("big").hidden = true; $("quantiles").hidden = true; $("nowNote").textContent = "";
  svg.style.display = "";
  const label = { "15m": "last 15 minutes", "1h": "last hour", "6h": "last 6 hours", "24h": "last 24 hours", "7d": "last 7 days" }[range];
  const box = $("attrs");
  if (box) box.hidden = detail.kind !== "attributes";
  if (detail.kind === "attributes") return attributesPanel(svg, label);
  if (detail.kind === "categorical") return frequencies(svg, label);
  if (detail.kind === "ordered") return distribution(svg, label, true);
  if (detail.kind === "numeric") return numeric(svg, label);
  if (SETVALUED[detail.kind]) return SETVALUED[detail.kind](svg, label);
  return heavy(svg, label);
}

function facts(d) {
  $("n").textContent = fmtInt(d.n);
  $("n").dataset.n = d.n;
  if (d.as_of) $("asof").textContent = fmtDateTime(Date.parse(d.as_of) / 1000, true);
}

function bars(svg, rows, opts) {
  const f = frame(svg, { B: opts.rotate ? 84 : 46, L: 64 });
  const hi = Math.max(0.01, ...rows.map((r) => r.ci_high ?? r.estimate)) * 1.05;
  const lo = Math.min(0, ...rows.map((r) => r.ci_low ?? r.estimate));
  const y = (v) => f.y1 - (v - lo) / (hi - lo) * (f.y1 - f.y0);
  yAxis(f, lo, hi, y, (v) => fmtPct(v).replace(/\.?0+ %$/, " %"), "share of reports");
  const bw = (f.x1 - f.x0) / Math.max(1, rows.length);
  rows.forEach((r, i) => {
    const x = f.x0 + i * bw, cx = x + bw / 2;
    const top = y(Math.max(0, r.estimate)), b0 = y(0);
    const shown = opts.label(r);
    const ci = r.ci_low === undefined ? "" :
      `\n${opts.conf} % interval ${ciPct(r.ci_low, r.ci_high)}`;
    tip(el("rect", { x: x + bw * 0.15, y: Math.min(top, b0), width: Math.max(1, bw * 0.7),
                     height: Math.max(1, Math.abs(b0 - top)), class: "bar", "data-label": r.label ?? r.value }, svg),
      `${shown}: ${fmtPct(r.estimate)}${ci}\nn = ${fmtInt(opts.n)} reports\nmethod: ${opts.method}`);
    if (r.ci_low !== undefined) {
      el("line", { x1: cx, x2: cx, y1: y(Math.max(lo, r.ci_low)), y2: y(Math.min(hi, r.ci_high)), class: "ci" }, svg);
    }
    const t = el("text", { x: cx, y: f.y1 + (detail.emoji ? 18 : 14),
                           class: detail.emoji ? "label emoji" : "label",
                           "text-anchor": opts.rotate ? "start" : "middle" }, svg);
    if (opts.rotate) t.setAttribute("transform", `rotate(50 ${cx} ${f.y1 + 10})`);
    const text = [...shown];
    const room = opts.rotate ? 16 : Math.max(2, Math.floor(bw / 7));
    t.textContent = text.length > room ? text.slice(0, room - 1).join("") + "…" : shown;
  });
  el("text", { x: (f.x0 + f.x1) / 2, y: f.h - 4, class: "title", "text-anchor": "middle" }, svg)
    .textContent = opts.xtitle;
}

async function frequencies(svg, label) {
  const qs = methodParam(rangeParams({ top: String(TOP) }));
  const d = await getJSON(`${base("frequencies")}?${qs}`);
  facts(d);
  const size = current.domain_size, shown = d.estimates.length;
  $("nowTitle").textContent = size > shown
    ? `Share of reports, ${label}: top ${shown} of ${fmtInt(size)} values shown`
    : `Share of reports, ${label}: all ${shown} values`;
  const rotate = shown > 12 && !detail.emoji;
  bars(svg, d.estimates, { label: (r) => showLabel(r.label), n: d.n, method: d.method,
                           conf: Math.round(d.confidence * 100), rotate,
                           xtitle: current.description || current.id });
  $("nowNote").textContent = `Bars: estimated share of reports; whiskers: ${Math.round(d.confidence * 100)} % ` +
    `intervals (n = ${fmtInt(d.n)} reports, ${d.windows} window${d.windows === 1 ? "" : "s"}, method ${d.method}).` +
    (size > shown ? ` The other ${fmtInt(size - shown)} values share ${fmtPct(Math.max(0, d.sum - d.estimates.reduce((a, r) => a + r.estimate, 0)))}.` : "");
}

function domainValue(i) {
  const dom = detail.domain;
  if (dom.kind === "integers") return dom.low + i;
  if (dom.kind === "categories") return i;
  return dom.low + (i + 1) * (dom.high - dom.low) / dom.bins;  // upper edge of bin i
}

async function distribution(svg, label, withBand) {
  const d = await getJSON(`${base("cdf")}?${rangeParams()}`);
  facts(d);
  const cdf = d.cdf.map((v) => Math.min(1, Math.max(0, v)));
  const dom = detail.domain, nb = cdf.length;
  const xlo = dom.kind === "integers" ? dom.low : dom.low, xhi = dom.kind === "integers" ? dom.high : dom.high;
  const f = frame(svg, { B: 46 });
  const x = (v) => f.x0 + (v - xlo) / ((xhi - xlo) || 1) * (f.x1 - f.x0);
  const y = (v) => f.y1 - v * (f.y1 - f.y0);
  yAxis(f, 0, 1, y, (v) => `${Math.round(v * 100)} %`, "share of reports ≤ value");
  for (const v of ticks(xlo, xhi, 8)) {
    el("line", { x1: x(v), x2: x(v), y1: f.y0, y2: f.y1, class: "axis" }, svg);
    el("text", { x: x(v), y: f.y1 + 14, "text-anchor": "middle" }, svg).textContent = fmtNum(v);
  }
  el("text", { x: (f.x0 + f.x1) / 2, y: f.h - 6, class: "title", "text-anchor": "middle" }, svg)
    .textContent = current.description || "value";
  const g = el("g", { "clip-path": f.clip }, svg);
  // The band: prefix queries at up to 24 points, each with its analytic interval.
  let band = [];
  if (withBand) {
    const idx = [...new Set(Array.from({ length: 24 }, (_, k) => Math.round(k * (nb - 1) / 23)))];
    band = (await Promise.all(idx.map((i) => getJSON(`${base("range")}?${rangeParams({
      low: String(dom.low), high: String(domainValue(i)) })}`).then((r) => [i, r]).catch(() => null))))
      .filter(Boolean);
    if (band.length) {
      const up = band.map(([i, r]) => `${x(domainValue(i))},${y(Math.min(1, r.ci_high))}`);
      const down = band.slice().reverse().map(([i, r]) => `${x(domainValue(i))},${y(Math.max(0, r.ci_low))}`);
      el("polygon", { points: up.concat(down).join(" "), class: "cdfband" }, g);
    }
  }
  const step = Math.max(1, Math.floor(nb / 600));
  const pts = [];
  for (let i = 0; i < nb; i += step) pts.push(`${x(domainValue(i))},${y(cdf[i])}`);
  el("polyline", { points: pts.join(" "), class: "line", stroke: COLORS[0] }, g);
  const conf = band.length ? Math.round(band[0][1].confidence * 100) : 95;
  for (const [i, r] of band) {
    tip(el("circle", { cx: x(domainValue(i)), cy: y(Math.min(1, Math.max(0, r.estimate))), r: 3.5, class: "pt",
                       fill: COLORS[0] }, g),
      `share of reports ≤ ${fmtNum(domainValue(i))}: ${fmtPct(r.estimate)}\n` +
      `${conf} % interval ${ciPct(r.ci_low, r.ci_high)}\nn = ${fmtInt(d.n)} reports\n` +
      "method: unbiased range query");
  }
  $("nowTitle").textContent = `Distribution, ${label}: share of reports at or below each value`;
  const qs = [0.1, 0.5, 0.9, 0.99];
  const qd = await getJSON(`${base("quantiles")}?${rangeParams()}&${qs.map((q) => `q=${q}`).join("&")}`);
  const table = $("quantiles");
  table.replaceChildren();
  const head = table.insertRow(), row = table.insertRow();
  head.insertCell().outerHTML = "<th>quantile</th>";
  row.insertCell().outerHTML = "<th>value</th>";
  for (const r of qd.quantiles) {
    const th = document.createElement("th");
    th.textContent = r.q === 0.5 ? "median" : `${Math.round(r.q * 100)}th percentile`;
    head.appendChild(th);
    const td = row.insertCell();
    td.textContent = fmtNum(r.value);
    tip(td, `${th.textContent}: ${fmtNum(r.value)}\nn = ${fmtInt(qd.n)} reports\nmethod: CDF inversion` +
      "\nintervals: see the history above");
  }
  table.hidden = false;
  $("nowNote").textContent = withBand
    ? `Line: estimated distribution; shaded: ${conf} % intervals of the unbiased range queries (n = ${fmtInt(d.n)} reports).`
    : `Line: distribution reconstructed by expectation maximisation (no analytic interval; n = ${fmtInt(d.n)} reports).`;
}

async function numeric(svg, label) {
  const m = await getJSON(`${base("mean")}?${rangeParams()}`);
  facts(m);
  const big = $("big");
  const conf = Math.round(m.confidence * 100);
  big.innerHTML = "";
  big.append(`mean ${fmtNum(m.estimate)} `);
  const small = document.createElement("small");
  small.textContent = `${conf} % interval ${fmtNum(m.ci_low)} – ${fmtNum(m.ci_high)} · ` +
    `n = ${fmtInt(m.n)} reports · ${current.description || ""}`;
  big.appendChild(small);
  tip(big, `mean: ${fmtNum(m.estimate)}\n${conf} % interval ${fmtNum(m.ci_low)} – ${fmtNum(m.ci_high)}\n` +
    `n = ${fmtInt(m.n)} reports\nmethod: unbiased mean`);
  big.hidden = false;
  if ((current.queries || []).includes("cdf")) {
    await distribution(svg, label, false);
  } else {
    svg.style.display = "none";
    $("nowTitle").textContent = `Mean, ${label}`;
    $("nowNote").textContent = "This mechanism estimates the mean only (no distribution).";
  }
}

// ---- multi-attribute collections (GET …/attributes, …/attributes/{name}/…) ------------
let attrName = null;
async function attributesPanel(svg, label) {
  const list = await getJSON(`${base("attributes")}?${rangeParams()}`);
  facts(list);
  const attrs = list.attributes;
  if (!attrs.some((a) => a.name === attrName)) attrName = attrs[0].name;
  let box = $("attrs");
  if (!box) {
    box = document.createElement("div");
    box.id = "attrs"; box.className = "ranges"; box.setAttribute("role", "group");
    box.setAttribute("aria-label", "attribute");
    svg.before(box);
  }
  box.hidden = false;
  box.replaceChildren();
  for (const a of attrs) {
    const b = document.createElement("button");
    b.textContent = a.name; b.dataset.attribute = a.name;
    b.classList.toggle("active", a.name === attrName);
    tip(b, `${a.name}: ${a.mechanism}, ε = ${fmtNum(a.epsilon)} per report
` +
      `${fmtInt(a.n)} of ${fmtInt(list.n)} reports answered it`);
    b.addEventListener("click", () => { attrName = a.name; render(); });
    box.appendChild(b);
  }
  const a = attrs.find((x) => x.name === attrName);
  const path = `attributes/${encodeURIComponent(a.name)}`;
  const share = `${fmtInt(a.n)} of ${fmtInt(list.n)} reports answered "${a.name}" ` +
    `(each report answers ${list.sample} of ${attrs.length} attributes, at ε = ${fmtNum(a.epsilon)} each)`;
  if (a.queries.includes("frequencies")) {
    const qs = methodParam(rangeParams({ top: String(TOP) }));
    const d = await getJSON(`${base(path + "/frequencies")}?${qs}`);
    $("nowTitle").textContent = `${a.name}: share of reports, ${label}`;
    bars(svg, d.estimates, { label: (r) => showLabel(r.label), n: d.n_attribute, method: d.method,
                             conf: Math.round(d.confidence * 100), rotate: d.estimates.length > 12,
                             xtitle: a.name });
    $("nowNote").textContent = `Bars: estimated share of all reporting devices; whiskers: ` +
      `${Math.round(d.confidence * 100)} % intervals (method ${d.method}). ${share}.`;
    return;
  }
  if (a.queries.includes("mean")) {
    const m = await getJSON(`${base(path + "/mean")}?${rangeParams()}`);
    const big = $("big"), conf = Math.round(m.confidence * 100);
    big.innerHTML = "";
    big.append(`${a.name}: mean ${fmtNum(m.estimate)} `);
    const small = document.createElement("small");
    small.textContent = `${conf} % interval ${fmtNum(m.ci_low)} – ${fmtNum(m.ci_high)}`;
    big.appendChild(small);
    big.hidden = false;
    svg.style.display = "none";
    $("nowTitle").textContent = `${a.name}: mean, ${label}`;
    $("nowNote").textContent = `${share}.`;
    return;
  }
  svg.style.display = "none";
  $("nowTitle").textContent = `${a.name}, ${label}`;
  $("nowNote").textContent = `This attribute answers ${a.queries.join(", ")}. ${share}.`;
}

async function heavy(svg, label) {
  const d = await getJSON(`${base("heavy-hitters")}?${rangeParams({ k: "15" })}`);
  facts(d);
  const rows = d.heavy_hitters.map((r) => ({ ...r, label: String(r.value), ci_low: r.estimate - 1.96 * r.std_error,
                                             ci_high: r.estimate + 1.96 * r.std_error }));
  $("nowTitle").textContent = `Most frequent values, ${label}: top ${rows.length} found by the heavy-hitter search`;
  bars(svg, rows, { label: (r) => showLabel(r.label), n: d.n, method: `${current.mechanism} heavy-hitter search`,
                    conf: 95, rotate: true, xtitle: current.description || "value" });
  $("nowNote").textContent = `Bars: estimated share of reports; whiskers: 95 % intervals (n = ${fmtInt(d.n)} reports).`;
}

// ---- set-valued collections (GET …/top-items, …/top-itemsets, …/set-sizes) ------------
function epsilonText(d) {
  const p = d.protocol;
  const phase = p ? ` ${p.name.toUpperCase()} group "${p.group}", phase ${p.phase};` : "";
  return `${phase} ε per device ${d.epsilon_per_device} (${d.epsilon_accounting}).`;
}

async function setItems(svg, label) {
  const d = await getJSON(`${base("top-items")}?${rangeParams({ k: "20" })}`);
  facts(d);
  $("nowTitle").textContent = `Items held by the most devices, ${label}: top ${d.items.length} of ${fmtInt(d.of)}`;
  bars(svg, d.items, { label: (r) => showLabel(r.label), n: d.n, method: d.method,
                       conf: Math.round(d.confidence * 100), rotate: d.items.length > 12 && !detail.emoji,
                       xtitle: current.description || "item" });
  const corr = d.correction > 1 ? ` Truncation correction ×${d.correction.toFixed(3)} from the sizes phase.` : "";
  $("nowNote").textContent = `Bars: estimated share of devices whose set holds the item (shares add up to the mean ` +
    `number of items, not 1); whiskers: ${Math.round(d.confidence * 100)} % intervals (n = ${fmtInt(d.n)}; ` +
    `padded to l = ${d.length}, ${d.inner} at ε' = ${d.inner_epsilon.toFixed(3)}).${corr}${epsilonText(d)}`;
}

async function setItemsets(svg, label) {
  const d = await getJSON(`${base("top-itemsets")}?${rangeParams({ k: "15" })}`);
  facts(d);
  const rows = d.itemsets.map((r) => ({ ...r, label: r.items.map(showLabel).join(" + ") }));
  $("nowTitle").textContent = `Itemsets held by the most devices, ${label}: top ${rows.length} of ${fmtInt(d.of)} candidates`;
  bars(svg, rows, { label: (r) => r.label, n: d.n, method: d.method,
                    conf: Math.round(d.confidence * 100), rotate: true, xtitle: current.description || "itemset" });
  $("nowNote").textContent = `Bars: estimated share of devices whose set contains the itemset; whiskers: ` +
    `${Math.round(d.confidence * 100)} % intervals (n = ${fmtInt(d.n)}; padded to l = ${d.length}).${epsilonText(d)}`;
}

async function setSizes(svg, label) {
  const d = await getJSON(`${base("set-sizes")}?${rangeParams()}`);
  facts(d);
  const rows = d.sizes.map((r) => ({ ...r, label: String(r.size) }));
  $("nowTitle").textContent = `Set sizes, ${label}: ${Math.round(d.quantile * 100)}th percentile ${d.quantile_size}`;
  bars(svg, rows, { label: (r) => r.label, n: d.n, method: d.method, conf: Math.round(d.confidence * 100),
                    rotate: false, xtitle: "items held (capped at " + d.max_size + ")" });
  $("nowNote").textContent = `Bars: unbiased estimate of the share of devices holding that many items; ` +
    `whiskers: ${Math.round(d.confidence * 100)} % intervals (n = ${fmtInt(d.n)}).${epsilonText(d)}`;
}

const SETVALUED = { items: setItems, itemsets: setItemsets, sizes: setSizes };

init();
