"""``mur trace view --html FILE``: one self-contained page of a tree (spec/trace.md "The page").

The page holds its data (``window.MURMUR_TREE``, the model as compact JSON) and the script
that draws it; it loads nothing (no network fetch, no CDN, no web font). It draws:

* **the graph** (``svg#graph``): one ``g.node`` per session (``data-kind="session"``) and per
  formation, coloured by how it ended; one ``path.edge`` per hop (``data-kind`` ``member``,
  ``call``, ``delegation``, ``link``); a refused hop is dashed red and ends at a
  ``data-kind="refused"`` node naming what was refused;
* **the timeline** (``#timeline``): one ``.lane`` per session in lineage order, a ``.span`` per
  task, model call, tool call, shell step, member call, delegation and teardown, tokens and
  times on hover (``title``);
* **the summary** (``#summary``): wall time, tokens by node, refusals, what teardown killed.

When it has drawn, ``body`` carries ``data-drawn="1"``, ``data-draw-ms`` (the script's own
time) and ``data-drawn-at-ms`` (from the start of navigation: reading the file, parsing and
drawing); an error while drawing is shown on the page and kept in ``data-errors``.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.observe.summary import duration, grouped
from murmur.observe.tree import TreeModel

KINDS = ("session", "task", "model", "tool", "shell", "call", "delegation", "refusal", "link", "teardown")


def page_data(m: TreeModel) -> dict[str, Any]:
    """The page's data: nodes, edges, and spans as compact rows (``[kind index, node index,
    offset ms, duration ms, label, status, input tokens, output tokens]``)."""
    index = {n.id: i for i, n in enumerate(m.nodes)}
    t0 = m.start_ms
    return {
        "root": m.root,
        "traceIds": list(m.trace_ids),
        "wallMs": m.wall_ms,
        "startMs": t0,
        "kinds": list(KINDS),
        "nodes": [{"id": n.id, "kind": n.kind, "parent": n.parent, "depth": n.depth, "capsule": n.capsule,
                   "role": n.role, "member": n.member, "status": n.status, "startMs": n.start_ms - t0,
                   "durMs": max(0, n.end_ms - n.start_ms), "inTok": n.input_tokens, "outTok": n.output_tokens,
                   "killed": n.killed, "teardown": n.teardown} for n in m.nodes],
        "edges": [{"src": e.src, "dst": e.dst, "kind": e.kind, "refused": e.refused, "label": e.label,
                   "count": e.count} for e in m.edges],
        "spans": [[KINDS.index(s.kind), index.get(s.session, -1), s.start_ms - t0, s.duration_ms, s.label,
                   s.status, s.input_tokens, s.output_tokens] for s in m.spans if s.kind != "session"],
        "refusals": list(m.refusals),
    }


def _json_for_script(data: object) -> str:
    """JSON safe inside ``<script>``: ``<``, ``>``, ``&`` and the line separators escaped."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(a, b)
    return text


def render(m: TreeModel) -> str:
    """The whole page as text."""
    sessions = m.sessions
    title = f"murmur trace: {m.root} ({len(sessions)} sessions, {duration(m.wall_ms)})"
    tokens = sum(n.input_tokens + n.output_tokens for n in sessions)
    head = (f"{html.escape(m.root)} · {len(sessions)} session{'s' if len(sessions) != 1 else ''} · wall "
            f"{duration(m.wall_ms)} · {grouped(tokens)} tokens · trace {html.escape(', '.join(m.trace_ids))}")
    return (_TEMPLATE.replace("@@TITLE@@", html.escape(title)).replace("@@HEAD@@", head)
            .replace("@@DATA@@", _json_for_script(page_data(m))))


def write(m: TreeModel, path: Path) -> Path:
    """Write the page to ``path`` (atomically: a temporary file beside it, then renamed).

    Raises:
        DiagnosticError: ``E-TRC-009`` the file cannot be written.
    """
    text = render(m)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise DiagnosticError(error(
            "E-TRC-009", f"the page {path} cannot be written ({exc.strerror or type(exc).__name__})",
            path=str(path), hint="give --html a path in a directory you can write to",
        )) from None
    return path


