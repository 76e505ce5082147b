// corput dashboard: vanilla JS, SVG, no dependencies. It polls the admin
// JSON endpoints every second (the ring every five) and redraws.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const REFRESH_MS = 1000;
const RING_EVERY = 5; // refreshes between ring fetches
const MAX_ROWS = 40;  // endpoint rows shown per origin
const MAX_LEGEND = 16; // above this many subsets, the legend lists only this gateway's
const ORIGIN_COLORS = ["#f5a524", "#38bdf8", "#a78bfa", "#34d399", "#f472b6", "#facc15"];

const state = { ticks: 0, subsets: {}, gatewayShown: false };

// el builds an element: el("td", {class: "num"}, "12").
function el(tag, attrs, ...children) {
  const svg = ["svg", "g", "circle", "path", "line", "text", "title", "rect", "polyline"].includes(tag);
  const e = svg ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmt(v) {
  if (v === undefined || v === null || isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString("en-US");
  if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function pct(part, whole) {
  return whole > 0 ? (100 * part / whole).toFixed(1) + " %" : "–";
}

function setText(id, v) {
  const e = document.getElementById(id);
  if (e) e.textContent = v;
}

// subsetColor spreads hues by the golden angle so neighbouring arcs differ.
function subsetColor(j) {
  return `hsl(${(j * 137.508 + 20) % 360}, 72%, 60%)`;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

// ---- charts ---------------------------------------------------------------

// niceMax rounds a maximum up to 1, 2 or 5 × 10^k.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// drawChart draws lines of {t: Date, v: number} over the history window.
function drawChart(svg, series, windowS) {
  const w = svg.clientWidth || 400, h = svg.clientHeight || 170;
  const left = 44, right = 10, top = 10, bottom = 22;
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.replaceChildren();
  const now = Date.now();
  const x = t => left + (w - left - right) * (1 - (now - t) / (windowS * 1000));
  let max = 0;
  for (const s of series) for (const p of s.points) max = Math.max(max, p.v);
  const ymax = niceMax(max);
  svg.dataset.ymax = String(ymax);
  const y = v => top + (h - top - bottom) * (1 - v / ymax);
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4, yy = y(v);
    svg.append(el("line", { class: "grid", x1: left, x2: w - right, y1: yy, y2: yy }));
    svg.append(el("text", { x: left - 6, y: yy + 4, "text-anchor": "end" }, fmt(v)));
  }
  const step = [10, 15, 30, 60, 120, 300, 600].find(s => windowS / s <= 6) || 600;
  for (let a = 0; a <= windowS + 1e-9; a += step) {
    const label = a === 0 ? "now" : (a % 60 === 0 ? `−${a / 60}m` : `−${a}s`);
    svg.append(el("text", { x: x(now - a * 1000), y: h - 6, "text-anchor": a === 0 ? "end" : (a >= windowS ? "start" : "middle") }, label));
  }
  series.forEach((s, i) => {
    const pts = s.points.filter(p => now - p.t <= windowS * 1000);
    if (pts.length === 0) return;
    const line = pts.map(p => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    const x0 = x(pts[0].t).toFixed(1), x1 = x(pts[pts.length - 1].t).toFixed(1), yb = y(0).toFixed(1);
    svg.append(el("path", { d: `M${x0},${yb} L${line.replaceAll(" ", " L")} L${x1},${yb} Z`, fill: s.color, "fill-opacity": series.length > 1 ? 0.06 : 0.14 }));
    svg.append(el("polyline", { points: line, fill: "none", stroke: s.color, "stroke-width": 2, "stroke-linejoin": "round", class: "series",
      "data-last": pts[pts.length - 1].v, "data-sum": pts.reduce((a, p) => a + p.v, 0) }));
    if (series.length > 1) {
      svg.append(el("g", { class: "legend" },
        el("rect", { x: left + 8 + i * 110, y: top + 2, width: 10, height: 10, rx: 2, fill: s.color }),
        el("text", { x: left + 22 + i * 110, y: top + 11 }, s.label)));
    }
  });
}

// seriesOf returns one line per origin of a history field; a lone origin
// takes the chart's own colour.
function seriesOf(history, field, color) {
  const names = Object.keys(history.origin_totals || {}).sort();
  const byOrigin = names.map((name, i) => ({
    label: name,
    color: names.length === 1 ? color : ORIGIN_COLORS[i % ORIGIN_COLORS.length],
    points: history.points.map(p => ({ t: Date.parse(p.t), v: (p.origins[name] || {})[field] || 0 })),
  }));
  return byOrigin.length > 0 ? byOrigin : [{ label: "all", color, points: [] }];
}

// ---- headline figures ------------------------------------------------------

function renderStats(origins, history) {
  const pts = history.points;
  const last = pts.length > 0 ? pts[pts.length - 1] : null;
  const minute = pts.filter(p => Date.parse(p.t) >= Date.parse(last ? last.t : 0) - 60000 + 1);
  const sum = f => minute.reduce((a, p) => a + p[f] * history.interval_s, 0);
  setText("stat-churn", last ? fmt(last.created_per_s) : "–");
  setText("stat-created-min", fmt(sum("created_per_s")));
  setText("stat-created-total", fmt(history.totals.created));
  setText("stat-open", last ? fmt(last.open) : "–");
  setText("stat-closed", last ? fmt(last.closed_per_s) : "–");
  setText("stat-rps", last ? fmt(last.requests_per_s) : "–");
  setText("stat-requests-total", fmt(history.totals.requests));
  setText("stat-shed", last ? fmt(last.shed_per_s) : "–");
  setText("stat-ejected", fmt(origins.reduce((a, o) => a + o.ejected, 0)));
  setText("stat-endpoints", fmt(origins.reduce((a, o) => a + o.endpoints.length, 0)));
  setText("stat-panic", fmt(origins.filter(o => o.panic).length));
  const t = history.totals;
  setText("stat-zone", pct(t.zone_local, t.zone_local + t.zone_remote));
  const zl = sum("zone_local_per_s"), zr = sum("zone_remote_per_s");
  setText("stat-zone-min", pct(zl, zl + zr));
}

// ---- one origin ------------------------------------------------------------

function originSection(name) {
  const id = "origin-" + name;
  let sec = document.getElementById(id);
  if (!sec) {
    sec = el("section", { class: "origin", id },
      el("h2", {}, el("span", { class: "name" }, name), el("span", { class: "meta" }), el("span", { class: "badge" })),
      el("div", { class: "figures" }),
      el("div", { class: "origin-body" },
        el("div", { class: "ring-wrap" }, el("svg", { class: "ring", id: "ring-" + name, viewBox: "0 0 380 380" }), el("table", { class: "legend-list" })),
        el("div", { class: "table-wrap" })));
    document.getElementById("origins").append(sec);
  }
  return sec;
}

// loopsHere maps an endpoint address to the loops of this gateway whose
// subset holds it, and sums its pools over those loops.
function loopUse(o) {
  const use = {};
  for (const l of o.loops || []) {
    for (const a of l.subset || []) {
      const u = use[a] || (use[a] = { loops: [], open: 0, idle: 0, busy: 0 });
      u.loops.push(l.loop);
      const p = (l.pools || {})[a];
      if (p) { u.open += p.open + p.temporary; u.idle += p.idle; u.busy += p.busy; }
    }
  }
  return use;
}

// renderMirrors shows each mirroring route (routes[].mirror): its shadow,
// mirrored and dropped per second in the last interval, and the totals
// since start with the drops by reason.
function renderMirrors(history) {
  const totals = history.mirror_totals || {};
  const routes = Object.keys(totals).sort();
  const sec = document.getElementById("mirrors");
  sec.hidden = routes.length === 0;
  const last = history.points.length ? (history.points[history.points.length - 1].mirrors || {}) : {};
  document.getElementById("mirror-rows").replaceChildren(...routes.map(r => {
    const t = totals[r], l = last[r] || {};
    const drops = Object.entries(t.dropped || {}).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
    return el("span", { class: "mirror", "data-route": r },
      `${r} → ${t.origin}: `, el("b", {}, fmt(l.mirrored_per_s)), " mirrored/s, ", el("b", {}, fmt(l.dropped_per_s)), " dropped/s · ",
      el("b", {}, fmt(t.mirrored)), " mirrored in all", drops ? `, dropped: ${drops}` : "");
  }));
}

function renderOrigin(o, history, view) {
  const sec = originSection(o.name);
  const ringInfo = view ? `${view.subsets} subsets · fleet of ${view.fleet.gateways} × ${view.fleet.loops} loops` : `${o.subsets} subsets`;
  sec.querySelector(".meta").textContent = `${o.policy} · ${o.subset_algorithm} · ${ringInfo} · ${o.endpoints.length} endpoints`;
  const badge = sec.querySelector(".badge");
  badge.className = "badge " + (o.panic ? "panic" : "calm");
  badge.textContent = o.panic ? "PANIC: loops route over their whole subset" : "healthy set in use";
  const last = history.points.length ? (history.points[history.points.length - 1].origins[o.name] || {}) : {};
  const tot = (history.origin_totals || {})[o.name] || {};
  const figs = sec.querySelector(".figures");
  figs.replaceChildren(
    el("span", {}, "open ", el("b", { class: "f-open" }, fmt(last.open))),
    el("span", {}, "created/s ", el("b", { class: "f-churn" }, fmt(last.created_per_s))),
    el("span", {}, "requests/s ", el("b", {}, fmt(last.requests_per_s))),
    el("span", {}, "shed/s ", el("b", {}, fmt(last.shed_per_s))),
    el("span", {}, "ejected ", el("b", {}, `${o.ejected} of ${o.endpoints.length}`)),
    el("span", {}, "zone-local ", el("b", {}, pct(tot.zone_local, (tot.zone_local || 0) + (tot.zone_remote || 0)))),
    el("span", { title: "requests placed on each loop, as multiples of an even share (a loop is chosen per request)" },
      "loop shares ", el("b", { class: "f-loops" }, loopShares(o.loops || []))),
    el("span", {}, "membership changes ", el("b", {}, fmt(o.membership_changes))),
    ...(o.zone_spill ? [el("span", { class: "state failing", title: "every local endpoint reports cpu_utilization above 80 %" }, "zone spill: local zone loaded")] : []),
    ...sloFigures(o.slo),
    ...(o.source_error ? [el("span", { class: "state ejected" }, "discovery: " + o.source_error)] : []));
  const use = loopUse(o);
  if (view) drawRing(sec, o, view, use);
  renderTable(sec, o, view, use);
}

// sloFigures shows the SLO guard and the workload-mix monitor
// (/admin/origins "slo"): each class's rolling p99 against its budget, the
// guard's state, the down-weighted zone, and the scale-out signal.
function sloFigures(v) {
  if (!v) return [];
  const out = (v.classes || []).map(c => el("span",
    { class: c.guard_active ? "state ejected" : "", title: `rolling minute: p50 ${c.p50_ms} ms · p90 ${c.p90_ms} ms · ${c.count} requests` },
    `${c.name} p99 `, el("b", {}, c.p99_budget_ms > 0 ? `${c.p99_ms} / ${c.p99_budget_ms} ms` : `${c.p99_ms} ms`),
    c.guard_active ? " GUARD" : ""));
  if (v.shed_low) out.push(el("span", { class: "state ejected" }, "shedding priority: low"));
  if (v.penalized_zone) out.push(el("span", { class: "state failing" }, `zone ${v.penalized_zone} down-weighted`));
  const so = v.scale_out || {};
  if (so.heavy_class) out.push(el("span", { class: so.signal ? "state failing" : "" },
    `${so.heavy_class} share `, el("b", {}, `${so.heavy_percent} %`), so.signal ? " SCALE OUT" : ""));
  return out;
}

// ring geometry: position p in [0,1) → angle clockwise from the top.
const RING = { cx: 190, cy: 190, r: 138 };
function polar(p, r) {
  const a = 2 * Math.PI * p - Math.PI / 2;
  return [RING.cx + r * Math.cos(a), RING.cy + r * Math.sin(a)];
}

function arcPath(p0, p1, r) {
  const [x0, y0] = polar(p0, r), [x1, y1] = polar(p1, r);
  const large = p1 - p0 > 0.5 ? 1 : 0;
  return `M${x0.toFixed(2)},${y0.toFixed(2)} A${r},${r} 0 ${large} 1 ${x1.toFixed(2)},${y1.toFixed(2)}`;
}

// loopShares is "min–max× even" of the loops' request shares.
function loopShares(loops) {
  if (loops.length === 0 || !loops.some(l => l.requests > 0)) return "–";
  const even = loops.map(l => l.share * loops.length);
  return `${Math.min(...even).toFixed(2)}–${Math.max(...even).toFixed(2)}× even`;
}

function loopList(loops) {
  if (loops.length === 0) return "none";
  if (loops.length > 6) return `${loops.length} loops`;
  return loops.join(", ");
}

function drawRing(sec, o, view, use) {
  const svg = sec.querySelector("svg.ring");
  const legend = sec.querySelector(".legend-list");
  svg.replaceChildren();
  legend.replaceChildren();
  legend.append(el("tr", {}, el("th", {}, "subset"), el("th", { class: "num" }, "endpoints"),
    el("th", {}, "loops here"), el("th", { class: "num", title: "loops of every gateway using the subset" }, "fleet")));
  const eps = view.endpoints || [];
  const onRing = eps.length > 0 && eps[0].position >= 0;
  const health = {};
  for (const e of o.endpoints) health[e.address] = e;
  svg.append(el("circle", { cx: RING.cx, cy: RING.cy, r: RING.r, fill: "none", stroke: "#24314f", "stroke-width": 2 }));
  if (!onRing) {
    svg.append(el("text", { x: RING.cx, y: RING.cy, "text-anchor": "middle", class: "center" }, `${view.algorithm}: no ring`));
    return;
  }
  const S = view.subsets;
  const gap = S > 1 ? Math.min(0.004, 0.2 / S) : 0;
  // Subset arcs, with the loops of this gateway and of the fleet using each.
  const users = {}, sizes = {};
  for (const e of eps) {
    users[e.subset] = e.users || [];
    sizes[e.subset] = (sizes[e.subset] || 0) + 1;
  }
  let hidden = 0;
  for (let j = 0; j < S; j++) {
    const here = (users[j] || []).filter(u => u.gateway === view.gateway).map(u => u.loop);
    const arc = el("path", { d: arcPath(j / S + gap, (j + 1) / S - gap, RING.r + 16), stroke: subsetColor(j),
      "stroke-width": here.length ? 12 : 6, "stroke-opacity": here.length ? 1 : 0.45, fill: "none", class: "arc", "data-subset": j });
    arc.append(el("title", {}, `subset ${j}: ring arc [${j}/${S}, ${j + 1}/${S}) · ${sizes[j] || 0} endpoints · loops here: ${loopList(here)} · ${(users[j] || []).length} loops fleet-wide`));
    svg.append(arc);
    if (S <= 16 && here.length) {
      const [lx, ly] = polar((j + 0.5) / S, RING.r + 34);
      svg.append(el("text", { x: lx, y: ly + 4, "text-anchor": "middle", fill: subsetColor(j) }, "L" + loopList(here).replaceAll(", ", ",")));
    }
    if (S > MAX_LEGEND && !here.length) {
      hidden++;
      continue;
    }
    legend.append(el("tr", {},
      el("td", {}, el("span", { class: "swatch", style: `background:${subsetColor(j)}` }), `subset ${j}`),
      el("td", { class: "num" }, String(sizes[j] || 0)),
      el("td", {}, here.length ? loopList(here) : "–"),
      el("td", { class: "num" }, String((users[j] || []).length))));
  }
  if (hidden > 0) legend.append(el("tr", {}, el("td", { colspan: 4, class: "muted" }, `… ${hidden} subsets used only by other gateways`)));
  // Endpoints at their Van der Corput positions; neighbours are at least 1/2^ceil(log2 N) of the ring apart.
  const spacing = 2 * Math.PI * RING.r / Math.pow(2, Math.ceil(Math.log2(Math.max(2, eps.length))));
  const dot = Math.max(1.5, Math.min(8, 0.42 * spacing));
  for (const e of eps) {
    const [x, y] = polar(e.position, RING.r);
    const h = health[e.address] || {};
    const here = !!use[e.address];
    const g = el("g", { class: "ep", "data-address": e.address });
    g.append(el("circle", { cx: x, cy: y, r: dot, fill: subsetColor(e.subset), "fill-opacity": here ? 1 : 0.35,
      stroke: h.ejected ? "#f87171" : (h.failing ? "#fbbf24" : "#0b1120"), "stroke-width": h.ejected || h.failing ? 2.5 : 1.2 }));
    if (h.ejected) {
      const k = dot + 3;
      g.append(el("path", { d: `M${x - k},${y - k} L${x + k},${y + k} M${x - k},${y + k} L${x + k},${y - k}`, stroke: "#f87171", "stroke-width": 2.5, class: "ejected-mark" }));
    }
    if (eps.length <= 32) {
      const [tx, ty] = polar(e.position, RING.r - dot - 10);
      g.append(el("text", { x: tx, y: ty + 4, "text-anchor": "middle" }, String(e.index)));
    }
    g.append(el("title", {}, `${e.address}\nindex ${e.index} → position ${e.position.toFixed(4)}\nsubset ${e.subset}${here ? " · used by loops " + use[e.address].loops.join(", ") : ""}\nactive ${h.active ?? "–"} · EWMA ${h.ewma_latency_ns ? (h.ewma_latency_ns / 1e6).toFixed(1) + " ms" : "–"}${h.ejected ? "\nEJECTED" : ""}`));
    svg.append(g);
  }
  const hereLoops = Object.values(use).reduce((a, u) => a + u.loops.length, 0);
  svg.append(el("text", { x: RING.cx, y: RING.cy - 8, "text-anchor": "middle", class: "center big" }, `${eps.length} endpoints`));
  svg.append(el("text", { x: RING.cx, y: RING.cy + 14, "text-anchor": "middle", class: "center" }, `${S} subset${S === 1 ? "" : "s"} on the ring`));
  svg.append(el("text", { x: RING.cx, y: RING.cy + 32, "text-anchor": "middle" }, `gateway ${view.gateway}: ${hereLoops} loop·endpoint pairs`));
}

// healthCell is an endpoint's health source and its check's state
// (health_check); "–" without checks.
function healthCell(e) {
  if (!e.health_source) return "–";
  const c = e.health_check;
  const cls = c && c.state === "unhealthy" ? "state ejected" : (e.health_source === "passive" ? "state failing" : "");
  const title = c ? `check ${c.state} · ${c.probes} probes, ${c.skipped} skipped${c.last_result ? " · last: " + c.last_result : ""}` : "";
  return el("span", { class: cls, title }, c ? `${e.health_source} · ${c.state}` : e.health_source);
}

function renderTable(sec, o, view, use) {
  const subsetOf = {}, indexOf = {};
  for (const e of (view && view.endpoints) || []) { subsetOf[e.address] = e.subset; indexOf[e.address] = e.index; }
  const rows = o.endpoints.slice().sort((a, b) =>
    (use[b.address] ? 1 : 0) - (use[a.address] ? 1 : 0) || (b.active - a.active) || ((indexOf[a.address] ?? 0) - (indexOf[b.address] ?? 0)));
  const body = el("tbody", {});
  for (const e of rows.slice(0, MAX_ROWS)) {
    const u = use[e.address];
    const j = subsetOf[e.address];
    const eff = e.weight > 0 ? Math.max(0, Math.min(1, e.effective_weight / e.weight)) : 0;
    let st = el("span", { class: "state ok" }, "ok");
    if (e.ejected && e.ejected_by === "health_check") st = el("span", { class: "state ejected", title: "out until its health checks pass" }, "ejected by health checks");
    else if (e.ejected) st = el("span", { class: "state ejected", title: `ejected ${e.times_ejected} time(s)` }, `ejected until ${new Date(e.ejected_until).toLocaleTimeString("en-GB")}`);
    else if (e.failing) st = el("span", { class: "state failing" }, `failing (ejection cap${e.ejected_by === "health_check" ? ", health checks" : ""})`);
    body.append(el("tr", { class: u ? "here" : "other", "data-address": e.address },
      el("td", {}, e.address),
      el("td", {}, e.zone || "–"),
      el("td", {}, j === undefined || j < 0 ? "–" : [el("span", { class: "swatch", style: `background:${subsetColor(j)}` }), String(j)]),
      el("td", {}, u ? u.loops.join(", ") : "–"),
      el("td", { class: "num active" }, String(e.active)),
      el("td", { class: "num" }, String(e.pending)),
      el("td", { class: "num ewma" }, e.ewma_latency_ns ? (e.ewma_latency_ns / 1e6).toFixed(1) + " ms" : "–"),
      el("td", {}, el("span", { class: "bar" }, el("i", { style: `width:${(100 * eff).toFixed(0)}%` })), `${fmt(e.effective_weight)} / ${e.weight}`),
      el("td", { class: "num" }, u ? `${u.open} / ${u.idle} / ${u.busy}` : "–"),
      el("td", {}, st),
      el("td", { class: "health" }, healthCell(e))));
  }
  const table = el("table", { class: "endpoints" },
    el("thead", {}, el("tr", {},
      el("th", {}, "endpoint"), el("th", {}, "zone"), el("th", {}, "subset"), el("th", { title: "loops of this gateway whose subset holds the endpoint" }, "loops"),
      el("th", { class: "num" }, "active"), el("th", { class: "num" }, "pending"), el("th", { class: "num" }, "EWMA"),
      el("th", { title: "slow-start weight now / configured weight" }, "weight"),
      el("th", { class: "num", title: "connections open / idle / busy, summed over this gateway's loops" }, "pools o/i/b"), el("th", {}, "state"),
      el("th", { title: "what decided the endpoint's health last: probe (a health check), live_traffic (live requests answered well: no probe needed), passive (live failures), none" }, "health"))),
    body);
  const wrap = sec.querySelector(".table-wrap");
  wrap.replaceChildren(table);
  if (rows.length > MAX_ROWS) wrap.append(el("div", { class: "more" }, `… and ${rows.length - MAX_ROWS} more endpoints (this gateway's first)`));
}

// ---- splits ------------------------------------------------------------------

// SPLIT_POINTS is how many of the last points a split's shares average:
// ten seconds at the default interval.
const SPLIT_POINTS = 10;

// renderSplits draws each split route's shares: the rate of
// corput_route_requests_total by origin over the last points, as one
// stacked bar per route.
function renderSplits(history) {
  const sec = document.getElementById("splits");
  const pts = (history.points || []).slice(-SPLIT_POINTS);
  const sums = {};
  for (const p of pts) {
    for (const [route, targets] of Object.entries(p.splits || {})) {
      sums[route] = sums[route] || {};
      for (const [origin, rps] of Object.entries(targets)) sums[route][origin] = (sums[route][origin] || 0) + rps;
    }
  }
  const routes = Object.keys(sums).sort();
  sec.hidden = routes.length === 0;
  sec.replaceChildren(el("h2", {}, "Splits — each route's share by origin, last ", String(pts.length), " s"));
  for (const route of routes) {
    const targets = Object.entries(sums[route]).sort((a, b) => a[0].localeCompare(b[0]));
    const total = targets.reduce((s, [, v]) => s + v, 0);
    const bar = el("div", { class: "split-bar" });
    targets.forEach(([origin, v], i) => {
      const w = total > 0 ? 100 * v / total : 0;
      bar.append(el("span", { style: `width:${w}%;background:${ORIGIN_COLORS[i % ORIGIN_COLORS.length]}`, title: `${origin}: ${pct(v, total)}` }));
    });
    const legend = targets.map(([origin, v]) => `${origin} ${pct(v, total)}`).join(" · ");
    sec.append(el("div", { class: "split", "data-route": route },
      el("div", { class: "split-head" }, el("strong", {}, route), " ", el("span", { class: "muted" }, `${fmt(total / Math.max(pts.length, 1))} req/s`)),
      bar, el("div", { class: "split-legend" }, legend)));
  }
}

// ---- refresh loop ----------------------------------------------------------

async function refresh() {
  try {
    const [origins, history] = await Promise.all([getJSON("/admin/origins"), getJSON("/dashboard/history")]);
    if (state.ticks % RING_EVERY === 0 || origins.some(o => !(o.name in state.subsets))) {
      const views = await Promise.all(origins.map(o => getJSON("/admin/subsets?origin=" + encodeURIComponent(o.name)).catch(() => null)));
      origins.forEach((o, i) => { state.subsets[o.name] = views[i]; });
    }
    state.ticks++;
    renderStats(origins, history);
    drawChart(document.getElementById("chart-churn"), seriesOf(history, "created_per_s", "#f5a524"), history.window_s);
    drawChart(document.getElementById("chart-open"), seriesOf(history, "open", "#38bdf8"), history.window_s);
    drawChart(document.getElementById("chart-rps"), seriesOf(history, "requests_per_s", "#a78bfa"), history.window_s);
    renderMirrors(history);
    renderSplits(history);
    for (const o of origins) renderOrigin(o, history, state.subsets[o.name]);
    const v = Object.values(state.subsets).find(Boolean);
    if (v) setText("gateway", `gateway ${v.gateway} of ${v.fleet.gateways} · ${v.fleet.loops} loops`);
    const ready = await fetch("/readyz", { cache: "no-store" }).then(r => r.ok).catch(() => false);
    const pill = document.getElementById("ready");
    pill.textContent = ready ? "ready" : "not ready";
    pill.className = "pill " + (ready ? "ok" : "bad");
    setText("updated", "updated " + new Date().toLocaleTimeString("en-GB"));
    document.getElementById("error").hidden = true;
    document.body.dataset.refreshes = String(state.ticks);
  } catch (err) {
    const b = document.getElementById("error");
    b.textContent = "admin API unreachable: " + err.message + " — retrying";
    b.hidden = false;
  }
}

async function loop() {
  await refresh();
  setTimeout(loop, REFRESH_MS);
}
loop();
