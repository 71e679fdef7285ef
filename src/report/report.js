// Draws the replay report from the JSON in #data: lanes, hit density,
// alert bars, incident outlines, and sample lines on click. No network.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var PALETTE = ["#3e9bff", "#a970ff", "#2dd4bf", "#f472b6", "#facc15", "#fb923c",
    "#60a5fa", "#34d399", "#c084fc", "#f87171", "#a3e635", "#22d3ee"];
  var LABEL = 200, WIDTH = 1400, PLOT = WIDTH - LABEL - 20, TOP = 26;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function h(tag, cls, text, parent) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function x(ms) { return LABEL + (D.duration > 0 ? ms / D.duration : 0) * PLOT; }
  function when(ms) { return new Date(D.t0 + ms).toISOString().replace("T", " ").replace(".000Z", "Z"); }
  function title(node, text) { el("title", {}, node).textContent = text; }

  // Summary: the incidents first, then the counts.
  var summary = document.getElementById("summary");
  h("h2", "", D.incidents.length + " incident(s) · " + D.counts.alerts + " alert(s) · " +
    D.counts.hits + " signature hit(s) · " + D.start + " → " + D.end, summary);
  D.incidents.forEach(function (inc) {
    var c = h("div", "card incident-card sev-" + inc.severity + (inc.end === null ? "" : " resolved"), undefined, summary);
    c.setAttribute("data-incident", inc.id);
    h("div", "title", inc.title, c);
    h("div", "story", inc.story, c);
    h("div", "meta", inc.id + " · " + when(inc.start) + " → " + (inc.end === null ? "still open" : when(inc.end)) +
      " · " + inc.alerts.length + " alert(s) · nodes: " + inc.nodes.join(", "), c);
  });

  var lanes = D.lanes.filter(function (name, i) {
    // The cluster lane always shows; other lanes only with something on them.
    return i === 0 || D.hits.some(function (t) { return t[0] === i; }) ||
      D.alerts.some(function (a) { return a.lane === i; });
  });

  // Lanes of one incident next to each other (so its outline covers only
  // its own), in the order the incidents started; the rest by name.
  var rank = {};
  D.incidents.forEach(function (inc, k) {
    inc.alerts.forEach(function (a) {
      var name = D.lanes[D.alerts[a].lane];
      if (!(name in rank)) rank[name] = k;
    });
    inc.nodes.forEach(function (n) { if (!(n in rank)) rank[n] = k; });
  });
  lanes.sort(function (a, b) {
    if (a === D.lanes[0] || b === D.lanes[0]) return a === D.lanes[0] ? -1 : 1;
    var ra = a in rank ? rank[a] : 1e9, rb = b in rank ? rank[b] : 1e9;
    return ra !== rb ? ra - rb : (a < b ? -1 : a > b ? 1 : 0);
  });

  // Each lane: one thin row per rule with hits there, then its alert bars,
  // packed into as few rows as do not overlap.
  var HIT = 9, BAR = 10, PAD = 6;
  var layout = {};
  lanes.forEach(function (name) {
    var li = D.lanes.indexOf(name);
    var rules = [];
    D.hits.forEach(function (t) { if (t[0] === li && rules.indexOf(t[1]) < 0) rules.push(t[1]); });
    rules.sort(function (a, b) { return a - b; });
    var ends = [], slot = {};
    D.alerts.map(function (a, i) { return i; })
      .filter(function (i) { return D.alerts[i].lane === li; })
      .sort(function (a, b) { return D.alerts[a].start - D.alerts[b].start; })
      .forEach(function (i) {
        var a = D.alerts[i], end = a.end === null ? D.duration : a.end, s = 0;
        while (s < ends.length && ends[s] > a.start) s++;
        ends[s] = end;
        slot[i] = s;
      });
    layout[li] = { rules: rules, slots: Math.max(ends.length, 1), slot: slot,
      height: PAD * 2 + Math.max(rules.length, 1) * HIT + Math.max(ends.length, 1) * BAR + 2 };
  });
  var top = {}, y = TOP;
  lanes.forEach(function (name) { var li = D.lanes.indexOf(name); top[li] = y; y += layout[li].height; });
  var height = y + 10;
  var svg = el("svg", { width: WIDTH, height: height, viewBox: "0 0 " + WIDTH + " " + height, id: "timeline" });
  document.getElementById("chart").appendChild(svg);

  // Time axis.
  var axis = el("g", { "class": "axis" }, svg);
  for (var k = 0; k <= 8; k++) {
    var ms = D.duration * k / 8, px = x(ms);
    el("line", { x1: px, x2: px, y1: TOP - 6, y2: height - 6 }, axis);
    var t = el("text", { x: px, y: TOP - 10, "text-anchor": k === 0 ? "start" : (k === 8 ? "end" : "middle") }, axis);
    t.textContent = new Date(D.t0 + ms).toISOString().substr(11, 8);
  }

  var lanesG = el("g", { "class": "lanes" }, svg);
  var laneG = {};
  lanes.forEach(function (name) {
    var li = D.lanes.indexOf(name);
    var g = el("g", { "class": "lane", "data-lane": name }, lanesG);
    el("rect", { "class": "lane-bg", x: 0, y: top[li], width: WIDTH, height: layout[li].height }, g);
    var label = el("text", { "class": "lane-label", x: 8, y: top[li] + layout[li].height / 2 + 4 }, g);
    label.textContent = name.length > 28 ? name.substr(0, 27) + "…" : name;
    title(label, name);
    laneG[li] = g;
  });
  function hitY(li, rule) { return top[li] + PAD + layout[li].rules.indexOf(rule) * HIT; }
  function barY(li, i) {
    return top[li] + PAD + Math.max(layout[li].rules.length, 1) * HIT + 2 + layout[li].slot[i] * BAR;
  }

  // Incidents behind everything: the lanes of their alerts and nodes, from
  // start to end.
  var incG = el("g", { "class": "incidents" }, svg);
  svg.insertBefore(incG, lanesG.nextSibling);
  D.incidents.forEach(function (inc) {
    var ls = inc.alerts.map(function (a) { return D.alerts[a].lane; });
    inc.nodes.forEach(function (n) { var i = D.lanes.indexOf(n); if (i in top) ls.push(i); });
    if (!ls.length) return;
    // One outline per run of adjacent lanes; the first carries the id.
    ls = ls.filter(function (l, i) { return ls.indexOf(l) === i; })
      .sort(function (a, b) { return top[a] - top[b]; });
    var runs = [[top[ls[0]], top[ls[0]] + layout[ls[0]].height]];
    ls.slice(1).forEach(function (l) {
      var last = runs[runs.length - 1];
      if (top[l] === last[1]) last[1] += layout[l].height;
      else runs.push([top[l], top[l] + layout[l].height]);
    });
    var x0 = x(inc.start), x1 = x(inc.end === null ? D.duration : inc.end);
    runs.forEach(function (run, k) {
      var r = el("rect", { "class": k === 0 ? "incident" : "incident-part", "data-incident": inc.id,
        x: x0 - 3, y: run[0] + 1, width: Math.max(6, x1 - x0 + 6), height: run[1] - run[0] - 2, rx: 4 }, incG);
      title(r, inc.id + ": " + inc.story);
    });
    var lbl = el("text", { "class": "incident-label", x: x1 + 3, y: runs[0][0] + 11, "text-anchor": "end" }, incG);
    lbl.textContent = inc.id;
  });

  // Hits: one mark per bucket, opacity by density (log scale).
  var max = 1;
  D.hits.forEach(function (t) { if (t[3] > max) max = t[3]; });
  var bw = Math.max(1.5, PLOT * D.bucket / Math.max(1, D.duration));
  D.hits.forEach(function (t) {
    if (!(t[0] in top)) return;
    var rule = D.rules[t[1]];
    var m = el("rect", { "class": "hit", "data-rule": rule.id, x: x(t[2] * D.bucket), y: hitY(t[0], t[1]),
      width: bw, height: HIT - 2, fill: PALETTE[t[1] % PALETTE.length],
      opacity: (0.3 + 0.7 * Math.log(t[3] + 1) / Math.log(max + 1)).toFixed(3) }, laneG[t[0]]);
    title(m, rule.id + " · " + t[3] + " hit(s) · " + when(t[2] * D.bucket));
    m.addEventListener("click", function () { showHits(t); });
  });

  // Alert bars under the hits, one row per overlap.
  D.alerts.forEach(function (a, i) {
    var x0 = x(a.start), x1 = x(a.end === null ? D.duration : a.end);
    var bar = el("rect", { "class": "alert sev-" + a.severity + (a.end === null ? " open" : ""),
      "data-rule": D.rules[a.rule].id, "data-group": a.group, "data-alert": i,
      x: x0, y: barY(a.lane, i), width: Math.max(3, x1 - x0), height: BAR - 2, rx: 2 },
      laneG[a.lane]);
    title(bar, D.rules[a.rule].id + " · " + a.group + " · " + when(a.start) + " → " +
      (a.end === null ? "still firing" : when(a.end)) + "\n" + a.summary);
    bar.addEventListener("click", function () { showAlert(a); });
  });

  // Legend: rule colours and severities.
  var legend = document.getElementById("legend");
  var used = {};
  D.hits.forEach(function (t) { used[t[1]] = true; });
  D.rules.forEach(function (r, i) {
    if (!used[i]) return;
    var s = h("span", "", undefined, legend);
    h("i", "", undefined, s).style.background = PALETTE[i % PALETTE.length];
    s.appendChild(document.createTextNode(r.id));
  });
  ["critical", "warning", "info"].forEach(function (sev) {
    var s = h("span", "", undefined, legend);
    h("i", "", undefined, s).style.background = "var(--" + sev + ")";
    s.appendChild(document.createTextNode(sev + " alert"));
  });

  var details = document.getElementById("details");
  function show(head, lines) {
    details.textContent = "";
    h("div", "title", head, details);
    if (!lines.length) h("div", "muted", "no sample lines kept here", details);
    lines.forEach(function (l) { h("pre", "", l, details); });
  }
  function showHits(t) {
    var s = D.samples.filter(function (s) { return s.lane === t[0] && s.rule === t[1]; })[0];
    var lines = s ? s.lines.slice() : [];
    var at = t[2] * D.bucket;
    lines.sort(function (a, b) { return Math.abs(a[0] - at) - Math.abs(b[0] - at); });
    show(D.rules[t[1]].id + " on " + D.lanes[t[0]] + " · " + t[3] + " hit(s) near " + when(at),
      lines.slice(0, 5).map(function (l) { return when(l[0]) + "  " + l[1]; }));
  }
  function showAlert(a) {
    show(D.rules[a.rule].title + " (" + a.group + ") · " + a.summary, a.samples);
  }
})();