_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>@@TITLE@@</title>
<style>
:root{--ok:#3c9a4a;--bad:#d23c3c;--run:#e0b400;--other:#e08a00;--end:#4a8fb8;--grey:#8a8a8a;--ink:#1d2430;--rule:#d9dde3}
*{box-sizing:border-box}body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);background:#fafbfc}
header{padding:12px 18px;border-bottom:1px solid var(--rule);background:#fff}h1{font-size:16px;margin:0 0 4px}
.sub{color:#566}main{padding:12px 18px}section{background:#fff;border:1px solid var(--rule);border-radius:6px;margin:0 0 14px;padding:10px 12px}
h2{font-size:14px;margin:0 0 8px}#graph{width:100%;display:block}
.node rect{stroke:#233;stroke-width:1;rx:6}.node text{font-size:11px;pointer-events:none}.node .id{fill:#345}
.edge{fill:none;stroke:#567;stroke-width:1.4}.edge.refused{stroke:var(--bad);stroke-dasharray:5 4}
.edge.call{stroke:#2d6fb3}.edge.delegation{stroke:#7a3fb0}.edge.link{stroke:#b05a3f}.edge.member{stroke:#9aa}
.elabel{font-size:10px;fill:#456}
#timeline{position:relative}.lane{display:grid;grid-template-columns:260px 1fr;border-top:1px solid #eef0f3;min-height:22px}
.lane .who{padding:3px 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.lane .bars{position:relative;min-height:22px}
.span{position:absolute;height:6px;border-radius:2px;min-width:2px;opacity:.9}
.span.k-task{background:#5b8def;height:14px;top:4px;opacity:.35}.span.k-model{background:#8e44ad;top:6px;height:10px}
.span.k-tool{background:#16a085;top:8px}.span.k-shell{background:#2c3e50;top:8px}.span.k-call{background:#2d6fb3;top:15px;height:4px}
.span.k-delegation{background:#7a3fb0;top:15px;height:4px}.span.k-refusal{background:var(--bad);width:3px;top:2px;height:18px}
.span.k-teardown{background:repeating-linear-gradient(45deg,#999,#999 3px,#ccc 3px,#ccc 6px);top:2px;height:18px;opacity:.6}
.span.k-link{background:#b05a3f;top:15px;height:4px}.axis{display:grid;grid-template-columns:260px 1fr;color:#667;font-size:11px}
.axis .ticks{position:relative;height:16px}.tick{position:absolute;border-left:1px solid #ccd;padding-left:2px}
table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left}th{font-weight:600;border-bottom:1px solid var(--rule)}
.num{text-align:right;font-variant-numeric:tabular-nums}.legend span{display:inline-block;margin-right:12px}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
#errors{color:var(--bad);white-space:pre-wrap}
</style></head>
<body data-drawn="0">
<header><h1>@@TITLE@@</h1><div class="sub">@@HEAD@@</div></header>
<main>
<div id="errors"></div>
<section><h2>Tree</h2><div class="legend" id="legend"></div><svg id="graph" role="img" aria-label="the tree as a graph"></svg></section>
<section><h2>Timeline</h2><div class="axis"><div></div><div class="ticks" id="ticks"></div></div><div id="timeline"></div></section>
<section id="summary"><h2>Summary</h2></section>
</main>
<script>
"use strict";
window.MURMUR_TREE = @@DATA@@;
(function () {
  var t0 = performance.now();
  var D = window.MURMUR_TREE, NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) { var e = document.createElement(tag); for (var k in attrs) e.setAttribute(k, attrs[k]); if (text != null) e.textContent = text; return e; }
  function sv(tag, attrs, text) { var e = document.createElementNS(NS, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); if (text != null) e.textContent = text; return e; }
  function dur(ms) { ms = Math.round(ms); if (ms < 1000) return ms + "ms"; if (ms < 60000) return (ms / 1000).toFixed(1) + "s"; var s = Math.floor(ms / 1000); return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s"; }
  function num(n) { return Number(n || 0).toLocaleString("en-US"); }
  function short(id) { var p = id.split("_"); return p.length === 2 && p[1].length > 8 ? p[0] + "_\u2026" + p[1].slice(-4) : id; }
  function colour(status) {
    if (status === "ok" || status === "completed") return "var(--ok)";
    if (status === "formation_ended") return "var(--end)";
    if (status === "running") return "var(--run)";
    if (["failed", "no_answer", "max_turns_reached", "spend_ceiling_reached", "crashed", "error"].indexOf(status) >= 0) return "var(--bad)";
    if (status === "uncertain" || status === "unknown") return "var(--grey)";
    return "var(--other)";
  }
  try {
    // -- the graph: one column per depth, one row per node in lineage order
    var legend = document.getElementById("legend");
    [["ok", "ended ok"], ["formation_ended", "ended by its formation"], ["failed", "failed"], ["canceled", "canceled / other"], ["running", "running"]].forEach(function (p) {
      var s = el("span"); s.appendChild(el("span", {"class": "sw", style: "background:" + colour(p[0])})); s.appendChild(document.createTextNode(p[1])); legend.appendChild(s);
    });
    var svg = document.getElementById("graph"), W = 210, H = 46, GX = 70, GY = 14, pos = {}, row = 0;
    D.nodes.forEach(function (n) { pos[n.id] = {x: 10 + n.depth * (W + GX), y: 10 + row * (H + GY)}; row++; });
    var refused = {};
    D.edges.forEach(function (e) { if (e.refused && !pos[e.dst]) { var from = pos[e.src] || {x: 10, y: 10}; var k = refused[e.src] = (refused[e.src] || 0) + 1; pos[e.dst] = {x: from.x + W + GX, y: from.y + (k - 1) * (H / 2 + 6), refused: true}; } });
    var maxX = 0, maxY = 0; for (var id in pos) { maxX = Math.max(maxX, pos[id].x + W); maxY = Math.max(maxY, pos[id].y + H); }
    svg.setAttribute("viewBox", "0 0 " + (maxX + 10) + " " + (maxY + 10)); svg.setAttribute("height", String(maxY + 10));
    var defs = sv("defs"), mk = sv("marker", {id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse"});
    mk.appendChild(sv("path", {d: "M0,0 L10,5 L0,10 z", fill: "#567"})); defs.appendChild(mk); svg.appendChild(defs);
    var edgeLayer = sv("g", {"class": "edges"}); svg.appendChild(edgeLayer);
    D.edges.forEach(function (e) {
      var a = pos[e.src], b = pos[e.dst]; if (!a || !b) return;
      var x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, same = b.x <= a.x;
      if (same) { x2 = b.x + W; }  // a sibling (a member calling a member): an arc on the right
      var bulge = 40 + Math.min(80, Math.abs(y2 - y1) / 4), mx = same ? x1 + bulge : (x1 + x2) / 2;
      var d = same ? "M" + x1 + "," + y1 + " C" + (x1 + bulge) + "," + y1 + " " + (x2 + bulge) + "," + y2 + " " + x2 + "," + y2
                   : "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2;
      var p = sv("path", {d: d, "class": "edge " + e.kind + (e.refused ? " refused" : ""), "data-kind": e.kind, "data-refused": String(e.refused), "data-src": e.src, "data-dst": e.dst, "marker-end": "url(#arrow)"});
      p.appendChild(sv("title", {}, e.kind + (e.refused ? " refused" : "") + ": " + short(e.src) + " \u2192 " + (e.dst.indexOf("refused:") === 0 ? e.dst.slice(8) : short(e.dst)) + (e.label ? " (" + e.label + ")" : "") + (e.count > 1 ? " \u00d7" + e.count : "")));
      edgeLayer.appendChild(p);
      if (e.kind !== "member") edgeLayer.appendChild(sv("text", {x: String(same ? mx - 10 : mx - 20), y: String((y1 + y2) / 2 - 3), "class": "elabel"}, e.refused ? "refused" : e.kind + (e.count > 1 ? " \u00d7" + e.count : "")));
    });
    D.nodes.forEach(function (n) {
      var p = pos[n.id], g = sv("g", {"class": "node", "data-kind": n.kind, "data-id": n.id, "data-status": n.status, transform: "translate(" + p.x + "," + p.y + ")"});
      g.appendChild(sv("rect", {width: String(W), height: String(H), fill: colour(n.status), "fill-opacity": n.kind === "formation" ? "0.25" : "0.8"}));
      g.appendChild(sv("text", {x: "8", y: "16"}, n.kind === "formation" ? "formation " + short(n.id) : (n.member ? n.member + " \u00b7 " : "") + n.capsule));
      g.appendChild(sv("text", {x: "8", y: "31", "class": "id"}, (n.kind === "formation" ? n.capsule.replace("formation ", "") : short(n.id) + " \u00b7 " + n.role) + " \u00b7 " + n.status));
      g.appendChild(sv("text", {x: "8", y: "42", "class": "id"}, dur(n.durMs) + (n.inTok + n.outTok ? " \u00b7 " + num(n.inTok + n.outTok) + " tok" : "") + (n.killed ? " \u00b7 killed" : "")));
      g.appendChild(sv("title", {}, n.id + "\n" + (n.capsule || "") + "\nstatus: " + n.status + "\nduration: " + dur(n.durMs) + "\ntokens: " + num(n.inTok) + " in, " + num(n.outTok) + " out" + (n.killed ? "\nkilled: " + n.killed : "")));
      svg.appendChild(g);
    });
    Object.keys(pos).forEach(function (id) {
      if (!pos[id].refused) return; var p = pos[id], g = sv("g", {"class": "node refused", "data-kind": "refused", "data-id": id, transform: "translate(" + p.x + "," + p.y + ")"});
      g.appendChild(sv("rect", {width: String(W), height: String(H / 2), fill: "#fff", stroke: "var(--bad)", "stroke-dasharray": "4 3"}));
      g.appendChild(sv("text", {x: "8", y: "15", fill: "var(--bad)"}, "refused: " + id.slice(8))); svg.appendChild(g);
    });
    // -- the timeline: a lane per session, in lineage order
    var tl = document.getElementById("timeline"), wall = Math.max(1, D.wallMs), lanes = {};
    var ticks = document.getElementById("ticks");
    for (var i = 0; i <= 5; i++) ticks.appendChild(el("span", {"class": "tick", style: "left:" + (i * 20) + "%"}, dur(wall * i / 5)));
    D.nodes.forEach(function (n, i) {
      if (n.kind !== "session") return;
      var lane = el("div", {"class": "lane", "data-session": n.id}), who = el("div", {"class": "who", title: n.id}, "\u00a0".repeat(2 * n.depth) + (n.member || n.capsule) + " " + short(n.id));
      var bars = el("div", {"class": "bars"});
      var s = el("div", {"class": "span k-session", style: "left:" + (100 * n.startMs / wall) + "%;width:" + Math.max(0.2, 100 * n.durMs / wall) + "%;top:0;height:22px;background:" + colour(n.status) + ";opacity:.12", title: n.capsule + ": " + n.status + ", " + dur(n.durMs)});
      bars.appendChild(s); lane.appendChild(who); lane.appendChild(bars); tl.appendChild(lane); lanes[i] = bars;
    });
    var frag = {};
    D.spans.forEach(function (r) {
      var bars = lanes[r[1]]; if (!bars) return;
      var kind = D.kinds[r[0]], tok = (r[6] == null && r[7] == null) ? "" : "\ntokens: " + num(r[6]) + " in, " + num(r[7]) + " out";
      var s = document.createElement("div"); s.className = "span k-" + kind; s.setAttribute("data-kind", kind);
      s.style.left = (100 * r[2] / wall) + "%"; if (kind !== "refusal") s.style.width = Math.max(0.15, 100 * r[3] / wall) + "%";
      s.title = r[4] + (r[5] ? " (" + r[5] + ")" : "") + "\nstart +" + dur(r[2]) + ", " + dur(r[3]) + tok;
      (frag[r[1]] = frag[r[1]] || document.createDocumentFragment()).appendChild(s);
    });
    for (var k in frag) lanes[k].appendChild(frag[k]);
    // -- the summary
    var sum = document.getElementById("summary");
    var sess = D.nodes.filter(function (n) { return n.kind === "session"; });
    var tot = sess.reduce(function (a, n) { return a + n.inTok + n.outTok; }, 0);
    sum.appendChild(el("p", {id: "wall"}, "Wall time " + dur(D.wallMs) + " \u00b7 " + sess.length + " sessions \u00b7 " + num(tot) + " tokens \u00b7 " + D.refusals.length + " refusals"));
    var tb = el("table", {id: "tokens"}), hr = el("tr"); ["session", "capsule", "status", "time", "tokens in", "tokens out"].forEach(function (h) { hr.appendChild(el("th", {}, h)); }); tb.appendChild(hr);
    sess.forEach(function (n) { var tr = el("tr", {"data-session": n.id}); [short(n.id), (n.member ? n.member + " \u00b7 " : "") + n.capsule, n.status, dur(n.durMs)].forEach(function (v) { tr.appendChild(el("td", {}, v)); }); tr.appendChild(el("td", {"class": "num"}, num(n.inTok))); tr.appendChild(el("td", {"class": "num"}, num(n.outTok))); tb.appendChild(tr); });
    sum.appendChild(el("h2", {}, "Tokens by node")); sum.appendChild(tb);
    sum.appendChild(el("h2", {}, "Refusals")); var ul = el("ul", {id: "refusals"}); if (!D.refusals.length) ul.appendChild(el("li", {}, "none")); D.refusals.forEach(function (r) { ul.appendChild(el("li", {}, r)); }); sum.appendChild(ul);
    sum.appendChild(el("h2", {}, "Teardown")); var kl = el("ul", {id: "killed"});
    var killed = sess.filter(function (n) { return n.killed; }), torn = sess.filter(function (n) { return n.teardown && !n.killed; });
    if (!killed.length) kl.appendChild(el("li", {}, "nothing was killed at teardown"));
    killed.forEach(function (n) { kl.appendChild(el("li", {"data-session": n.id}, "killed: " + short(n.id) + " " + n.capsule + " (" + n.killed + ")")); });
    torn.forEach(function (n) { kl.appendChild(el("li", {"data-session": n.id}, "wound down: " + short(n.id) + " " + n.capsule + " (" + n.status + ")")); });
    sum.appendChild(kl);
    document.body.setAttribute("data-draw-ms", String(Math.round(performance.now() - t0)));
    document.body.setAttribute("data-drawn-at-ms", String(Math.round(performance.now())));
    document.body.setAttribute("data-drawn", "1");
  } catch (err) {
    document.getElementById("errors").textContent = "the page could not be drawn: " + err;
    document.body.setAttribute("data-errors", String(err));
    throw err;
  }
})();
</script>
</body></html>
"""
