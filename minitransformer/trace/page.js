// The trace page: one training step, op by op. Reads the JSON in #trace-data (minitransformer/trace/page.py).
// Keys: → / j / n next, ← / k / p previous, Home / End, r jumps between a forward and the backward that reverses it.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const meta = data.meta, steps = data.steps, N = steps.length, cmp = data.compare || null;
  const app = document.getElementById("app");
  let now = 0;
  const chosen = {};                       // value key -> chosen slice index

  // ---------------------------------------------------------------- small helpers
  function el(tag, attrs, ...kids) {
    const e = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
                                     : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "html") e.innerHTML = v;
      else if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v);
    }
    for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined && kid !== false)
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return e;
  }
  function fmt(x) {
    if (typeof x !== "number") return String(x);
    if (!isFinite(x)) return String(x);
    const a = Math.abs(x);
    if (a === 0) return "0";
    if (a >= 1e4 || a < 1e-3) return x.toExponential(2).replace("e", "e");
    const s = x.toPrecision(3);
    return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
  }
  function shape(s) { return "(" + (s || []).join(", ") + ((s || []).length === 1 ? ",)" : ")"); }
  function tokenText(t) { return t === " " ? "␣" : t === "\n" ? "↵" : t; }
  function half(h) {                       // IEEE float16 bits -> number
    const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * Math.pow(2, -14) * (f / 1024);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * Math.pow(2, e - 15) * (1 + f / 1024);
  }
  function decode(sl) {                     // [index, rows, cols, scale, base64] -> {index, rows, cols, v}
    const bin = atob(sl[4]), n = sl[1] * sl[2], v = new Float64Array(n);
    for (let i = 0; i < n; i++) v[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) * sl[3];
    return { index: sl[0], rows: sl[1], cols: sl[2], v };
  }
  function opName(s) { return s.op; }
  function partner(i) { const s = steps[i]; return s.reverses ?? s.reversed_by ?? null; }
  function yours(i) { return !!(cmp && cmp.yours && cmp.yours.includes(i)); }
  function stepLink(i, text) {
    return el("span", { class: "link", on: { click: () => go(i) } }, text || `step ${i + 1}`);
  }
  function sourceValue(v) {                // an argument that IS an earlier result: that result
    if (!v.source) return null;
    const s = steps[v.source[0]];
    return s ? (s.results.find(r => r.name === v.source[1]) || null) : null;
  }
  function slicesOf(v) {
    if (v.slices) return v.slices;
    const src = v.source && v.source[2] ? sourceValue(v) : null;
    return src ? slicesOf(src) : null;
  }

  // ---------------------------------------------------------------- token axes
  function axes(step, v, rows, cols) {
    const tok = meta.tokens || null, src = meta.source_tokens || null, sc = step.scope || "";
    const inEncoder = src && sc.startsWith("encoder.");
    const memory = src && sc.includes("cross") && (/^d?(k|v|k_scaled|memory)$/.test(v.name) ||
      step.args.some(a => /W_kv/.test(a.param || "")) && /^d?[xy]$/.test(v.name));   // the encoder's side
    const queries = inEncoder || memory ? src : tok;
    let rowLabels = null, colLabels = null;
    if (queries && rows === queries.length) rowLabels = queries;
    else if (src && rows === src.length) rowLabels = src;
    else if (meta.family === "vit" && tok && rows === tok.length - 1) rowLabels = tok.slice(1);   // patches, no [CLS]
    const attention = /attention|softmax|mask/.test(step.op) || (step.parent !== null && /attention/.test(steps[step.parent].op))
      || v.name === "probs" || v.name === "mask";
    if (attention && (v.shape || []).length >= 2) {
      const keys = src && (inEncoder || sc.includes("cross")) ? src : tok;
      if (keys && cols === keys.length) colLabels = keys;
    }
    const vocab = meta.vocab || null;          // logits over the vocabulary (or the classes), the token table
    if (vocab) {
      const table = /tok\.W/.test(v.param || "") || (v.grad_of && /tok\.W/.test(gradOfParam(v) || ""));
      const transposed = /ᵀ/.test(v.param || "") || (v.grad_of && /ᵀ/.test(gradOfParam(v) || ""));
      const logits = /(^|\.)(head|decoder|loss)$/.test(sc) || /cross_entropy|log_softmax/.test(step.op);
      if (cols === vocab.length && (logits && !table || table && transposed)) colLabels = vocab;
      if (rows === vocab.length && table && !transposed) rowLabels = vocab;
    }
    return { rowLabels, colLabels };
  }

  function gradOfParam(v) {                 // the parameter a gradient belongs to, if any
    const s = steps[v.grad_of[0]], f = s && s.args.find(a => a.name === v.grad_of[1]);
    return f ? f.param : null;
  }

  // ---------------------------------------------------------------- heatmaps
  const tip = el("div", { id: "tip" });
  function colour(x, lo, hi, signed) {
    if (!isFinite(x)) return "#d5d9e0";          // -inf: a masked score
    if (signed) {
      const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1, t = Math.min(1, Math.abs(x) / m) ** 0.75;
      const end = x < 0 ? [33, 102, 172] : [178, 24, 43];
      return `rgb(${[0, 1, 2].map(k => Math.round(248 + (end[k] - 248) * t)).join(",")})`;
    }
    const t = hi > lo ? Math.min(1, (x - lo) / (hi - lo)) ** 0.55 : 0;
    const end = [20, 54, 120];
    return `rgb(${[0, 1, 2].map(k => Math.round(250 + (end[k] - 250) * t)).join(",")})`;
  }
  function heatmap(sl, step, v, opts) {
    // A canvas (one element, however many cells): cells, then the token labels on the axes.
    const d = decode(sl), { rowLabels, colLabels } = axes(step, v, d.rows, d.cols);
    let lo = Infinity, hi = -Infinity;
    for (const x of d.v) if (isFinite(x)) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
    const signed = lo < 0;
    const maxW = (opts && opts.width) || 270, maxH = (opts && opts.height) || 300;
    const cell = Math.max(2, Math.min(13, Math.floor(maxW / d.cols), Math.floor(maxH / d.rows)));
    const labels = cell >= 8, font = Math.min(10, cell + 1);
    const long = colLabels && colLabels.some(t => tokenText(t).length > 2);
    const left = rowLabels && labels ? 8 + 6.2 * Math.max(...rowLabels.map(t => tokenText(t).length)) : 0;
    const top = colLabels && labels ? (long ? 8 + 6.2 * Math.max(...colLabels.map(t => tokenText(t).length)) : 14) : 0;
    const W = Math.ceil(left + d.cols * cell), H = Math.ceil(top + d.rows * cell), k = window.devicePixelRatio || 1;
    const canvas = el("canvas", { class: "hm", width: Math.ceil(W * k), height: Math.ceil(H * k) });
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    const g = canvas.getContext("2d");
    g.scale(k, k);
    for (let r = 0; r < d.rows; r++) for (let c = 0; c < d.cols; c++) {
      g.fillStyle = colour(d.v[r * d.cols + c], lo, hi, signed);
      g.fillRect(left + c * cell, top + r * cell, cell, cell);
    }
    g.fillStyle = "#4a5363"; g.font = font + "px " + getComputedStyle(document.body).getPropertyValue("--mono");
    if (rowLabels && labels) {
      g.textAlign = "right";
      rowLabels.forEach((t, r) => g.fillText(tokenText(t), left - 4, top + r * cell + cell / 2 + 3.5));
    }
    if (colLabels && labels) colLabels.forEach((t, c) => {
      const x = left + c * cell + cell / 2;
      g.save();
      if (long) { g.translate(x + 3.5, top - 4); g.rotate(-Math.PI / 2); g.textAlign = "left"; g.fillText(tokenText(t), 0, 0); }
      else { g.textAlign = "center"; g.fillText(tokenText(t), x, top - 4); }
      g.restore();
    });
    canvas.dataset.labels = [rowLabels && labels ? rowLabels.length : 0, colLabels && labels ? colLabels.length : 0].join(",");
    canvas.addEventListener("mousemove", ev => {
      const box = canvas.getBoundingClientRect();
      const c = Math.floor((ev.clientX - box.left - left) / cell), r = Math.floor((ev.clientY - box.top - top) / cell);
      if (r < 0 || c < 0 || r >= d.rows || c >= d.cols) { tip.style.display = "none"; return; }
      const where = (rowLabels ? `“${tokenText(rowLabels[r])}” ` : "") + (colLabels ? `→ “${tokenText(colLabels[c])}” ` : "");
      tip.textContent = `[${[...d.index, r, c].join(", ")}] ${where}${fmt(d.v[r * d.cols + c])}`;
      tip.style.display = "block"; tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
    });
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    return canvas;
  }
  function sliceName(v, index) {
    const n = (v.shape || []).length;
    if (n === 4) return `b${index[0]} h${index[1]}`;
    return index.length ? `[${index.join(",")}]` : "";
  }
  function preview(v, step, key, opts) {
    const sls = slicesOf(v);
    if (!sls || !sls.length) return null;
    const pick = Math.min(chosen[key] || 0, sls.length - 1);
    const box = el("div", {});
    if (sls.length > 1) box.append(el("div", { class: "chips" }, sls.map((sl, i) =>
      el("span", { class: i === pick ? "on" : null, on: { click: () => { chosen[key] = i; render(); } } }, sliceName(v, sl[0])))));
    box.append(heatmap(sls[pick], step, v, opts));
    const sl = sls[pick], s = v.shape || [];
    const full = s.length >= 2 ? [s[s.length - 2], s[s.length - 1]] : [1, s[0] || 1];
    if (s.length >= 2 && (sl[1] < full[0] || sl[2] < full[1]) || s.length === 1 && sl[2] < s[0])
      box.append(el("div", { class: "crop" }, `showing ${sl[1]} × ${sl[2]} of ${full[0]} × ${full[1]}`));
    return box;
  }

  // ---------------------------------------------------------------- a value
  function describe(v, step) {
    if (v.param) return el("span", { class: "param" }, "parameter " + v.param);
    if (v.source) {
      const [i, name, same] = v.source, s = steps[i];
      if (name === "cache") return el("span", { class: "what" }, "the cache of ", stepLink(i, `step ${i + 1}`), ` (${s.op})`);
      const how = { view: ", a view of it", changed: ", changed in place since (a residual add)" }[v.source[3]] || "";
      return el("span", { class: "what" }, same ? "= " : "from ", el("b", {}, name), " of ", stepLink(i), ` (${s.op})`, how);
    }
    if (v.grad_of) return el("span", { class: "what" }, "gradient of ", el("b", {}, v.grad_of[1]), " of ", stepLink(v.grad_of[0]));
    return null;
  }
  function stats(v) {
    const s = v.stats;
    if (!s) return null;
    const odd = [["neginf", "−inf (masked, grey)"], ["posinf", "+inf"], ["nan", "NaN"]].filter(([k]) => s[k])
      .map(([k, w]) => `${s[k]} ${w}`).join(" · ");
    if (s.min === undefined) return el("div", { class: "stats" }, odd || "no entries");
    return el("div", { class: "stats" }, `min ${fmt(s.min)} · mean ${fmt(s.mean)} · max ${fmt(s.max)} · std ${fmt(s.std)}` +
              (odd ? " · " + odd : ""));
  }
  function card(v, step, key, extra) {
    const c = el("div", { class: "card" + (extra && extra.cls ? " " + extra.cls : "") });
    if (extra && extra.width > 270) c.style.maxWidth = (extra.width + 80) + "px";
    if (extra && extra.width <= 200) { c.style.maxWidth = (extra.width + 30) + "px"; c.style.minWidth = "0"; }
    c.append(el("h3", {}, (extra && extra.title) || v.name, describe(v, step)));
    if (v.kind === "array" && (v.shape || []).length === 0 && v.stats && v.stats.min !== undefined) {
      c.append(el("div", { class: "meta" }, `a number, ${v.dtype}`), el("div", { class: "number" }, fmt(v.stats.min)));
    } else if (v.kind === "array" && v.ints) {
      c.append(el("div", { class: "meta" }, `${shape(v.shape)} ${v.dtype}`), idStrip(v, step));
    } else if (v.kind === "array") {
      c.append(...[el("div", { class: "meta" }, `${shape(v.shape)} ${v.dtype || ""}`), stats(v), preview(v, step, key, extra)]
        .filter(Boolean));
    } else if (v.kind === "number") {
      c.append(el("div", { class: "number" }, /^(True|False)$/.test(v.text || "") ? v.text : fmt(v.number)));
    } else if (v.kind === "same") {
      c.append(el("div", { class: "meta" }, `the argument ${v.text} itself (no copy)`));
    } else if (v.kind === "none") {
      c.append(el("div", { class: "meta" }, "None"));
    } else if (v.kind === "parts") {
      c.append(el("div", { class: "fields" }, v.fields.map((f, i) => card(f, step, key + "/" + i))));
    } else if (v.kind === "cache") {
      c.append(el("div", { class: "meta" }, v.text + (v.source ? "" : ": what the backward will need")));
      if (!v.source) c.append(el("div", { class: "fields" }, (v.fields || []).filter(f => f.kind !== "none")
        .map((f, i) => f.kind === "array" ? card(f, step, key + "/" + i, { width: 220 })
                                          : el("div", { class: "meta" }, `${f.name} = ${f.kind === "same" ? f.text : f.kind === "number" ? fmt(f.number) : f.text}`))));
    } else {
      c.append(el("div", { class: "meta" }, v.text || v.kind));
    }
    if (extra && extra.after) c.append(extra.after);
    return c;
  }

  function idStrip(v, step) {                // token ids (or targets) one by one, the token above its id
    const n = v.ints.length, src = meta.source_tokens, sc = step.scope || "";
    let labels = null;
    if (v.name === "targets" && meta.targets && meta.targets.length === n) labels = meta.targets;
    else if (src && src.length === n && (sc.startsWith("encoder.") || v.name === "src")) labels = src;
    else if (meta.tokens && meta.tokens.length === n) labels = meta.tokens;
    return el("div", { class: "ids" }, v.ints.map((id, k) => el("span", { title: labels ? `“${labels[k]}” = ${id}` : String(id) },
      el("b", {}, labels ? tokenText(labels[k]) || "·" : "·"), el("i", {}, id === -100 ? "—" : String(id)))));
  }

  // ---------------------------------------------------------------- homework: yours beside the reference
  function compared(step, v, i, role) {
    const info = cmp && cmp.steps && cmp.steps[i] && cmp.steps[i].values ? cmp.steps[i].values[role + "/" + v.name] : null;
    if (!info) return null;
    const bad = info.differs;
    const line = el("div", { class: "diff " + (bad ? "bad" : "ok") },
                    bad ? `differs from the reference: max |yours − ref| = ${fmt(info.maxdiff)}` : "matches the reference");
    if (!bad || !info.ref) return { line, parts: [] };
    const refCard = card(info.ref, step, `ref/${i}/${role}/${v.name}`, { cls: "ref", title: v.name + " (reference)", width: 180 });
    const parts = [refCard];
    if (bad && info.diff) {
      const dv = { name: "yours − reference", kind: "array", shape: v.shape, slices: info.diff };
      parts.push(card(dv, step, `diff/${i}/${role}/${v.name}`, { cls: "ref", title: "yours − reference", width: 180 }));
    }
    return { line, parts };
  }

  // ---------------------------------------------------------------- the step pane
  function valueBlock(v, step, i, role) {
    const key = `${i}/${role}/${v.name}`, c = compared(step, v, i, role);
    const opts = Object.assign(role === "result" && step.phase === "backward" || v.grad_of ? { width: 240 } : {},
                               c ? { after: c.line, title: v.name + (cmp ? " (yours)" : "") } : {},
                               c && c.parts.length ? { width: 180 } : {});
    const own = card(v, step, key, opts);
    return c && c.parts.length ? el("div", { class: "pair bad" }, own, ...c.parts) : own;
  }
  function nodes(block) {                  // a value's card, or its card and the reference's, unwrapped
    return block.classList.contains("pair") ? [...block.children] : [block];
  }
  function forwardValues(step, i) {
    const data = v => v.kind === "array" || v.kind === "parts";
    const inputs = step.args.flatMap(v => v.kind === "parts" ? v.fields : [v]).filter(v => data(v) && !v.param);
    const params = step.args.filter(v => v.param);
    const outputs = step.results.filter(v => v.kind !== "cache"), caches = step.results.filter(v => v.kind === "cache");
    const maps = caches.flatMap(c => (c.fields || []).filter(f => f.name === "probs" && f.kind === "array"));
    const out = maps.length ? [el("div", { class: "section" }, "the attention map P, row i: where query i looks (from the cache)"),
                               el("div", { class: "cards" }, maps.map(f => card(f, step, `${i}/probs`, { width: 330, height: 330, title: "P" })))]
                            : [];
    out.push(el("div", { class: "section" }, "input → output"),
                 el("div", { class: "cards" }, inputs.map(v => valueBlock(v, step, i, "arg")),
                    inputs.length ? el("span", { class: "arrow" }, "→") : null,
                    outputs.map(v => valueBlock(v, step, i, "result"))));
    if (params.length) out.push(el("div", { class: "section" }, "parameters"),
                                el("div", { class: "cards" }, params.map(v => valueBlock(v, step, i, "arg"))));
    for (const c of caches) out.push(el("div", { class: "section" }, "cache, kept for the backward"), card(c, step, `${i}/cache`));
    return out;
  }
  function backwardValues(step, i) {
    const out = [];
    const fwd = step.reverses !== null ? steps[step.reverses] : null;
    const pairs = [...step.args.filter(v => v.grad_of), ...step.results];
    out.push(el("div", { class: "section" }, fwd ? `each gradient beside the forward value of step ${step.reverses + 1} (${fwd.op})`
                                                 : "gradients"));
    const blocks = pairs.map(v => [v, valueBlock(v, step, i, step.args.includes(v) ? "arg" : "result")]);
    blocks.sort((a, b) => b[1].classList.contains("bad") - a[1].classList.contains("bad"));   // a difference first
    for (const [v, g] of blocks) {
      if (g.classList.contains("bad")) {       // homework: yours, the reference's and the difference, in one row
        out.push(el("div", { class: "pair bad" }, nodes(g).map(markGrad)));
        continue;
      }
      if (v.grad_of && fwd) {
        const f = fwd.args.concat(fwd.results).find(x => x.name === v.grad_of[1]);
        const shown = f && f.kind === "same" ? fwd.args.find(a => a.name === f.text) : f;
        if (shown) {
          out.push(el("div", { class: "pair" + (g.classList.contains("bad") ? " bad" : "") },
                      card(shown, fwd, `${v.grad_of[0]}/fwd/${shown.name}`, { title: shown.name + " (forward)", width: 240 }),
                      el("span", { class: "arrow" }, "⇢"), nodes(g).map(markGrad)));
          continue;
        }
      }
      out.push(el("div", { class: "pair" + (g.classList.contains("bad") ? " bad" : "") }, nodes(g).map(markGrad)));
    }
    const rest = step.args.filter(v => !v.grad_of && v.kind !== "cache");
    if (rest.length) out.push(el("div", { class: "section" }, "other inputs"), el("div", { class: "cards" }, rest.map(v => valueBlock(v, step, i, "arg"))));
    const cache = step.args.find(v => v.kind === "cache");
    if (cache) out.push(el("div", { class: "section" }, "cache"), el("div", {}, card(cache, step, `${i}/cache`)));
    return out;
  }
  function markGrad(node) {
    if (node.classList.contains("card") && !node.classList.contains("ref")) node.classList.add("grad");
    return node;
  }

  function equation(r) {
    // One row per equation line: its first segment, then the rest (the backward of the line on the left,
    // or a second equation) side by side; segments without math are notes.
    const box = el("div", { class: "equation" + (r.equation.length > 2 ? " small" : "") });
    const isMath = t => r.direction !== "helper" && /=|→|->|⊙|√|Σ/.test(t) && !/^\(.*\)$/.test(t);
    const two = r.equation.some(row => row.length > 1);
    box.style.gridTemplateColumns = two ? "auto auto" : "auto";
    r.equation.forEach((row, k) => {
      const cells = row.map((m, j) => isMath(r.equation_text[k][j]) ? el("div", { html: m })
                                                                     : el("div", { class: "note" }, r.equation_text[k][j]));
      box.append(cells[0]);
      if (two) box.append(el("div", { class: "rest" }, cells.slice(1)));
    });
    return box;
  }
  function shapesLine(step) {
    const arr = vs => vs.filter(v => v.kind === "array" || v.kind === "same" || v.kind === "number")
      .map(v => [el("b", {}, v.name), " ", v.kind === "array" ? shape(v.shape)
                 : v.kind === "number" ? (/^(True|False)$/.test(v.text || "") ? v.text : fmt(v.number)) : `= ${v.text}`]);
    const join = parts => parts.flatMap((p, k) => k ? [" · ", ...p] : p);
    return el("div", { class: "shapes" }, join(arr(step.args)), "  →  ", join(arr(step.results)));
  }
  function stepPane(i) {
    const step = steps[i], r = data.routines[step.op], site = data.sites[step.site];
    const head = el("div", { class: "stephead" },
      el("span", { class: "badge " + step.phase }, step.phase),
      yours(i) ? el("span", { class: "badge yours" }, "your code") : null,
      step.twin ? el("span", { class: "badge twin" }, "speed-wing twin") : null,
      el("span", { class: "op" }, step.op), el("span", { class: "scope" }, step.scope || ""));
    const links = el("div", { class: "links" }, `step ${i + 1} of ${N} · called from ${site.path}:${site.line}` +
                     (site.function ? ` in ${site.function}` : ""));
    if (step.reverses !== null) links.append(" · reverses ", stepLink(step.reverses), ` (${steps[step.reverses].op})`, " [r]");
    if (step.reversed_by !== null) links.append(" · reversed by ", stepLink(step.reversed_by), ` (${steps[step.reversed_by].op})`, " [r]");
    if (step.parent !== null) links.append(" · inside ", stepLink(step.parent), ` (${steps[step.parent].op})`);
    const kids = steps.map((s, k) => [s, k]).filter(([s]) => s.parent === i);
    if (kids.length) links.append(" · runs ", ...kids.flatMap(([s, k], n) => [n ? ", " : "", stepLink(k, `${s.op} (step ${k + 1})`)]));
    const body = [head, links, equation(r), shapesLine(step)];
    if (step.error) body.push(el("div", { class: "error" }, "raised " + step.error));
    body.push(...(step.phase === "backward" && step.reverses !== null ? backwardValues(step, i) : forwardValues(step, i)));
    body.push(el("details", { class: "doc" }, el("summary", {}, `docstring of ${step.op}`), el("pre", {}, r.doc)));
    return body;
  }

  // ---------------------------------------------------------------- code pane
  function codeBox(title, lines, hit) {
    return el("div", { class: "src" }, el("div", { class: "title" }, title),
      el("pre", {}, lines.map(([n, h]) => el("span", { class: "ln" + (n === hit ? " hit" : ""), html: `<i>${n}</i>${h || " "}` }))));
  }
  function codePane(i) {
    const step = steps[i], r = data.routines[step.op], site = data.sites[step.site];
    const parts = [el("h2", {}, "the call")];
    if (site.lines.length) parts.push(codeBox(`${site.path}:${site.line}  ${site.function}`, site.lines, site.line));
    else parts.push(el("div", { class: "src" }, el("div", { class: "title" }, `${site.path}:${site.line} (no source)`)));
    parts.push(el("h2", {}, "the routine"), codeBox(`${r.path}:${r.line}  ${r.op}`, r.code, r.line));
    return parts;
  }

  // ---------------------------------------------------------------- outline and timeline
  const rows = [];                         // outline rows: {steps: [forward index, backward index]}
  function outline() {
    const box = el("div", { class: "outline" });
    let last = [];
    steps.forEach((s, i) => {
      if (s.parent !== null || s.phase !== "forward") return;
      const parts = (s.scope || "").split(".").filter(Boolean);
      let k = 0;
      while (k < parts.length - 1 && k < last.length && parts[k] === last[k]) k++;
      for (let d = k; d < parts.length - 1; d++)
        box.append(el("div", { class: "group", style: `padding-left:${10 + 10 * d}px` }, parts[d]));
      last = parts.slice(0, -1);
      const leaf = parts.length ? parts[parts.length - 1] : "";
      const row = el("div", { class: "row" + (s.dir === "helper" ? " helper" : ""), style: `padding-left:${10 + 10 * Math.max(0, parts.length - 1)}px`,
                              on: { click: () => go(i) } },
        el("span", { class: "op", title: `${s.scope} ${s.op}` },      // "sublayer" says nothing the group does not
           (leaf && leaf !== "sublayer" ? leaf + " · " : "") + s.op.replace(/_forward$/, "")),
        yours(i) || (s.reversed_by !== null && yours(s.reversed_by)) ? el("span", { class: "mine", title: "your code" }, "●") : null,
        el("span", { class: "pill f" }, String(i + 1)),
        s.reversed_by !== null ? el("span", { class: "pill b", on: { click: ev => { ev.stopPropagation(); go(s.reversed_by); } } },
                                    String(s.reversed_by + 1)) : null);
      rows.push({ el: row, owns: [i, s.reversed_by] });
      box.append(row);
    });
    return box;
  }
  function rowOf(i) {
    let k = i;
    while (steps[k].parent !== null) k = steps[k].parent;
    const fwd = steps[k].phase === "backward" ? (steps[k].reverses ?? null) : k;
    if (fwd === null) {                      // a helper of the backward: the row of the nearest earlier backward pair
      for (let j = k; j >= 0; j--) if (steps[j].reverses !== null && steps[j].parent === null) return rowOf(j);
      return null;
    }
    return rows.find(r => r.owns[0] === fwd) || null;
  }
  function timeline() {
    const bar = el("div", { class: "timeline", title: "every step: forward in blue, backward in orange; click to jump" });
    steps.forEach((s, i) => bar.append(el("i", {
      class: [s.phase, s.dir !== "helper" ? "routine" : "", s.parent !== null ? "nested" : "", yours(i) ? "yours" : "",
              cmp && cmp.first === i ? "differs" : ""].join(" "),
      title: `${i + 1} ${s.op} ${s.scope}`, on: { click: () => go(i) } })));
    return bar;
  }

  // ---------------------------------------------------------------- the frame
  function header() {
    const h = el("header", {});
    const family = { gpt: "a GPT", encoder: "a BERT-like encoder", seq2seq: "an encoder-decoder", vit: "a Vision Transformer" }[meta.family] || "a model";
    h.append(el("h1", {}, `One training step of ${family}, operation by operation`));
    const c = meta.config || {};
    h.append(el("div", { class: "sub" },
      `${meta.model || ""}: ${c.n_layer ?? "?"} layers, ${c.n_head ?? "?"} heads, d_model ${c.d_model ?? "?"}, ` +
      `${(meta.parameters || 0).toLocaleString("en")} parameters, ${meta.dtype || ""} · task: ${meta.task || ""} · ` +
      `loss ${meta.loss !== undefined ? fmt(meta.loss) : "—"} · ${N} steps` + (meta.crop ? ` · previews cropped to ${meta.crop[0]} × ${meta.crop[1]}` : "")));
    if (meta.tokens) {
      const masked = t => t === "[MASK]";
      h.append(el("div", { class: "tokens", title: "the input, one token a box" },
        meta.source_tokens ? [el("b", {}, "source "), meta.source_tokens.map(t => el("span", {}, tokenText(t))), el("b", {}, "  decoder input ")] : [],
        meta.tokens.map(t => el("span", { class: masked(t) ? "masked" : null }, tokenText(t)))));
    }
    if (meta.error && !cmp) {                  // in a homework copy the comparison's banner says it
      const at = steps.findIndex(s => s.error);
      h.append(el("div", { class: "banner bad" }, `The step stopped: ${meta.error}`, at >= 0 ? el("button", { on: { click: () => go(at) } }, `go to step ${at + 1}`) : null));
    }
    if (cmp) {
      const cls = cmp.first === null || cmp.first === undefined ? (cmp.complete ? "good" : "note") : "bad";
      h.append(el("div", { class: "banner " + cls }, cmp.message,
        cmp.first !== null && cmp.first !== undefined ? el("button", { on: { click: () => go(cmp.first) } }, `go to step ${cmp.first + 1}`) : null));
    }
    return h;
  }
  let nav, aside, main, code, count, prev, next, swap, bar;
  function build() {
    app.textContent = "";
    prev = el("button", { on: { click: () => go(now - 1) }, title: "previous step (← or k)" }, "◀ previous");
    next = el("button", { on: { click: () => go(now + 1) }, title: "next step (→ or j)" }, "next ▶");
    swap = el("button", { on: { click: () => { const p = partner(now); if (p !== null) go(p); } }, title: "the forward and its backward (r)" }, "⇄ forward / backward");
    count = el("span", { class: "count" });
    bar = timeline();
    nav = el("nav", {}, prev, next, swap, count,
             el("span", { class: "keys" }, el("kbd", {}, "←"), " ", el("kbd", {}, "→"), " step · ", el("kbd", {}, "r"),
                " forward ⇄ backward · hover a cell for its value · below: every step, ",
                el("span", { class: "swatch f" }), " forward ", el("span", { class: "swatch b" }), " backward, pale: helpers"), bar);
    aside = el("aside", {}, el("h2", {}, "the model"), outline());
    main = el("main", { tabindex: "-1" });
    code = el("section", { class: "code" });
    app.append(header(), nav, aside, main, code, tip);
  }
  function render() {
    const step = steps[now];
    main.replaceChildren(...stepPane(now));
    code.replaceChildren(...codePane(now));
    count.textContent = `${step.phase} · step ${now + 1} / ${N}`;
    prev.disabled = now === 0; next.disabled = now === N - 1; swap.disabled = partner(now) === null;
    [...bar.children].forEach((c, k) => c.classList.toggle("now", k === now));
    rows.forEach(r => r.el.classList.remove("now", "backward"));
    const r = rowOf(now);
    if (r) { r.el.classList.add("now"); if (step.phase === "backward") r.el.classList.add("backward");
             r.el.scrollIntoView({ block: "nearest" }); }
    history.replaceState(null, "", "#step-" + (now + 1));
    document.title = `${now + 1}/${N} ${step.op} · ${step.scope}`;
  }
  function go(i) {
    if (i < 0 || i >= N || i === null) return;
    now = i; render(); main.scrollTop = 0;
  }
  document.addEventListener("keydown", ev => {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const k = ev.key;
    if (k === "ArrowRight" || k === "j" || k === "n") go(now + 1);
    else if (k === "ArrowLeft" || k === "k" || k === "p") go(now - 1);
    else if (k === "Home") go(0);
    else if (k === "End") go(N - 1);
    else if (k === "r") { const p = partner(now); if (p !== null) go(p); }
    else return;
    ev.preventDefault();
  });
  build();
  const m = /#step-(\d+)/.exec(location.hash);
  now = m ? Math.min(N - 1, Math.max(0, parseInt(m[1], 10) - 1)) : 0;
  if (N) render(); else main.append(el("div", { class: "error" }, "The trace holds no step: " + (meta.error || "nothing ran")));
})();
