// Draws the report from the JSON in #data: the volume of all lines (the
// baseline before the first hit), one lane per node with its pod, hit
// density per rule, population sightings (peers alive without hits),
// labelled alert bars, incident outlines, and sample lines on click. The
// chart is as wide as the window and redrawn when it changes. No network.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  // Rule colours: none within 30° of the hue (CIELAB) of a severity colour
  // of the alert bars (red, orange, blue: --critical, --warning, --info),
  // each at least 25 ΔE2000 from those and at least 12 from every other,
  // bright on the dark panel, most distinct first. The rules with hits
  // take them in rule order: the same colours on every render, and no two
  // rules share one until more than ten have hits.
  var PALETTE = ["#4ade80", "#e879f9", "#99f6e4", "#8b5cf6", "#bef264", "#fbcfe8",
    "#0d9488", "#16a34a", "#d8b4fe", "#c026d3"];
  var LABEL = 230, TOP = 38, VOLUME = 40, INC_ROW = 15;
  var HIT = 9, SEEN = 5, BAR = 14, PAD = 6, CHAR = 6.1, MIN_LANE = 32;
  var STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
    21600, 43200, 86400, 172800, 604800].map(function (s) { return s * 1000; });
  var chart = document.getElementById("chart");
  var WIDTH, PLOT;

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
  function iso(ms) { return new Date(D.t0 + ms).toISOString(); }
  function when(ms) { return iso(ms).replace("T", " ").replace(".000Z", "Z").replace("Z", " UTC"); }
  function title(node, text) { el("title", {}, node).textContent = text; }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // Summary: the incidents first, then the counts.
  var summary = document.getElementById("summary");
  h("h2", "", plural(D.incidents.length, "incident", "incidents") + " · " +
    plural(D.counts.alerts, "alert", "alerts") + " · " +
    plural(D.counts.hits, "signature hit", "signature hits") + " · " +
    when(0) + " → " + when(D.duration), summary);
  D.incidents.forEach(function (inc) {
    var c = h("div", "card incident-card sev-" + inc.severity + (inc.end === null ? "" : " resolved"), undefined, summary);
    c.setAttribute("data-incident", inc.id);
    h("div", "title", inc.title, c);
    h("div", "story", inc.story, c);
    h("div", "meta", inc.id + " · " + when(inc.start) + " → " + (inc.end === null ? "still open" : when(inc.end)) +
      " · " + plural(inc.alerts.length, "alert", "alerts") + " · nodes: " +
      inc.nodes.map(function (n) { var i = D.lanes.indexOf(n); return D.pods[i] ? n + " (" + D.pods[i] + ")" : n; })
        .join(", "), c);
  });

  // Hits per lane and rule, sightings per lane.
  var laneHits = {}, laneRules = {}, laneSeen = {}, ruleHits = {}, laneRuleHits = {};
  D.hits.forEach(function (t) {
    laneHits[t[0]] = (laneHits[t[0]] || 0) + t[3];
    ruleHits[t[1]] = (ruleHits[t[1]] || 0) + t[3];
    laneRuleHits[t[0] + "/" + t[1]] = (laneRuleHits[t[0] + "/" + t[1]] || 0) + t[3];
    var r = laneRules[t[0]] = laneRules[t[0]] || [];
    if (r.indexOf(t[1]) < 0) r.push(t[1]);
  });
  D.seen.forEach(function (s) { laneSeen[s[0]] = true; });
  Object.keys(laneRules).forEach(function (l) { laneRules[l].sort(function (a, b) { return a - b; }); });

  // The colour of each rule with hits (see PALETTE).
  var colour = {};
  Object.keys(ruleHits).map(Number).sort(function (a, b) { return a - b; })
    .forEach(function (r, k) { colour[r] = PALETTE[k % PALETTE.length]; });

  var lanes = D.lanes.filter(function (name, i) {
    // Lanes with something on them: a hit, an alert, or a sighting as a
    // peer of a population rule. The cluster lane too: it is drawn (first)
    // only when a cluster-wide alert is on it, not empty when every alert
    // names a node (a share rule's black hole).
    return laneHits[i] || laneSeen[i] || D.alerts.some(function (a) { return a.lane === i; });
  });

  // Lanes of one incident next to each other (so its outline covers only
  // its own), in the order the incidents started; then the peers of the
  // population rules; the rest by name.
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

  function barText(a) { return D.rules[a.rule].id + " · " + a.severity; }

  // The width of an incident's id as drawn (its label's font).
  var measure = document.createElement("canvas").getContext("2d");
  function idWidth(id) {
    if (!measure) return id.length * 7.5;
    measure.font = "600 11px " + getComputedStyle(document.documentElement).fontFamily;
    return Math.ceil(measure.measureText(id).width) + 2;
  }

  function draw() {
    WIDTH = Math.max(720, chart.clientWidth || 0);
    PLOT = WIDTH - LABEL - 20;
    chart.textContent = "";

    // Each incident's id goes in a row of its own at the top of its first
    // lane, inside its outline when it fits, else beside it, never over a
    // mark nor past the chart's edge: the rows are packed like the bars.
    var order = {}, labels = {};
    lanes.forEach(function (name, k) { order[D.lanes.indexOf(name)] = k; });
    D.incidents.forEach(function (inc, n) {
      var ls = inc.alerts.map(function (a) { return D.alerts[a].lane; });
      inc.nodes.forEach(function (name) { ls.push(D.lanes.indexOf(name)); });
      ls = ls.filter(function (l) { return l in order; })
        .sort(function (a, b) { return order[a] - order[b]; });
      if (!ls.length) return;
      var x0 = x(inc.start), x1 = x(inc.end === null ? D.duration : inc.end), w = idWidth(inc.id), lx;
      if (x1 - x0 >= w + 8) lx = x0 + 4;
      else if (x1 + 7 + w <= WIDTH - 4) lx = x1 + 7;
      else lx = Math.max(LABEL + 2, x0 - 7 - w);
      (labels[ls[0]] = labels[ls[0]] || []).push({ incident: n, x: lx, end: lx + w });
    });
    var incRow = {};
    Object.keys(labels).forEach(function (li) {
      var ends = [];
      labels[li].sort(function (a, b) { return a.x - b.x; }).forEach(function (l) {
        var s = 0;
        while (s < ends.length && ends[s] > l.x) s++;
        ends[s] = l.end + 6;
        l.row = s;
        incRow[l.incident] = { lane: +li, row: s, x: l.x };
      });
      labels[li].rows = ends.length;
    });

    // Then one thin row per rule with hits there, a row of sightings if it
    // is a peer of a population rule, then its alert bars, packed into as
    // few rows as do not overlap, their labels included.
    var layout = {};
    lanes.forEach(function (name) {
      var li = D.lanes.indexOf(name);
      var head = labels[li] ? labels[li].rows * INC_ROW : 0;
      var rules = laneRules[li] || [];
      var ends = [], slot = {}, inside = {};
      D.alerts.map(function (a, i) { return i; })
        .filter(function (i) { return D.alerts[i].lane === li; })
        .sort(function (a, b) { return D.alerts[a].start - D.alerts[b].start; })
        .forEach(function (i) {
          var a = D.alerts[i], x0 = x(a.start), x1 = x(a.end === null ? D.duration : a.end);
          var text = barText(a).length * CHAR + 8;
          inside[i] = x1 - x0 >= text;
          var end = inside[i] ? x1 : Math.max(x0 + 3, x1) + text, s = 0;
          while (s < ends.length && ends[s] > x0) s++;
          ends[s] = end + 2;
          slot[i] = s;
        });
      var body = PAD * 2 + head + rules.length * HIT + (laneSeen[li] ? SEEN + 2 : 0) + ends.length * BAR + 2;
      var labelRows = D.pods[li] ? 3 : 2;
      layout[li] = { rules: rules, slot: slot, inside: inside, head: head,
        height: Math.max(MIN_LANE + 12 * (labelRows - 2), body) };
    });
    var top = {}, y = TOP + VOLUME;
    lanes.forEach(function (name) { var li = D.lanes.indexOf(name); top[li] = y; y += layout[li].height; });
    var height = y + 10;
    var svg = el("svg", { width: WIDTH, height: height, viewBox: "0 0 " + WIDTH + " " + height, id: "timeline" });
    chart.appendChild(svg);

    // Time axis: round steps (at least 90 px apart) in UTC, the date on the
    // first tick and wherever the day changes.
    var axis = el("g", { "class": "axis" }, svg);
    var step = STEPS[STEPS.length - 1];
    for (var s = 0; s < STEPS.length; s++) {
      if (D.duration / STEPS[s] * 90 <= PLOT) { step = STEPS[s]; break; }
    }
    var zone = el("text", { "class": "zone", x: 8, y: TOP - 10 }, axis);
    zone.textContent = "time (" + D.zone + ")";
    var lastDay = iso(0).substr(0, 10);
    var date = el("text", { "class": "tick-date", x: 8, y: TOP - 24 }, axis);
    date.textContent = lastDay;
    var first = Math.ceil(D.t0 / step) * step;
    for (var t = first; t <= D.t0 + D.duration; t += step) {
      var px = x(t - D.t0), stamp = new Date(t).toISOString();
      el("line", { "class": "tick", x1: px, x2: px, y1: TOP - 6, y2: height - 6 }, axis);
      var label = el("text", { "class": "tick-label", x: px, y: TOP - 10, "text-anchor": "middle" }, axis);
      label.textContent = step < 60000 ? stamp.substr(11, 8) : stamp.substr(11, 5);
      var day = stamp.substr(0, 10);
      if (day !== lastDay) {
        var d = el("text", { "class": "tick-date", x: px, y: TOP - 24, "text-anchor": "middle" }, axis);
        d.textContent = day;
        lastDay = day;
      }
    }

    // The volume of all lines: the baseline before the first hit.
    var vol = el("g", { "class": "volume" }, svg);
    var vmax = 1, lines = 0, errors = 0;
    D.volume.forEach(function (v) { vmax = Math.max(vmax, v[1]); lines += v[1]; errors += v[2]; });
    var vlabel = el("text", { "class": "lane-label", x: 8, y: TOP + 14 }, vol);
    vlabel.textContent = "all lines";
    var vsub = el("text", { "class": "lane-sub", x: 8, y: TOP + 27 }, vol);
    vsub.textContent = lines.toLocaleString("en-US") + " lines" +
      (D.levels ? " · " + errors.toLocaleString("en-US") + " errors" : "");
    var bw = Math.max(1.5, PLOT * D.bucket / Math.max(1, D.duration));
    D.volume.forEach(function (v) {
      var bx = x(v[0] * D.bucket), hgt = (VOLUME - 8) * v[1] / vmax;
      var r = el("rect", { "class": "vol", x: bx, y: TOP + VOLUME - 4 - hgt, width: bw, height: hgt }, vol);
      title(r, v[1] + " lines" + (D.levels ? ", " + v[2] + " errors" : "") + " · " + when(v[0] * D.bucket));
      if (v[2] > 0) {
        var eh = (VOLUME - 8) * v[2] / vmax;
        el("rect", { "class": "vol-error", x: bx, y: TOP + VOLUME - 4 - eh, width: bw, height: eh }, vol);
      }
    });

    var lanesG = el("g", { "class": "lanes" }, svg);
    var laneG = {};
    lanes.forEach(function (name) {
      var li = D.lanes.indexOf(name);
      var g = el("g", { "class": "lane", "data-lane": name }, lanesG);
      if (D.pods[li]) g.setAttribute("data-pod", D.pods[li]);
      el("rect", { "class": "lane-bg", x: 0, y: top[li], width: WIDTH, height: layout[li].height }, g);
      var label = el("text", { "class": "lane-label", x: 8, y: top[li] + 14 }, g);
      label.textContent = name.length > 34 ? name.substr(0, 33) + "…" : name;
      title(label, name);
      var sub = [];
      if (li !== 0 || laneHits[li]) sub.push(plural(laneHits[li] || 0, "hit", "hits"));
      // A share rule's part of its hits, on each lane that has some.
      (laneRules[li] || []).forEach(function (r) {
        if (D.rules[r].kind !== "share" || !ruleHits[r]) return;
        sub.push(Math.round(100 * laneRuleHits[li + "/" + r] / ruleHits[r]) + "% of " + D.rules[r].id);
      });
      if (laneSeen[li] && !laneHits[li]) sub.push("peer");
      // The pod on its own line, then the counts (on one more line when
      // they do not fit beside it).
      var rows = [], pod = D.pods[li] || "", counts = sub.join(" · ");
      if (pod && (pod + " · " + counts).length > 36) rows.push(pod, counts);
      else rows.push(pod ? pod + " · " + counts : counts);
      rows.forEach(function (text, k) {
        var st = el("text", { "class": "lane-sub", x: 8, y: top[li] + 27 + 12 * k }, g);
        st.textContent = text.length > 37 ? text.substr(0, 36) + "…" : text;
        title(st, (pod ? "pod " + pod + "\n" : "") + counts);
      });
      laneG[li] = g;
    });
    function hitY(li, rule) { return top[li] + PAD + layout[li].head + layout[li].rules.indexOf(rule) * HIT; }
    function seenY(li) { return top[li] + PAD + layout[li].head + layout[li].rules.length * HIT; }
    function barY(li, i) {
      return top[li] + PAD + layout[li].head + layout[li].rules.length * HIT + (laneSeen[li] ? SEEN + 2 : 0) + 2 +
        layout[li].slot[i] * BAR;
    }

    // Incidents behind everything: the lanes of their alerts and nodes, from
    // start to end.
    var incG = el("g", { "class": "incidents" }, svg);
    svg.insertBefore(incG, lanesG.nextSibling);
    D.incidents.forEach(function (inc, n) {
      var ls = inc.alerts.map(function (a) { return D.alerts[a].lane; });
      inc.nodes.forEach(function (name) { ls.push(D.lanes.indexOf(name)); });
      ls = ls.filter(function (l) { return l in top; });
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
      var at = incRow[n];
      var lbl = el("text", { "class": "incident-label", "data-incident": inc.id, x: at.x,
        y: top[at.lane] + 13 + at.row * INC_ROW }, incG);
      lbl.textContent = inc.id;
      title(lbl, inc.id + ": " + inc.story);
    });

    // Hits: one mark per bucket, opacity by density (log scale).
    var max = 1;
    D.hits.forEach(function (t) { if (t[3] > max) max = t[3]; });
    D.hits.forEach(function (t) {
      if (!(t[0] in top)) return;
      var rule = D.rules[t[1]];
      var m = el("rect", { "class": "hit", "data-rule": rule.id, x: x(t[2] * D.bucket), y: hitY(t[0], t[1]),
        width: bw, height: HIT - 2, fill: colour[t[1]],
        opacity: (0.3 + 0.7 * Math.log(t[3] + 1) / Math.log(max + 1)).toFixed(3) }, laneG[t[0]]);
      title(m, rule.id + " · " + plural(t[3], "hit", "hits") + " · " + when(t[2] * D.bucket));
      m.addEventListener("click", function () { showHits(t); });
    });

    // Sightings: the node was alive (seen in the population of a spread or
    // share rule), hits or not; a black hole stands out against its peers.
    D.seen.forEach(function (s) {
      if (!(s[0] in top)) return;
      var of = (D.seen_rules[s[0]] || []).map(function (r) { return D.rules[r].id; }).join(", ");
      var m = el("rect", { "class": "seen", x: x(s[1] * D.bucket), y: seenY(s[0]), width: bw, height: SEEN },
        laneG[s[0]]);
      title(m, "alive: " + plural(s[2], "line", "lines") + " sampled for " + of + " · " + when(s[1] * D.bucket));
    });

    // Alert bars under the hits, labelled with rule and severity (inside
    // when the bar is wide enough, beside it otherwise).
    D.alerts.forEach(function (a, i) {
      if (!(a.lane in top)) return;
      var x0 = x(a.start), x1 = x(a.end === null ? D.duration : a.end), by = barY(a.lane, i);
      var w = Math.max(3, x1 - x0);
      var bar = el("rect", { "class": "alert sev-" + a.severity + (a.end === null ? " open" : ""),
        "data-rule": D.rules[a.rule].id, "data-group": a.group, "data-alert": i,
        x: x0, y: by, width: w, height: BAR - 3, rx: 2 }, laneG[a.lane]);
      var text = D.rules[a.rule].id + " · " + a.group + " · " + when(a.start) + " → " +
        (a.end === null ? "still firing" : when(a.end)) + "\n" + a.summary;
      title(bar, text);
      bar.addEventListener("click", function () { showAlert(a); });
      var inside = layout[a.lane].inside[i];
      var lbl = el("text", { "class": "alert-label " + (inside ? "in sev-" + a.severity : "beside"),
        "data-alert": i, x: inside ? x0 + 4 : x0 + w + 4, y: by + BAR - 6 }, laneG[a.lane]);
      lbl.textContent = barText(a);
      title(lbl, text);
      lbl.addEventListener("click", function () { showAlert(a); });
    });
  }

  // Legend: rule colours (thin marks, as the hits), sightings, then the
  // severities (bars, as the alerts: told apart by shape as well as hue).
  var legend = document.getElementById("legend");
  if (Object.keys(colour).length) h("span", "legend-head", "hits:", legend);
  D.rules.forEach(function (r, i) {
    if (!(i in colour)) return;
    var s = h("span", "rule-entry", undefined, legend);
    s.setAttribute("data-rule", r.id);
    h("i", "rule-key", undefined, s).style.background = colour[i];
    s.appendChild(document.createTextNode(r.id));
  });
  if (D.seen.length) {
    var s = h("span", "", undefined, legend);
    h("i", "seen-key", undefined, s);
    s.appendChild(document.createTextNode("alive (population of a spread or share rule)"));
  }
  h("span", "legend-head", "alerts:", legend);
  ["critical", "warning", "info"].forEach(function (sev) {
    var s = h("span", "sev-entry", undefined, legend);
    s.setAttribute("data-severity", sev);
    h("i", "sev-key sev-" + sev, undefined, s);
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
    show(D.rules[t[1]].id + " on " + D.lanes[t[0]] + " · " + plural(t[3], "hit", "hits") + " near " + when(at),
      lines.slice(0, 5).map(function (l) { return when(l[0]) + "  " + l[1]; }));
  }
  function showAlert(a) {
    show(D.rules[a.rule].title + " (" + a.group + ", " + a.severity + ") · " + a.summary, a.samples);
  }

  // Drawn as wide as the chart, then again if that width changed by the
  // drawing (a tall chart brings the page's vertical scrollbar, which
  // takes its width from the chart: the right edge, where open incidents
  // end, would be scrolled out of sight).
  function fit() {
    draw();
    if (Math.max(720, chart.clientWidth || 0) !== WIDTH) draw();
  }
  fit();
  var pending = null;
  window.addEventListener("resize", function () {
    if (pending) clearTimeout(pending);
    pending = setTimeout(function () { pending = null; fit(); }, 100);
  });
})();
