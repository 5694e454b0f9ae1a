// ldpstream dashboard: collection list, live estimates over Server-Sent Events.
// Plain DOM + SVG, no external assets (nothing is fetched from a CDN).
"use strict";
const $ = (id) => document.getElementById(id);
const NS = "http://www.w3.org/2000/svg";
let source = null, current = null, updates = 0, methods = [];

async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

async function init() {
  try {
    const m = await getJSON("/v1/methods");
    methods = m.methods; window.guideline = m.guideline;
  } catch (e) { methods = ["base"]; }
  const sel = $("method");
  for (const name of ["(guideline)", ...methods]) {
    const o = document.createElement("option"); o.value = name; o.textContent = name;
    sel.appendChild(o);
  }
  sel.addEventListener("change", () => current && select(current));
  await loadCollections();
  setInterval(loadCollections, 10000);
}

async function loadCollections() {
  let data;
  try { data = await getJSON("/v1/collections"); } catch (e) { return; }
  const ul = $("collections");
  ul.replaceChildren();
  for (const c of data.collections) {
    const li = document.createElement("li");
    li.dataset.id = c.id;
    li.innerHTML = `<strong></strong><small></small>`;
    li.querySelector("strong").textContent = c.id;
    li.querySelector("small").textContent = `${c.mechanism} · ε=${c.epsilon} · d=${c.domain_size}`;
    li.addEventListener("click", () => select(c));
    if (current && current.id === c.id) li.classList.add("active");
    ul.appendChild(li);
  }
  if (!current && data.collections.length) select(data.collections[0]);
}

function select(c) {
  current = c; updates = 0;
  for (const li of $("collections").children) li.classList.toggle("active", li.dataset.id === c.id);
  $("empty").hidden = true; $("panel").hidden = false;
  $("cid").textContent = c.id; $("desc").textContent = c.description || "";
  $("mech").textContent = c.mechanism; $("eps").textContent = c.epsilon;
  $("n").textContent = "–"; $("updates").textContent = "0"; $("status").textContent = "";
  if (source) source.close();
  const ranged = c.queries.includes("cdf");
  const method = $("method").value;
  const qs = new URLSearchParams({ top: ranged ? "1" : "40" });
  if (method && method !== "(guideline)") qs.set("method", method);
  source = new EventSource(`/v1/collections/${encodeURIComponent(c.id)}/stream?${qs}`);
  source.onopen = () => { $("conn").textContent = "live"; $("conn").classList.add("live"); };
  source.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").classList.remove("live"); };
  source.addEventListener("waiting", (ev) => {
    const d = JSON.parse(ev.data);
    $("status").textContent = `Waiting for reports: ${d.have} of ${d.need} needed.`;
    $("n").textContent = d.have.toLocaleString();
  });
  source.addEventListener("estimates", (ev) => {
    const d = JSON.parse(ev.data);
    updates += 1;
    $("n").textContent = d.n.toLocaleString();
    $("n").dataset.n = d.n;
    $("updates").textContent = updates;
    $("asof").textContent = d.as_of ? new Date(d.as_of).toLocaleTimeString() : "–";
    $("status").textContent = `method ${d.method}, ${d.windows} window(s), state ${d.state_version}`;
    if (d.mean) {  // numeric collections: the mean with its confidence interval
      const m = d.mean, half = m.ci_high !== undefined ? ` ± ${(m.ci_high - m.estimate).toPrecision(3)}` : "";
      $("status").textContent += ` · mean ${m.estimate.toPrecision(5)}${half}`;
    }
    if (d.cdf) drawCdf(d.cdf, d); else drawBars(d.estimates);
  });
}

function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function frame() {
  const svg = $("chart"); svg.replaceChildren();
  const w = svg.clientWidth || 800, h = svg.clientHeight || 420;
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  return { svg, w, h, L: 48, R: 10, T: 10, B: 70 };
}

function yAxis(f, lo, hi, y) {
  for (let i = 0; i <= 4; i++) {
    const v = lo + (hi - lo) * i / 4, yy = y(v);
    el("line", { x1: f.L, x2: f.w - f.R, y1: yy, y2: yy, class: "axis" }, f.svg);
    el("text", { x: 4, y: yy + 4 }, f.svg).textContent = v.toFixed(3);
  }
}

function drawBars(rows) {
  const f = frame();
  const hi = Math.max(0.01, ...rows.map((r) => r.ci_high));
  const lo = Math.min(0, ...rows.map((r) => r.ci_low));
  const y = (v) => f.T + (hi - v) / (hi - lo) * (f.h - f.T - f.B);
  yAxis(f, lo, hi, y);
  const bw = (f.w - f.L - f.R) / Math.max(1, rows.length);
  rows.forEach((r, i) => {
    const x = f.L + i * bw;
    const top = y(Math.max(0, r.estimate)), base = y(0);
    el("rect", { x: x + bw * 0.15, y: Math.min(top, base), width: bw * 0.7,
                 height: Math.abs(base - top), class: "bar" }, f.svg)
      .appendChild(document.createElementNS(NS, "title")).textContent =
        `${r.label}: ${r.estimate.toFixed(4)} ± ${(r.ci_high - r.estimate).toFixed(4)}`;
    const cx = x + bw / 2;
    el("line", { x1: cx, x2: cx, y1: y(r.ci_low), y2: y(r.ci_high), class: "ci" }, f.svg);
    const t = el("text", { x: cx, y: f.h - f.B + 12,
                           transform: `rotate(45 ${cx} ${f.h - f.B + 12})` }, f.svg);
    t.textContent = String(r.label).slice(0, 14);
  });
}

function drawCdf(cdf, d) {
  const f = frame();
  const y = (v) => f.T + (1 - v) * (f.h - f.T - f.B);
  yAxis(f, 0, 1, y);
  const n = cdf.length, x = (i) => f.L + (i + 0.5) / n * (f.w - f.L - f.R);
  // Band: ± z·se of each prefix query (analytic, sampled at up to 64 points).
  const pts0 = d.cdf_se || [[0, 0]];
  const se = (i) => {
    let k = 0;
    while (k + 1 < pts0.length && pts0[k + 1][0] <= i) k++;
    return pts0[k][1];
  };
  const z = 1.96, up = [], down = [];
  const step = Math.max(1, Math.floor(n / 400));
  for (let i = 0; i < n; i += step) {
    up.push(`${x(i)},${y(Math.min(1, cdf[i] + z * se(i)))}`);
    down.unshift(`${x(i)},${y(Math.max(0, cdf[i] - z * se(i)))}`);
  }
  el("polygon", { points: up.concat(down).join(" "), class: "band" }, f.svg);
  const pts = [];
  for (let i = 0; i < n; i += step) pts.push(`${x(i)},${y(cdf[i])}`);
  el("polyline", { points: pts.join(" "), class: "line" }, f.svg);
  for (let k = 0; k <= 4; k++) {
    const i = Math.min(n - 1, Math.floor(k * (n - 1) / 4));
    // numeric collections label bins by their centre value; range ones by the index
    const label = d.estimates && d.estimates.length === n ? d.estimates[i].label : String(i);
    const anchor = k === 0 ? "start" : k === 4 ? "end" : "middle";
    el("text", { x: x(i), y: f.h - f.B + 16, "text-anchor": anchor }, f.svg).textContent = label;
  }
}

init();
