// pyeino dev page, the pictures: an agent's graph (nodes and edges from GET /agents/{name}/graph) laid out in layers
// by this file (no layout library), and the tree of agents. Plain SVG; app.js highlights nodes by data-node/data-agent.
"use strict";
(() => {
  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
    for (const c of children) node.append(c);
    return node;
  }

  // ---------------------------------------------------------------- drawing: layered graph, tree of agents
  const textWidth = (s) => [...String(s)].reduce((w, ch) => w + (ch.charCodeAt(0) > 0x2e7f ? 13 : 7), 0);

  function layered(graph) {
    const ids = graph.nodes.map((n) => n.id);
    const out = new Map(ids.map((id) => [id, []]));
    const edges = graph.edges.filter((e) => out.has(e.from) && out.has(e.to));
    for (const e of edges) out.get(e.from).push(e);
    // edges closing a cycle (found by a depth-first walk from start) are drawn as back edges, not ranked
    const seen = new Map();
    const back = new Set();
    const visit = (id) => {
      seen.set(id, 1);
      for (const e of out.get(id)) {
        const s = seen.get(e.to);
        if (s === 1) back.add(e); else if (!s) visit(e.to);
      }
      seen.set(id, 2);
    };
    if (out.has("start")) visit("start");
    for (const id of ids) if (!seen.get(id)) visit(id);
    const rank = new Map(ids.map((id) => [id, 0]));
    const indegree = new Map(ids.map((id) => [id, 0]));
    for (const e of edges) if (!back.has(e)) indegree.set(e.to, indegree.get(e.to) + 1);
    const queue = ids.filter((id) => indegree.get(id) === 0);
    while (queue.length) {
      const id = queue.shift();
      for (const e of out.get(id)) {
        if (back.has(e)) continue;
        rank.set(e.to, Math.max(rank.get(e.to), rank.get(id) + 1));
        indegree.set(e.to, indegree.get(e.to) - 1);
        if (indegree.get(e.to) === 0) queue.push(e.to);
      }
    }
    const layers = [];
    for (const id of ids) (layers[rank.get(id)] ||= []).push(id);
    // one barycentre sweep: order each layer by the mean position of its predecessors
    const order = new Map();
    layers.forEach((layer, r) => {
      if (r > 0) {
        const score = (id) => {
          const preds = edges.filter((e) => e.to === id && !back.has(e) && order.has(e.from)).map((e) => order.get(e.from));
          return preds.length ? preds.reduce((a, b) => a + b, 0) / preds.length : Infinity;
        };
        layer.sort((a, b) => score(a) - score(b));
      }
      layer.forEach((id, i) => order.set(id, i));
    });
    const byId = new Map(graph.nodes.map((n) => [n.id, n]));
    const size = new Map(graph.nodes.map((n) => {
      const round = n.kind === "start" || n.kind === "end";
      return [n.id, { w: Math.max(round ? 64 : 96, textWidth(n.label) + 24, round ? 0 : textWidth(n.kind) + 20), h: round ? 26 : 38 }];
    }));
    const gapX = 28, gapY = 24, pad = 12;
    const widths = layers.map((l) => (l || []).reduce((w, id) => w + size.get(id).w, 0) + gapX * Math.max(0, (l || []).length - 1));
    const width = Math.max(...widths, 120) + pad * 2 + 120;
    const pos = new Map();
    let y = pad;
    for (let r = 0; r < layers.length; r++) {
      const layer = layers[r] || [];
      let x = (width - widths[r]) / 2;
      const h = Math.max(...layer.map((id) => size.get(id).h), 0);
      for (const id of layer) {
        const s = size.get(id);
        pos.set(id, { x, y: y + (h - s.h) / 2, w: s.w, h: s.h, node: byId.get(id) });
        x += s.w + gapX;
      }
      y += h + gapY;
    }
    return { pos, edges, back, rank, width, height: y - gapY + pad };
  }

  function arrowDefs(id) {
    return svg("defs", {}, svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z" })));
  }

  function drawGraph(graph, label) {
    const { pos, edges, back, rank, width, height } = layered(graph);
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": label, "data-graph": "" });
    root.append(svg("title", {}, label), arrowDefs("arrow-g"));
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      let d;
      if (back.has(e)) {
        // a back edge: out of the source's right side, up around, into the target's right side
        const sx = a.x + a.w, sy = a.y + a.h / 2, tx = b.x + b.w, ty = b.y + b.h / 2;
        const bulge = Math.max(sx, tx) + 40;
        d = `M${sx},${sy} C${bulge},${sy} ${bulge},${ty} ${tx + 2},${ty}`;
      } else if (rank.get(e.to) - rank.get(e.from) > 1) {
        // an edge skipping layers: around the left of the layers between, not through their nodes
        const sx = a.x, sy = a.y + a.h / 2, tx = b.x - 2, ty = b.y + b.h / 2;
        const between = [...pos.values()].filter((p) => rank.get(p.node.id) > rank.get(e.from) && rank.get(p.node.id) < rank.get(e.to));
        const bulge = Math.min(sx, tx, ...between.map((p) => p.x)) - 40;
        d = `M${sx},${sy} C${bulge},${sy} ${bulge},${ty} ${tx},${ty}`;
      } else {
        const sx = a.x + a.w / 2, sy = a.y + a.h, tx = b.x + b.w / 2, ty = b.y - 2, my = (sy + ty) / 2;
        d = `M${sx},${sy} C${sx},${my} ${tx},${my} ${tx},${ty}`;
      }
      root.append(svg("path", { d, class: `edge ${e.kind}`, "marker-end": "url(#arrow-g)", "data-from": e.from, "data-to": e.to }));
    }
    for (const [id, p] of pos) {
      const n = p.node;
      const round = n.kind === "start" || n.kind === "end";
      const g = svg("g", { class: `node kind-${n.kind}`, "data-node": id, "data-kind": n.kind, transform: `translate(${p.x},${p.y})` },
        svg("title", {}, `${n.label} (${n.kind})`),
        svg("rect", { width: p.w, height: p.h, rx: round ? 14 : 6 }));
      if (round) g.append(svg("text", { x: p.w / 2, y: 17, "text-anchor": "middle" }, n.label));
      else {
        g.append(svg("text", { x: p.w / 2, y: 16, "text-anchor": "middle" }, n.label));
        g.append(svg("text", { x: p.w / 2, y: 30, "text-anchor": "middle", class: "kind" }, n.kind));
      }
      root.append(g);
    }
    return root;
  }

  function drawTree(tree) {
    // a tidy top-down tree: leaves take consecutive slots, a parent sits over the middle of its children
    const nodes = [];
    let slot = 0;
    const place = (t, depth, parent) => {
      const n = { t, depth, parent, w: Math.max(textWidth(t.name), textWidth(t.kind)) + 24 };
      nodes.push(n);
      const kids = t.children.map((c) => place(c, depth + 1, n));
      n.slot = kids.length ? (kids[0].slot + kids[kids.length - 1].slot) / 2 : slot++;
      return n;
    };
    place(tree, 0, null);
    const colW = Math.max(...nodes.map((n) => n.w)) + 16, rowH = 70, pad = 16;
    const width = slot * colW + pad * 2, height = (Math.max(...nodes.map((n) => n.depth)) + 1) * rowH + pad;
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "tree of agents", "data-tree": "" });
    root.append(svg("title", {}, "tree of agents"), arrowDefs("arrow-t"));
    const cx = (n) => pad + n.slot * colW + colW / 2;
    for (const n of nodes) {
      if (!n.parent) continue;
      const x1 = cx(n.parent), y1 = pad + n.parent.depth * rowH + 42, x2 = cx(n), y2 = pad + n.depth * rowH - 2;
      root.append(svg("path", { d: `M${x1},${y1} C${x1},${(y1 + y2) / 2} ${x2},${(y1 + y2) / 2} ${x2},${y2}`,
        class: `edge ${n.t.via === "tool" ? "branch" : ""}`, "marker-end": "url(#arrow-t)" }));
    }
    for (const n of nodes) {
      const x = cx(n) - n.w / 2, y = pad + n.depth * rowH;
      root.append(svg("g", { class: "node", "data-agent": n.t.name, transform: `translate(${x},${y})` },
        svg("title", {}, `${n.t.name}: ${n.t.description || n.t.kind}${n.t.via === "tool" ? " (agent tool)" : ""}`),
        svg("rect", { width: n.w, height: 42, rx: 6 }),
        svg("text", { x: n.w / 2, y: 17, "text-anchor": "middle" }, n.t.name),
        svg("text", { x: n.w / 2, y: 33, "text-anchor": "middle", class: "kind" }, n.t.via === "tool" ? `${n.t.kind} · tool` : n.t.kind)));
    }
    return root;
  }

  window.pyeinoDev = { ...(window.pyeinoDev || {}), drawGraph, drawTree };
})();
