// The page of one or more mgrpo runs (package runlog renders it): the
// headline and the guards' alerts, curves (raw and smoothed), the stage
// times per step with links to their traces, the sample tables and every
// other metric. Its data is the JSON in #run-data; a live page also polls
// the server that served it for the lines written since.
"use strict";
(() => {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("run-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f6fb4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const STAGE_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  const STAGE_ORDER = ["generate_reward", "generate", "reward", "reference", "prepare", "learn", "control", "publish", "weight_sync"];
  // Chart geometry, in SVG user units.
  const W = 480, H = 230, ML = 52, MR = 12, MT = 10, MB = 24, PW = W - ML - MR, PH = H - MT - MB;
  const EVAL = "eval/greedy_accuracy", STEP_TIME = "time/step_s", TPS = "perf/tokens_per_s";
  const GUARD_TEXT = {
    policy_entropy: "the policy's entropy is rising towards that of a uniform policy (it is flattening)",
    uniform_weights: "the listwise weights are close to uniform: the rewards barely move them",
    tied_groups: "many steps had every group's rewards tied, so no gradient",
    no_reward: "the mean reward stayed near 0 for 50 steps",
    no_correct: "not one correct completion in 50 steps",
    warm_start: "the warm start ended under half its 40% greedy-accuracy target",
  };

  // ---- helpers
  const finite = Number.isFinite;
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) e.append(k);
    return e;
  }
  function sv(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const pct = (v) => (100 * v).toFixed(1) + "%";
  function num(v) {
    if (!finite(v)) return "-";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    return String(+v.toPrecision(4));
  }
  function kilo(v) {
    if (!finite(v)) return "-";
    return Math.abs(v) >= 1000 ? (v / 1000).toFixed(1) + "k" : v.toFixed(0);
  }
  function duration(s) {
    if (!finite(s)) return "-";
    if (s < 10) return s.toFixed(1) + " s";
    if (s < 60) return s.toFixed(0) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }
  const isPct = (key) => /accuracy|pass_at|clipped_frac|frac_reward_zero_std/.test(key);
  const isRate = (key) => /accuracy|pass_at/.test(key); // drawn on a 0 to 100% axis
  // bisect returns the index of the value of sorted xs nearest to x (-1 when empty).
  function bisect(xs, x) {
    let lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (xs[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && x - xs[lo - 1] < xs[lo] - x ? lo - 1 : lo;
  }
  // ema is the debiased exponential moving average of ys with weight w on
  // the past, as TensorBoard smooths (w = 0: ys itself).
  function ema(ys, w) {
    const out = new Array(ys.length);
    let last = 0;
    for (let i = 0; i < ys.length; i++) {
      last = last * w + (1 - w) * ys[i];
      out[i] = last / (1 - Math.pow(w, i + 1));
    }
    return out;
  }
  // niceStep is a 1, 2 or 5 times a power of ten step giving about n ticks over span.
  function niceStep(span, n) {
    const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  function tickLabel(v, step, asPct) {
    if (asPct) return (100 * v).toFixed(Math.max(0, -Math.floor(Math.log10(100 * step) + 1e-9))) + "%";
    if (Math.abs(v) < step / 2) return "0";
    if (step >= 1000) return +(v / 1000).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1000) + 1e-9))) + "k";
    if (step < 1e-4) return v.toExponential(1);
    return v.toFixed(Math.max(0, -Math.floor(Math.log10(step) + 1e-9)));
  }

  // ---- data
  // decodeLog turns a page log ({steps, cols, trace, sums}) into arrays, NaN
  // for null. Long runs' columns are thinned; sums ([sum, count] of each
  // key's values on every line) are not.
  function decodeLog(raw) {
    const n = raw.steps.length, cols = new Map();
    for (const [k, v] of Object.entries(raw.cols)) {
      cols.set(k, Array.isArray(v) ? v.map((x) => (x === null ? NaN : x)) : new Array(n).fill(v));
    }
    const trace = new Map(Object.entries(raw.trace).map(([s, id]) => [+s, id]));
    return { steps: raw.steps.slice(), cols, trace, sums: new Map(Object.entries(raw.sums)) };
  }
  // appendLines adds metrics.jsonl lines to log and returns how many.
  function appendLines(log, text) {
    let added = 0;
    for (const line of text.split("\n")) {
      if (!line) continue;
      let rec;
      try { rec = JSON.parse(line); } catch (e) { continue; }
      const n = log.steps.length;
      log.steps.push(rec.step);
      for (const [k, v] of Object.entries(rec)) {
        if (k === "step") continue;
        if (k === "trace_id") { log.trace.set(rec.step, v); continue; }
        if (typeof v !== "number" && v !== null) continue;
        let c = log.cols.get(k);
        if (!c) { c = new Array(n).fill(NaN); log.cols.set(k, c); }
        c.push(v === null ? NaN : v);
        if (v !== null) { const s = log.sums.get(k) || [0, 0]; s[0] += v; s[1]++; log.sums.set(k, s); }
      }
      for (const c of log.cols.values()) if (c.length === n) c.push(NaN);
      added++;
    }
    return added;
  }

  class Run {
    constructor(raw, i) {
      this.i = i;
      this.name = raw.name;
      this.cfg = raw.config || {};
      this.base = raw.base;
      this.color = COLORS[i % COLORS.length];
      this.m = decodeLog(raw.metrics);
      this.w = decodeLog(raw.warm);
      this.mOff = raw.metrics_offset;
      this.wOff = raw.warm_offset;
      this.samples = new Map(raw.samples.map((s) => [s.step, s.table]));
    }
    get(path) {
      let v = this.cfg;
      for (const p of path.split(".")) v = v && typeof v === "object" ? v[p] : undefined;
      return v;
    }
    // warmSteps is the number of warm-start steps logged: warm-start step s
    // is drawn at s - warmSteps, so RL starts at 0.
    warmSteps() { const s = this.w.steps; return s.length ? s[s.length - 1] : 0; }
    // series is key's finite values: RL steps from metrics.jsonl, or for
    // warm_start/... keys the warm start's, shifted.
    series(key) {
      const warm = key.startsWith("warm_start/");
      const log = warm ? this.w : this.m, shift = warm ? this.warmSteps() : 0;
      const c = log.cols.get(key), x = [], y = [];
      if (c) for (let i = 0; i < c.length; i++) if (finite(c[i])) { x.push(log.steps[i] - shift); y.push(c[i]); }
      return { x, y };
    }
    // evalSeries is key measured in the warm start (shifted) and in RL.
    evalSeries(key) {
      const rl = this.series(key), c = this.w.cols.get(key), shift = this.warmSteps(), x = [], y = [];
      const rlHasStart = rl.x.length > 0 && rl.x[0] === 0;
      if (c) for (let i = 0; i < c.length; i++) {
        const s = this.w.steps[i] - shift;
        if (finite(c[i]) && (s < 0 || !rlHasStart)) { x.push(s); y.push(c[i]); }
      }
      return { x: x.concat(rl.x), y: y.concat(rl.y), warm: x.length };
    }
    has(key) { return (key.startsWith("warm_start/") ? this.w : this.m).cols.has(key); }
    varies(key) {
      const c = this.m.cols.get(key);
      if (!c) return false;
      let first = NaN;
      for (const v of c) {
        if (!finite(v)) continue;
        if (!finite(first)) first = v; else if (v !== first) return true;
      }
      return false;
    }
    objective() {
      const o = this.get("maxent.objective");
      if (o) return o;
      const c = this.m.cols.get("train/maxent_objective");
      return c && c.some((v) => v === 1) ? "maxent" : "grpo";
    }
    trace(step) { return this.m.trace.get(step); }
    traceURL(id) {
      const q = String(this.get("trace.query_url") || "http://127.0.0.1:16686").replace(/\/+$/, "");
      return q + "/trace/" + encodeURIComponent(id);
    }
    // summary is what the headline shows, from metrics.jsonl and the warm-start log.
    summary() {
      const m = this.m, col = (k) => m.cols.get(k) || [], sum = (k) => m.sums.get(k) || [0, 0];
      let last = 0;
      for (const s of m.steps) last = Math.max(last, s);
      const ev = col(EVAL);
      let now = NaN, nowStep = -1, warm = NaN;
      for (let i = 0; i < ev.length; i++) {
        if (!finite(ev[i])) continue;
        if (m.steps[i] === 0) warm = ev[i];
        else if (m.steps[i] > nowStep) { now = ev[i]; nowStep = m.steps[i]; }
      }
      const rl = sum(STEP_TIME)[0];
      const we = this.series("warm_start/elapsed_s");
      const warmTime = we.y.length ? we.y[we.y.length - 1] : 0;
      const [tsum, tn] = sum(TPS);
      const alerts = [];
      for (const [k, c] of m.cols) {
        if (!k.startsWith("guard/")) continue;
        for (let i = 0; i < c.length; i++) if (c[i] >= 1) alerts.push({ rule: k.slice(6), level: c[i], step: m.steps[i] });
      }
      alerts.sort((a, b) => a.step - b.step || b.level - a.level);
      const skipped = sum("train/skipped")[0];
      const total = +this.get("train.steps");
      const stopped = alerts.find((a) => a.level >= 2 && this.get("train.guard") === "stop");
      let status = "at step " + last + (finite(total) ? " of " + total : ""), cls = "";
      if (stopped) { status = "stopped by the " + stopped.rule + " guard at step " + stopped.step; cls = "stopped"; }
      else if (finite(total) && last >= total) { status = "finished"; cls = "finished"; }
      else if (D.live) { status = (m.steps.length ? "running, step " + last : "warm start, step " + this.warmSteps()) ; cls = "live"; }
      return { last, total, now, nowStep, warm, rl, warmTime, wall: warmTime + rl, tps: tn ? tsum / tn : NaN, alerts, skipped, status, cls };
    }
    describe() {
      const t = this.get("task.name") || "?", parts = [];
      let task = t;
      if (this.get("task.dataset")) task = t + " from " + String(this.get("task.dataset")).split("/").pop();
      else if (t === "addition") task = this.get("task.digits") + "-digit addition";
      else if (t === "countdown") task = "countdown, " + this.get("task.numbers") + " numbers up to " + this.get("task.max_number");
      else if (t === "wordproblems") task = "word problems, " + this.get("task.steps") + " steps";
      parts.push(task);
      const ck = this.get("model.checkpoint");
      parts.push("model " + (this.get("model.preset") || "custom") + (ck ? " from " + String(ck).split("/").pop() : ""));
      let obj = "objective " + this.objective();
      if (this.get("loss.type")) obj += " (" + this.get("loss.type") + " loss)";
      parts.push(obj);
      if (this.get("train.seed") !== undefined) parts.push("seed " + this.get("train.seed"));
      return parts.join(" · ");
    }
  }

  const runs = D.runs.map((r, i) => new Run(r, i));
  const multi = runs.length > 1;
  const state = { smooth: 0.6, charts: [], pinned: new Map() };

  // ---- headline
  function renderHeadline(box) {
    box.replaceChildren();
    const sums = runs.map((r) => r.summary());
    if (!multi) {
      const r = runs[0], s = sums[0];
      box.append(el("h1", {}, r.name, el("span", { class: "status " + s.cls, id: "h-status-0" }, s.status)));
      box.append(el("p", { class: "sub" }, r.describe()));
      const cards = el("div", { class: "cards" });
      const card = (lab, big, note) => el("div", { class: "card" }, el("div", { class: "lab" }, lab), big, note);
      const delta = finite(s.now) && finite(s.warm) ? 100 * (s.now - s.warm) : NaN;
      const warmNote = el("div", { class: "note", id: "h-warm-0", "data-value": String(s.warm) });
      if (finite(s.warm)) {
        warmNote.append("warm start " + pct(s.warm));
        if (finite(delta)) warmNote.append(" · ", el("b", { class: delta >= 0 ? "up" : "down" }, (delta >= 0 ? "+" : "") + delta.toFixed(1) + " points"));
      } else warmNote.append("no start measurement");
      cards.append(card("greedy accuracy, held out" + (s.nowStep > 0 ? " (step " + s.nowStep + ")" : ""),
        el("div", { class: "big", id: "h-greedy-0", "data-value": String(s.now) }, finite(s.now) ? pct(s.now) : "-"), warmNote));
      cards.append(card("steps", el("div", { class: "big", id: "h-steps-0", "data-value": String(s.last) }, String(s.last)),
        el("div", { class: "note" }, finite(s.total) ? "of " + s.total : "")));
      cards.append(card("wall time", el("div", { class: "big", id: "h-wall-0", "data-value": String(s.wall), "data-rl": String(s.rl), "data-warm": String(s.warmTime) }, duration(s.wall)),
        el("div", { class: "note" }, (r.w.steps.length ? "warm start " + duration(s.warmTime) : "no warm start logged") + " · RL " + duration(s.rl))));
      cards.append(card("generation", el("div", { class: "big", id: "h-tps-0", "data-value": String(s.tps) }, kilo(s.tps)),
        el("div", { class: "note" }, "tokens/s, mean over steps")));
      box.append(cards);
    } else {
      box.append(el("h1", {}, D.title));
      const t = el("table", { class: "runs" });
      t.innerHTML = "<tr><th>run</th><th>setting</th><th>status</th><th>steps</th><th>wall time</th><th>greedy accuracy</th><th>warm start</th><th>tokens/s</th></tr>";
      runs.forEach((r, i) => {
        const s = sums[i], tr = el("tr");
        tr.innerHTML = `<td class="runcell"><i style="background:${r.color}"></i>${esc(r.name)}</td><td>${esc(r.describe())}</td>` +
          `<td id="h-status-${i}">${esc(s.status)}</td><td class="num" id="h-steps-${i}" data-value="${s.last}">${s.last}</td>` +
          `<td class="num" id="h-wall-${i}" data-value="${s.wall}">${duration(s.wall)}</td>` +
          `<td class="num" id="h-greedy-${i}" data-value="${s.now}">${finite(s.now) ? pct(s.now) : "-"}</td>` +
          `<td class="num" id="h-warm-${i}" data-value="${s.warm}">${finite(s.warm) ? pct(s.warm) : "-"}</td>` +
          `<td class="num" id="h-tps-${i}" data-value="${s.tps}">${kilo(s.tps)}</td>`;
        t.append(tr);
      });
      box.append(t);
    }
    runs.forEach((r, i) => {
      const s = sums[i], who = multi ? r.name + ": " : "";
      for (const a of s.alerts) {
        const level = a.level >= 2 ? "stop" : "warn";
        let tail = "";
        if (a.level >= 2) tail = r.get("train.guard") === "stop" ? " The run stopped here (train.guard=stop)." : " A stop-level alert; train.guard=" + r.get("train.guard") + " kept the run going.";
        box.append(el("div", { class: "banner " + level, "data-rule": a.rule, "data-step": String(a.step) },
          el("b", {}, who + (level === "stop" ? "stop" : "warning") + " (" + a.rule + ")"),
          (a.step > 0 ? " at step " + a.step : " at the start") + ": " + (GUARD_TEXT[a.rule] || "see the run's output") + "." + tail));
      }
      if (s.skipped) box.append(el("div", { class: "banner info" }, who + s.skipped + " step" + (s.skipped > 1 ? "s" : "") + " skipped (train/skipped; the reason is in train/skip_reason)."));
    });
  }

  // ---- charts
  // yDomain is the value range of lines: their smoothed values and the raw
  // ones without the fraction trim at each end (spikes would flatten the
  // curve), [0, 1] for a rate (unit) that fits in it.
  function yDomain(lines, unit, trim = 0.005) {
    const vals = [];
    for (const l of lines) for (const v of l.y) vals.push(v);
    if (!vals.length) return [0, 1];
    vals.sort((a, b) => a - b);
    const n = vals.length;
    let lo = vals[0], hi = vals[n - 1];
    if (n >= 100) { lo = vals[Math.floor(trim * (n - 1))]; hi = vals[Math.ceil((1 - trim) * (n - 1))]; }
    for (const l of lines) if (l.sm) for (const v of l.sm) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (unit && lo >= 0 && hi <= 1) return [0, 1];
    if (hi - lo <= 1e-9 * Math.max(Math.abs(lo), Math.abs(hi))) { const d = Math.abs(lo) * 0.1 || 0.5; lo -= d; hi += d; }
    const pad = (hi - lo) * 0.05, nonneg = lo >= 0;
    lo -= pad; hi += pad;
    if (nonneg && lo < 0) lo = 0;
    return [lo, hi];
  }
  // path draws xs, ys as an SVG path; beyond two points per pixel column it
  // keeps each column's lowest and highest point (mode "minmax") or its last.
  function path(xs, ys, sx, sy, mode) {
    const n = xs.length;
    let idx = [];
    if (n <= 2 * PW) idx = xs.map((_, i) => i);
    else {
      let col = NaN, lo = 0, hi = 0, last = 0;
      const flush = () => {
        if (!finite(col)) return;
        if (mode === "last") idx.push(last);
        else if (lo === hi) idx.push(lo);
        else idx.push(Math.min(lo, hi), Math.max(lo, hi));
      };
      for (let i = 0; i < n; i++) {
        const c = Math.floor(sx(xs[i]));
        if (c !== col) { flush(); col = c; lo = hi = i; }
        else { if (ys[i] < ys[lo]) lo = i; if (ys[i] > ys[hi]) hi = i; }
        last = i;
      }
      flush();
    }
    let d = "";
    for (let k = 0; k < idx.length; k++) {
      const i = idx[k];
      d += (k ? "L" : "M") + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
    }
    return d;
  }
  function drawAxes(svg, x0, x1, y0, y1, asPct) {
    const g = sv("g", { class: "grid" });
    const ys = niceStep(y1 - y0, 5);
    for (let k = Math.ceil(y0 / ys), v = k * ys; v <= y1 + ys * 1e-9; v = ++k * ys) {
      const y = MT + (y1 - v) / (y1 - y0) * PH;
      g.append(sv("line", { x1: ML, x2: W - MR, y1: y.toFixed(1), y2: y.toFixed(1) }));
      const t = sv("text", { x: ML - 5, y: (y + 3).toFixed(1), "text-anchor": "end" });
      t.textContent = tickLabel(v, ys, asPct);
      g.append(t);
    }
    const xs = Math.max(1, niceStep(x1 - x0, 6));
    for (let k = Math.ceil(x0 / xs), v = k * xs; v <= x1 + xs * 1e-9; v = ++k * xs) {
      const x = ML + (v - x0) / (x1 - x0) * PW;
      g.append(sv("line", { x1: x.toFixed(1), x2: x.toFixed(1), y1: MT, y2: MT + PH }));
      const t = sv("text", { x: x.toFixed(1), y: H - 8, "text-anchor": "middle" });
      t.textContent = tickLabel(v, xs, false);
      g.append(t);
    }
    svg.append(g);
  }

  // showTip shows html in tip, a box inside fig, beside the mouse.
  function showTip(fig, tip, html, e) {
    tip.innerHTML = html;
    tip.style.display = "block";
    const fr = fig.getBoundingClientRect(), tw = tip.offsetWidth;
    let left = e.clientX - fr.left + 14;
    if (left + tw > fr.width) left = e.clientX - fr.left - tw - 14;
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = (e.clientY - fr.top + 12) + "px";
  }

  let clipSeq = 0;
  // Chart is one panel: key(s) over steps for every run, raw (faint) and
  // smoothed, or for eval keys the measured points of the warm start and RL.
  class Chart {
    constructor(spec) {
      this.spec = spec;
      this.fig = el("figure", { class: "chart", "data-key": spec.keys[0] });
      this.cap = el("figcaption");
      this.svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, "data-key": spec.keys[0], role: "img", "aria-label": spec.title });
      this.tip = el("div", { class: "tip" });
      this.fig.append(this.cap, this.svg, this.tip);
      this.svg.addEventListener("mousemove", (e) => this.hover(e));
      this.svg.addEventListener("mouseleave", () => this.unhover());
      this.lines = [];
    }
    draw() {
      const spec = this.spec, svg = this.svg, isEval = spec.kind === "eval";
      svg.replaceChildren();
      this.lines = [];
      for (const r of runs) {
        spec.keys.forEach((k, ki) => {
          const s = isEval ? r.evalSeries(k) : r.series(k);
          if (!s.x.length) return;
          this.lines.push({ run: r, key: k, ki, x: s.x, y: s.y, warm: s.warm || 0, sm: isEval ? null : ema(s.y, state.smooth) });
        });
      }
      const asPct = spec.keys.every(isPct);
      let x0 = Infinity, x1 = -Infinity;
      for (const l of this.lines) { x0 = Math.min(x0, l.x[0]); x1 = Math.max(x1, l.x[l.x.length - 1]); }
      if (!this.lines.length) { x0 = 0; x1 = 1; }
      if (x1 === x0) { x0 -= 1; x1 += 1; }
      const [y0, y1] = yDomain(this.lines, spec.keys.every(isRate));
      const sx = (x) => ML + (x - x0) / (x1 - x0) * PW, sy = (y) => MT + (y1 - y) / (y1 - y0) * PH;
      Object.assign(this, { x0, x1, y0, y1, sx, sy, asPct });
      if (x0 < 0) {
        svg.append(sv("rect", { class: "warm", x: ML, y: MT, width: (sx(0) - ML).toFixed(1), height: PH }));
        const t = sv("text", { x: ML + 4, y: MT + 11 });
        t.textContent = "warm start";
        svg.append(t);
      }
      drawAxes(svg, x0, x1, y0, y1, asPct);
      if (x0 < 0) {
        svg.append(sv("line", { class: "rlstart", x1: sx(0).toFixed(1), x2: sx(0).toFixed(1), y1: MT, y2: MT + PH }));
        const t = sv("text", { x: (sx(0) + 4).toFixed(1), y: MT + 11 });
        t.textContent = "RL";
        svg.append(t);
      }
      const id = "clip" + ++clipSeq;
      const cp = sv("clipPath", { id });
      cp.append(sv("rect", { x: ML, y: MT, width: PW, height: PH }));
      svg.append(cp);
      const g = sv("g", { "clip-path": `url(#${id})` });
      for (const l of this.lines) {
        const dash = l.ki ? "5 3" : "";
        if (isEval) {
          g.append(sv("path", { class: "eval", stroke: l.run.color, d: path(l.x, l.y, sx, sy, "last"), "data-run": l.run.name, "data-key": l.key, "stroke-dasharray": dash }));
          l.x.forEach((x, i) => g.append(sv("circle", { class: "evalpt", cx: sx(x).toFixed(1), cy: sy(l.y[i]).toFixed(1), r: 2.6, fill: i < l.warm ? "#fff" : l.run.color, stroke: l.run.color })));
        } else {
          g.append(sv("path", { class: "raw", stroke: l.run.color, d: path(l.x, l.y, sx, sy, "minmax"), "data-run": l.run.name }));
          g.append(sv("path", { class: "smooth", stroke: l.run.color, d: path(l.x, l.sm, sx, sy, "last"), "data-run": l.run.name, "stroke-dasharray": dash }));
        }
      }
      svg.append(g);
      for (const r of runs) for (const a of r.summary().alerts) {
        if (a.step < x0 || a.step > x1 || a.step === 0) continue;
        svg.append(sv("line", { class: "alert", x1: sx(a.step).toFixed(1), x2: sx(a.step).toFixed(1), y1: MT, y2: MT + 7, stroke: a.level >= 2 ? "#c0392b" : "#e69f00" }));
      }
      svg.append(sv("rect", { class: "frame", x: ML, y: MT, width: PW, height: PH }));
      this.cursor = sv("g", { display: "none" });
      svg.append(this.cursor);
      this.caption();
    }
    caption() {
      const last = this.lines.map((l) => {
        const v = l.sm ? l.sm[l.sm.length - 1] : l.y[l.y.length - 1];
        return this.asPct ? pct(v) : num(v);
      });
      const keys = this.spec.keys.length > 1 ? this.spec.keys.join(", ") : this.spec.keys[0];
      this.cap.innerHTML = `<span>${esc(this.spec.title)} <span class="key">${esc(keys)}</span></span><span class="last">${esc(last.slice(0, 3).join(" / "))}</span>`;
    }
    hover(e) {
      if (!this.lines.length) return;
      const rect = this.svg.getBoundingClientRect(), vx = (e.clientX - rect.left) * W / rect.width;
      if (vx < ML || vx > W - MR) return this.unhover();
      const xv = this.x0 + (vx - ML) / PW * (this.x1 - this.x0);
      let best = null;
      const hits = [];
      for (const l of this.lines) {
        const i = bisect(l.x, xv);
        if (i < 0) continue;
        hits.push({ l, i });
        if (!best || Math.abs(l.x[i] - xv) < Math.abs(best - xv)) best = l.x[i];
      }
      this.cursor.replaceChildren();
      this.cursor.setAttribute("display", "");
      const cx = this.sx(best);
      this.cursor.append(sv("line", { class: "cursor", x1: cx, x2: cx, y1: MT, y2: MT + PH }));
      const fmt = (v) => (this.asPct ? pct(v) : num(v));
      let html = `<b>step ${best < 0 ? best + " (warm start)" : best}</b>`;
      for (const { l, i } of hits) {
        if (l.x[i] !== best) continue;
        const v = l.sm ? l.sm[i] : l.y[i];
        this.cursor.append(sv("circle", { cx, cy: this.sy(v), r: 3.2, fill: l.run.color }));
        const who = (multi ? l.run.name + " " : "") + (this.spec.keys.length > 1 ? l.key + " " : "");
        html += `<div><i style="background:${l.run.color}"></i>${esc(who)}${fmt(l.y[i])}${l.sm ? ` <span class="muted">smoothed ${fmt(l.sm[i])}</span>` : ""}</div>`;
      }
      showTip(this.fig, this.tip, html, e);
    }
    unhover() {
      this.tip.style.display = "none";
      if (this.cursor) this.cursor.setAttribute("display", "none");
    }
  }

  // headPanels are the first charts: what every objective has, then what
  // this one uses (weight entropy on listwise runs, tau on listwise runs or
  // when a controller moved it, beta when a controller moved it).
  function headPanels() {
    const has = (k) => runs.some((r) => r.has(k)), varies = (k) => runs.some((r) => r.varies(k));
    const listwise = runs.some((r) => r.objective() === "maxent_listwise");
    const out = [];
    const evalKeys = [EVAL];
    for (const r of runs) for (const k of r.m.cols.keys()) if (k.startsWith("eval/") && !evalKeys.includes(k)) evalKeys.push(k);
    if (runs.some((r) => r.has(EVAL) || r.w.cols.has(EVAL))) out.push({ title: "Greedy accuracy, held out", keys: evalKeys, kind: "eval" });
    const add = (title, key, when) => { if (has(key) && (when === undefined || when)) out.push({ title, keys: [key], kind: "line" }); };
    add("Reward", "train/reward");
    add("Accuracy of samples", "train/accuracy");
    add("Policy entropy (nats/token)", "train/policy_entropy");
    add("KL to the reference", "train/kl");
    add("Loss", "train/loss");
    add("Completion length (tokens)", "train/completions/mean_length_sampled");
    add("Groups with tied rewards", "train/frac_reward_zero_std");
    add("Weight entropy (nats)", "train/weight_entropy");
    add("τ (tau)", "train/tau", listwise || varies("train/tau"));
    add("β (beta)", "train/beta", varies("train/beta"));
    return out;
  }

  // ---- time
  function stageKeys(run) {
    const ks = [...run.m.cols.keys()].filter((k) => k.startsWith("time/") && k !== STEP_TIME);
    const rank = (k) => { const i = STAGE_ORDER.indexOf(k.slice(5, -2)); return i < 0 ? 99 : i; };
    return ks.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
  }
  // stages is a run's stage names, with "other" (the step time no stage
  // accounts for: evaluations, checkpoints, waiting) when it logs step
  // times, and each step's times in seconds.
  function stages(r) {
    const keys = stageKeys(r), tot = r.m.cols.get(STEP_TIME), names = keys.map((k) => k.slice(5, -2));
    if (tot) names.push("other");
    const rows = [];
    r.m.steps.forEach((step, i) => {
      const vals = keys.map((k) => { const v = r.m.cols.get(k)[i]; return finite(v) ? v : 0; });
      const t = tot ? tot[i] : NaN;
      if (tot) vals.push(finite(t) ? Math.max(0, t - vals.reduce((a, b) => a + b, 0)) : 0);
      if (vals.some((v) => v > 0) || finite(t)) rows.push({ step, i, vals, tot: t });
    });
    return { names, rows };
  }
  const stageColor = (j, name) => (name === "other" ? "#c7ccd1" : STAGE_COLORS[j % STAGE_COLORS.length]);
  // TimeChart stacks the stage times of one run per step, with the step time over them.
  class TimeChart {
    constructor(box) {
      this.ri = 0;
      this.fig = el("figure", { class: "chart", id: "time-chart" });
      this.cap = el("figcaption");
      this.svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "stage times per step" });
      this.tip = el("div", { class: "tip" });
      this.legend = el("div", { class: "legend" });
      this.fig.append(this.cap, this.svg, this.legend, this.tip);
      box.append(this.fig);
      this.svg.addEventListener("mousemove", (e) => this.hover(e, false));
      this.svg.addEventListener("click", (e) => this.hover(e, true));
      this.svg.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    }
    draw() {
      const r = runs[this.ri], svg = this.svg, { names, rows } = stages(r);
      svg.replaceChildren();
      this.rows = rows;
      this.cap.innerHTML = `<span>Stage times per step, s${multi ? ", " + esc(r.name) : ""} <span class="key">time/*</span></span><span class="last">click a step for its trace</span>`;
      if (!rows.length) { this.legend.textContent = "no time/* keys yet"; return; }
      let x0 = rows[0].step, x1 = rows[rows.length - 1].step;
      if (x1 === x0) { x0 -= 1; x1 += 1; }
      const sx = (x) => ML + (x - x0) / (x1 - x0) * PW;
      // one bucket per pixel column: the mean of each stage
      const buckets = [];
      let cur = null;
      for (const row of rows) {
        const c = Math.floor(sx(row.step));
        if (!cur || cur.c !== c) { cur = { c, x: row.step, n: 0, sums: names.map(() => 0), tot: 0, tn: 0 }; buckets.push(cur); }
        cur.n++;
        row.vals.forEach((v, j) => { cur.sums[j] += v; });
        if (finite(row.tot)) { cur.tot += row.tot; cur.tn++; }
        cur.x = row.step;
      }
      const tops = [];
      for (const b of buckets) {
        let acc = 0;
        b.cum = b.sums.map((s) => (acc += s / b.n));
        tops.push(acc);
      }
      const y0 = 0, y1 = yDomain([{ y: tops }], false, 0.03)[1]; // evaluation and checkpoint steps go off the top
      const sy = (y) => MT + (y1 - y) / (y1 - y0) * PH;
      Object.assign(this, { x0, x1, sx, sy });
      drawAxes(svg, x0, x1, y0, y1, false);
      const id = "clip" + ++clipSeq, cp = sv("clipPath", { id });
      cp.append(sv("rect", { x: ML, y: MT, width: PW, height: PH }));
      svg.append(cp);
      const g = sv("g", { "clip-path": `url(#${id})` });
      names.forEach((name, j) => {
        let d = "";
        buckets.forEach((b, n) => { d += (n ? "L" : "M") + sx(b.x).toFixed(1) + "," + sy(b.cum[j]).toFixed(1); });
        for (let n = buckets.length - 1; n >= 0; n--) d += "L" + sx(buckets[n].x).toFixed(1) + "," + sy(j ? buckets[n].cum[j - 1] : 0).toFixed(1);
        g.append(sv("path", { class: "stage", d: d + "Z", fill: stageColor(j, name), "data-stage": name }));
      });
      svg.append(g);
      svg.append(sv("rect", { class: "frame", x: ML, y: MT, width: PW, height: PH }));
      this.cursor = sv("line", { class: "cursor", y1: MT, y2: MT + PH, display: "none" });
      svg.append(this.cursor);
      const total = names.map((_, j) => rows.reduce((a, row) => a + row.vals[j], 0));
      const all = total.reduce((a, b) => a + b, 0) || 1;
      this.legend.innerHTML = names.map((name, j) => `<span style="margin-right:12px"><i style="background:${stageColor(j, name)}"></i>${esc(name)} ${(1000 * total[j] / rows.length).toFixed(1)} ms (${(100 * total[j] / all).toFixed(0)}%)</span>`).join("") +
        (names.includes("other") ? '<div class="muted">other: the step time (time/step_s) no stage accounts for: evaluations, checkpoints, waiting</div>' : "");
    }
    hover(e, pin) {
      if (!this.rows || !this.rows.length) return;
      const rect = this.svg.getBoundingClientRect(), vx = (e.clientX - rect.left) * W / rect.width;
      const xv = this.x0 + (vx - ML) / PW * (this.x1 - this.x0);
      const row = this.rows[bisect(this.rows.map((r) => r.step), xv)];
      this.cursor.setAttribute("display", "");
      this.cursor.setAttribute("x1", this.sx(row.step));
      this.cursor.setAttribute("x2", this.sx(row.step));
      const r = runs[this.ri];
      showTip(this.fig, this.tip, stepTable(r, row.step, false), e);
      if (pin) showStep(r, row.step);
    }
  }
  // stepTable is the stage times of one step (and, with links, its trace).
  function stepTable(r, step, links) {
    const { names, rows } = stages(r), row = rows.find((x) => x.step === step);
    if (!row) return "";
    let html = `<b>step ${step}</b>`;
    if (finite(row.tot)) html += ` <span class="muted">${(1000 * row.tot).toFixed(1)} ms</span>`;
    names.forEach((name, j) => {
      const v = row.vals[j];
      html += `<div><i style="background:${stageColor(j, name)}"></i>${esc(name)} ${(1000 * v).toFixed(1)} ms${finite(row.tot) && row.tot > 0 ? ` <span class="muted">${(100 * v / row.tot).toFixed(0)}%</span>` : ""}</div>`;
    });
    const id = r.trace(step);
    if (links) html += id ? `<div><a class="trace" href="${esc(r.traceURL(id))}" target="_blank" rel="noopener">trace ${esc(id)} in Jaeger</a></div>` : `<div class="muted">no trace id on this step (tracing is off unless trace.otlp_endpoint or trace.file is set)</div>`;
    else if (id) html += `<div class="muted">traced: click for the Jaeger link</div>`;
    return html;
  }
  let stepBox = null;
  function showStep(r, step) {
    stepBox.innerHTML = stepTable(r, step, true);
    stepBox.style.display = "block";
  }
  function slowest(box) {
    const rows = [];
    for (const r of runs) {
      const st = stages(r);
      for (const row of st.rows) if (finite(row.tot) && row.step > 0) rows.push({ r, row, names: st.names });
    }
    rows.sort((a, b) => b.row.tot - a.row.tot);
    let html = `<table id="slowest"><tr><th>slowest steps</th>${multi ? "<th>run</th>" : ""}<th>time</th><th>largest stage</th><th>trace</th></tr>`;
    for (const { r, row, names } of rows.slice(0, 8)) {
      let j = 0;
      row.vals.forEach((v, k) => { if (v > row.vals[j]) j = k; });
      const id = r.trace(row.step);
      html += `<tr><td class="num"><a href="#" data-run="${r.i}" data-step="${row.step}">${row.step}</a></td>${multi ? `<td>${esc(r.name)}</td>` : ""}<td class="num">${(1000 * row.tot).toFixed(1)} ms</td>` +
        `<td>${esc(names[j] || "")}${row.tot > 0 ? ` ${(100 * row.vals[j] / row.tot).toFixed(0)}%` : ""}</td>` +
        `<td>${id ? `<a class="trace" href="${esc(r.traceURL(id))}" target="_blank" rel="noopener">${esc(id.slice(0, 8))}…</a>` : '<span class="muted">-</span>'}</td></tr>`;
    }
    box.innerHTML = html + "</table>";
    box.querySelectorAll("a[data-step]").forEach((a) => a.addEventListener("click", (e) => { e.preventDefault(); showStep(runs[+a.dataset.run], +a.dataset.step); }));
  }

  // ---- samples
  const SAMPLE_LABELS = { prompt_index: "group", completion_index: "#", reward_total: "reward", update_weight_raw: "weight", q_mass: "q", reward_rank_desc: "rank" };
  const HIGH_KL = "high_kl_tokens";
  const HIGH_KL_LABELS = { prompt_index: "group", completion_index: "#", logp_old: "old logp", logp_new: "new logp", kl: "KL (k3)", ratio: "ratio" };
  class Samples {
    constructor(box) {
      this.ri = 0;
      this.sort = { col: "prompt_index", dir: 1 };
      this.follow = true;
      this.runSel = el("select", { id: "samples-run" });
      runs.forEach((r, i) => this.runSel.append(el("option", { value: String(i) }, r.name)));
      this.stepSel = el("select", { id: "samples-step" });
      this.filter = el("select", { id: "samples-filter" });
      for (const [v, t] of [["all", "all completions"], ["correct", "correct only"], ["wrong", "wrong only"]]) this.filter.append(el("option", { value: v }, t));
      const prev = el("button", { class: "nav", title: "previous step" }, "◀"), next = el("button", { class: "nav", title: "next step" }, "▶");
      this.info = el("span", { class: "muted" });
      const controls = el("div", { class: "controls" });
      if (multi) controls.append(el("label", {}, "run ", this.runSel));
      controls.append(el("label", {}, "step ", prev, this.stepSel, next), this.filter, this.info);
      this.wrap = el("div", { class: "tablewrap" });
      this.high = el("div", { id: "high-kl" });
      box.append(controls, this.wrap, this.high);
      this.runSel.addEventListener("change", () => { this.ri = +this.runSel.value; this.follow = true; this.refresh(); });
      this.stepSel.addEventListener("change", () => { this.follow = this.stepSel.selectedIndex === this.stepSel.options.length - 1; this.draw(); });
      this.filter.addEventListener("change", () => this.draw());
      const move = (d) => {
        const i = Math.min(Math.max(this.stepSel.selectedIndex + d, 0), this.stepSel.options.length - 1);
        this.stepSel.selectedIndex = i;
        this.stepSel.dispatchEvent(new Event("change"));
      };
      prev.addEventListener("click", () => move(-1));
      next.addEventListener("click", () => move(1));
    }
    refresh() {
      const r = runs[this.ri], steps = [...r.samples.keys()].sort((a, b) => a - b), cur = this.stepSel.value;
      this.stepSel.replaceChildren(...steps.map((s) => el("option", { value: String(s) }, String(s))));
      if (!steps.length) { this.wrap.innerHTML = '<p class="muted">&nbsp;No sample tables (output.sample_every is 0, or no step has written one yet).</p>'; this.high.replaceChildren(); return; }
      this.stepSel.value = this.follow || !steps.includes(+cur) ? String(steps[steps.length - 1]) : cur;
      this.draw();
    }
    draw() {
      const r = runs[this.ri], t = r.samples.get(+this.stepSel.value);
      if (!t) return;
      const cols = t.columns, at = (name) => cols.indexOf(name), data = t.data;
      const colOf = (name) => data.map((row) => row[at(name)]);
      const same = (a, b) => at(a) >= 0 && at(b) >= 0 && data.every((row) => row[at(a)] === row[at(b)]);
      const okCol = at("reward/correct") >= 0 ? "reward/correct" : at("reward/accuracy") >= 0 ? "reward/accuracy" : "";
      const shown = cols.filter((c) => {
        if (["step", "group_size", "update_mass_proxy"].includes(c)) return false;
        if (c === "q_mass") return colOf(c).some((v) => v !== null);
        if (c === "update_weight_raw") return !same(c, "advantage");
        if (c === "generator") return new Set(colOf(c)).size > 1;
        return true;
      });
      let rows = data.map((row, n) => ({ row, n, ok: okCol ? row[at(okCol)] === 1 : null }));
      if (this.filter.value !== "all") rows = rows.filter((x) => x.ok === (this.filter.value === "correct"));
      const sc = at(this.sort.col), dir = this.sort.dir, g = at("prompt_index"), ci = at("completion_index");
      const cmp = (a, b) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : a < b ? -1 : 1);
      rows.sort((a, b) => dir * cmp(a.row[sc], b.row[sc]) || cmp(a.row[g], b.row[g]) || cmp(a.row[ci], b.row[ci]));
      const nok = data.filter((row) => okCol && row[at(okCol)] === 1).length;
      this.info.textContent = `${data.length} completions` + (okCol ? `, ${nok} correct (${okCol})` : "") + ` · sample_every ${r.get("output.sample_every") ?? "?"}`;
      let html = '<table id="samples-table"><tr><th></th>';
      for (const c of shown) {
        const arrow = c === this.sort.col ? (this.sort.dir > 0 ? " ▲" : " ▼") : "";
        html += `<th class="sortable" data-col="${esc(c)}">${esc(SAMPLE_LABELS[c] || c.replace(/^reward\//, ""))}${arrow}</th>`;
      }
      html += "</tr>";
      for (const x of rows) {
        const cls = x.ok === null ? "" : x.ok ? "correct" : "wrong";
        html += `<tr class="${cls}"><td class="mark">${x.ok === null ? "" : x.ok ? "✓" : "✗"}</td>`;
        for (const c of shown) {
          const v = x.row[at(c)];
          if (typeof v === "number") html += `<td class="num">${Number.isInteger(v) ? v : num(v)}</td>`;
          else if (v === null) html += '<td class="num muted">-</td>';
          else html += `<td class="text">${esc(v)}</td>`;
        }
        html += "</tr>";
      }
      this.wrap.innerHTML = html + "</table>";
      this.wrap.querySelectorAll("th.sortable").forEach((th) => th.addEventListener("click", () => {
        const c = th.dataset.col;
        this.sort = { col: c, dir: this.sort.col === c ? -this.sort.dir : 1 };
        this.draw();
      }));
      this.drawHighKL(t[HIGH_KL]);
    }
    // drawHighKL shows the step's metrics.top_k_kl tokens (largest per-token
    // KL between the behaviour and the learner's log-probs) under the samples.
    drawHighKL(hk) {
      if (!hk || !hk.data || !hk.data.length) { this.high.replaceChildren(); return; }
      const at = (name) => hk.columns.indexOf(name);
      const cols = hk.columns.filter((c) => c !== "token_id");
      let html = `<h3>Tokens with the largest KL (metrics.top_k_kl ${hk.data.length})</h3><div class="tablewrap"><table id="high-kl-table"><tr>`;
      for (const c of cols) html += `<th>${esc(HIGH_KL_LABELS[c] || c)}</th>`;
      html += "</tr>";
      for (const row of hk.data) {
        html += "<tr>";
        for (const c of cols) {
          const v = row[at(c)];
          if (c === "token") html += `<td class="text"><code>${esc(JSON.stringify(v ?? ""))}</code></td>`;
          else if (typeof v === "number") html += `<td class="num">${Number.isInteger(v) ? v : num(v)}</td>`;
          else if (v === null) html += '<td class="num muted">-</td>';
          else html += `<td class="text">${esc(v)}</td>`;
        }
        html += "</tr>";
      }
      this.high.innerHTML = html + "</table></div>";
    }
  }

  // ---- every metric
  class AllMetrics {
    constructor(box) {
      this.search = el("input", { type: "search", id: "metric-search", placeholder: "filter, e.g. clip or rewards/ or time" });
      this.count = el("span", { class: "muted" });
      this.grid = el("div", { class: "grid", id: "pinned" });
      this.list = el("ul", { class: "metrics-list", id: "metric-list" });
      box.append(el("div", { class: "controls" }, this.search, this.count, el("span", { class: "muted" }, "click a key to chart it")), this.grid, this.list);
      this.search.addEventListener("input", () => this.filter());
    }
    keys() {
      const set = new Set();
      for (const r of runs) {
        for (const k of r.m.cols.keys()) set.add(k);
        for (const k of r.w.cols.keys()) if (k.startsWith("warm_start/")) set.add(k);
      }
      return [...set].sort();
    }
    refresh() {
      const keys = this.keys();
      this.list.replaceChildren();
      for (const k of keys) {
        const s = runs[0].series(k), v = s.y.length ? s.y[s.y.length - 1] : NaN;
        const b = el("button", { "data-key": k, class: state.pinned.has(k) ? "on" : "" }, el("span", {}, k), el("span", { class: "v" }, isPct(k) ? pct(v) : num(v)));
        b.addEventListener("click", () => this.toggle(k, b));
        this.list.append(el("li", {}, b));
      }
      this.filter();
    }
    toggle(k, b) {
      if (state.pinned.has(k)) {
        state.pinned.get(k).fig.remove();
        state.pinned.delete(k);
        b.classList.remove("on");
        return;
      }
      const c = new Chart({ title: k, keys: [k], kind: k.startsWith("eval/") ? "eval" : "line" });
      state.pinned.set(k, c);
      this.grid.append(c.fig);
      c.draw();
      b.classList.add("on");
    }
    filter() {
      const terms = this.search.value.toLowerCase().split(/\s+/).filter(Boolean);
      let n = 0;
      for (const li of this.list.children) {
        const k = li.firstChild.dataset.key.toLowerCase(), show = terms.every((t) => k.includes(t));
        li.style.display = show ? "" : "none";
        if (show) n++;
      }
      this.count.textContent = `${n} of ${this.list.children.length} keys`;
    }
  }

  // ---- page
  const page = document.getElementById("page");
  const headBox = el("header", { id: "headline" });
  const status = el("div", { class: "muted", id: "live-status" });
  const smoothing = el("input", { type: "range", id: "smoothing", min: "0", max: "0.99", step: "0.01", value: String(state.smooth) });
  const smoothOut = el("output", { id: "smoothing-value" }, state.smooth.toFixed(2));
  const legend = el("span", { class: "legend" });
  runs.forEach((r) => legend.append(el("span", { style: "margin-right:12px" }, el("i", { style: "background:" + r.color }), r.name)));
  const chartGrid = el("div", { class: "grid", id: "charts" });
  const timeBox = el("div"), slowBox = el("div");
  stepBox = el("div", { class: "details", id: "step-details", style: "display:none" });
  const tpsBox = el("div");
  page.append(headBox);
  if (D.live) page.append(status);
  page.append(el("h2", {}, "Curves"),
    el("div", { class: "controls" }, el("label", {}, "smoothing ", smoothing, " ", smoothOut), el("span", {}, "raw values faint, exponential moving average solid; x: step (warm-start steps before 0)"), multi ? legend : ""),
    chartGrid,
    el("h2", {}, "Where the time goes"),
    el("div", { class: "grid" }, timeBox, tpsBox, el("div", {}, slowBox, stepBox)),
    el("h2", {}, "Samples"));
  const samplesBox = el("div", { id: "samples" });
  page.append(samplesBox, el("h2", {}, "All metrics"));
  const allBox = el("div", { id: "all-metrics" });
  page.append(allBox);

  const timeChart = new TimeChart(timeBox);
  if (multi) {
    const sel = el("select", { id: "time-run" });
    runs.forEach((r, i) => sel.append(el("option", { value: String(i) }, r.name)));
    sel.addEventListener("change", () => { timeChart.ri = +sel.value; timeChart.draw(); });
    timeBox.prepend(el("div", { class: "controls" }, el("label", {}, "run ", sel)));
  }
  const tpsChart = new Chart({ title: "Generation tokens/s", keys: [TPS], kind: "line" });
  tpsBox.append(tpsChart.fig);
  const samples = new Samples(samplesBox);
  const all = new AllMetrics(allBox);
  let panelSig = "";

  function drawCharts() {
    for (const c of state.charts) c.draw();
    for (const c of state.pinned.values()) c.draw();
    tpsChart.draw();
  }
  function refresh() {
    renderHeadline(headBox);
    const panels = headPanels(), sig = JSON.stringify(panels);
    if (sig !== panelSig) {
      panelSig = sig;
      state.charts = panels.map((p) => new Chart(p));
      chartGrid.replaceChildren(...state.charts.map((c) => c.fig));
    }
    drawCharts();
    timeChart.draw();
    slowest(slowBox);
    samples.refresh();
    all.refresh();
  }

  smoothing.addEventListener("input", () => {
    state.smooth = Math.min(Math.max(+smoothing.value, 0), 0.99);
    smoothOut.textContent = state.smooth.toFixed(2);
    drawCharts();
    history.replaceState(null, "", "#smooth=" + state.smooth.toFixed(2));
  });

  // ---- live: ask the server for the lines after those the page has
  async function tail(r, what) {
    const res = await fetch(`${r.base}${what}?offset=${what === "metrics" ? r.mOff : r.wOff}`, { cache: "no-store" });
    if (res.status === 409) { location.reload(); return 0; }
    if (!res.ok) throw new Error(`${what}: HTTP ${res.status}`);
    const next = +res.headers.get("X-Next-Offset"), text = await res.text();
    if (what === "metrics") r.mOff = next; else r.wOff = next;
    return appendLines(what === "metrics" ? r.m : r.w, text);
  }
  async function poll() {
    let changed = 0;
    try {
      for (const r of runs) {
        const added = await tail(r, "metrics");
        changed += added + await tail(r, "warm");
        if (added) {
          const after = Math.max(-1, ...r.samples.keys());
          const res = await fetch(`${r.base}samples?after=${after}`, { cache: "no-store" });
          if (res.ok) for (const s of await res.json()) r.samples.set(s.step, s.table);
        }
      }
      status.textContent = "live: updated " + new Date().toLocaleTimeString() + ", every " + D.poll_ms / 1000 + " s";
    } catch (e) {
      status.textContent = "live updates paused (" + e.message + "): the run's process has ended, or is not reachable; report.html in the run directory has the final page";
    }
    if (changed) refresh();
    setTimeout(poll, D.poll_ms);
  }

  refresh();
  const hp = new URLSearchParams(location.hash.slice(1));
  if (hp.has("smooth")) {
    smoothing.value = hp.get("smooth");
    smoothing.dispatchEvent(new Event("input"));
  }
  // How long the script took, and the page from navigation to drawn (for docs/BENCHMARKS.md).
  document.body.dataset.scriptMs = (performance.now() - started).toFixed(1);
  document.body.dataset.loadMs = performance.now().toFixed(1);
  if (D.live) setTimeout(poll, D.poll_ms);
})();
