// The painter of a graph view (toporag_core.studio.graph_view): HTML tooltips, the fit to the view box,
// the 2-cells as polygons under the graph, and the labels the server placed.
// The page defines, before this script: TOPORAG_CELLS (2-cells: nodes, fill, stroke, width),
// TOPORAG_LABELS (node labels: id, lines, box, fs, always, lead), TOPORAG_EDGE_LABELS (id, text, box, fs)
// and TOPORAG_VIEW (the view box x0, y0, x1, y1, canvas units). What was drawn is published as
// window.TOPORAG_DRAWN and window.TOPORAG_DRAWN_EDGES (text, DOM box, font size on screen).
window.TOPORAG_DRAWN = [];
window.TOPORAG_DRAWN_EDGES = [];
function toporagFit(network) {
  // Fit the view box (nodes and their labels, with a margin) rather than the nodes alone, so no label
  // is cut at the panel's edge.
  var el = document.getElementById("mynetwork"), v = TOPORAG_VIEW;
  var w = el ? el.clientWidth : 0, h = el ? el.clientHeight : 0;
  if (!v || !w || !h) { network.fit(); return; }
  network.moveTo({position: {x: (v[0] + v[2]) / 2, y: (v[1] + v[3]) / 2},
                  scale: Math.min(w / (v[2] - v[0]), h / (v[3] - v[1])), animation: false});
}
function toporagText(network, ctx, lines, box, fs, colour) {
  // The lines centred in their box (canvas units, placed by the server so that no two boxes meet);
  // a text measured wider than its box is drawn smaller, never past the box. Returns the DOM box and
  // the font size drawn, in screen pixels (what the browser test reads).
  var w = 0, f = fs;
  ctx.font = f + "px Arial, sans-serif";
  lines.forEach(function (t) { w = Math.max(w, ctx.measureText(t).width); });
  var room = (box[2] - box[0]) * 0.96;
  if (w > room) { f = fs * room / w; ctx.font = f + "px Arial, sans-serif"; }
  var lh = f * 1.25, top = (box[1] + box[3]) / 2 - lines.length * lh / 2, x = (box[0] + box[2]) / 2;
  ctx.lineWidth = f * 0.25;
  ctx.strokeStyle = "rgba(255,255,255,0.92)";
  ctx.fillStyle = colour;
  lines.forEach(function (t, j) {
    var y = top + j * lh + (lh - f) / 2;
    ctx.strokeText(t, x, y);
    ctx.fillText(t, x, y);
  });
  var tl = network.canvasToDOM({x: box[0], y: box[1]}), br = network.canvasToDOM({x: box[2], y: box[3]});
  return {box: [tl.x, tl.y, br.x, br.y], px: f * network.getScale()};
}
function toporagLabels(network, ctx) {
  var pos = network.getPositions(TOPORAG_LABELS.map(function (l) { return l.id; }));
  var drawn = [], edges = [];
  ctx.save();
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  TOPORAG_EDGE_LABELS.forEach(function (lab) {
    var t = toporagText(network, ctx, [lab.text], lab.box, lab.fs, "#444444");
    edges.push({id: lab.id, text: lab.text, box: t.box, px: t.px});
  });
  TOPORAG_LABELS.forEach(function (lab) {
    var p = pos[lab.id], b = lab.box;
    if (!p) { return; }
    if (lab.lead) {  // a label moved away from its node: a thin line leads to it
      ctx.beginPath();
      ctx.moveTo(p.x, p.y);
      ctx.lineTo(Math.min(Math.max(p.x, b[0]), b[2]), Math.min(Math.max(p.y, b[1]), b[3]));
      ctx.lineWidth = lab.fs * 0.08;
      ctx.strokeStyle = "rgba(90,90,90,0.7)";
      ctx.stroke();
    }
    var t = toporagText(network, ctx, lab.lines, b, lab.fs, lab.always ? "#111111" : "#333333");
    drawn.push({id: lab.id, text: lab.lines.join(" "), always: lab.always, box: t.box, px: t.px});
  });
  ctx.restore();
  window.TOPORAG_DRAWN = drawn;
  window.TOPORAG_DRAWN_EDGES = edges;
}
function toporagPrepare(nodes, edges) {
  // Titles arrive as escaped HTML strings; vis-network shows strings as plain text, so turn
  // them into elements to get line breaks and bold headings (the user text inside is escaped).
  [nodes, edges].forEach(function (ds) {
    var upd = [];
    ds.forEach(function (item) {
      if (typeof item.title === "string") {
        var div = document.createElement("div");
        div.innerHTML = item.title;
        upd.push({id: item.id, title: div});
      }
    });
    ds.update(upd);
  });
}
function toporagDecorate(network) {
  // A view created inside a hidden tab has no size yet: refit once it is shown (the iframe
  // resizes) and once the layout has settled.
  window.addEventListener("resize", function () { network.redraw(); toporagFit(network); });
  toporagFit(network);
  network.on("beforeDrawing", function (ctx) {
    TOPORAG_CELLS.forEach(function (cell) {
      var pos = network.getPositions(cell.nodes);
      ctx.beginPath();
      cell.nodes.forEach(function (id, j) {
        var p = pos[id];
        if (!p) { return; }
        if (j === 0) { ctx.moveTo(p.x, p.y); } else { ctx.lineTo(p.x, p.y); }
      });
      ctx.closePath();
      if (cell.fill) { ctx.fillStyle = cell.fill; ctx.fill(); }
      if (cell.stroke) { ctx.lineWidth = cell.width; ctx.strokeStyle = cell.stroke; ctx.stroke(); }
    });
  });
  network.on("afterDrawing", function (ctx) { toporagLabels(network, ctx); });
}
