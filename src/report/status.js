// The live status page of `sigwatch run --listen`: polls /api/status every
// 2 s and shows the open incidents and the firing alerts per node.
(function () {
  "use strict";
  function h(tag, cls, text, parent) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function incident(inc, parent, resolved) {
    var c = h("div", "card incident-card sev-" + inc.severity + (resolved ? " resolved" : ""), undefined, parent);
    c.setAttribute("data-incident", inc.id);
    h("div", "title", inc.title, c);
    h("div", "story", inc.story, c);
    h("div", "meta", inc.id + " · since " + inc.start + (inc.end ? " · resolved " + inc.end : "") +
      " · " + inc.alerts + " alert(s) · still affected: " + (inc.affected.join(", ") || "none"), c);
  }
  function render(s) {
    document.getElementById("status").textContent = "source: " + s.source + " · updated " + s.generated;
    var incs = document.getElementById("incidents");
    incs.textContent = "";
    h("h2", "", s.incidents.length + " open incident(s)", incs);
    s.incidents.forEach(function (i) { incident(i, incs, false); });
    if (s.resolved_incidents.length) {
      h("h2", "", "recently resolved", incs);
      s.resolved_incidents.forEach(function (i) { incident(i, incs, true); });
    }
    var f = document.getElementById("firing");
    f.textContent = "";
    h("h2", "", s.firing.length + " alert(s) firing", f);
    var byNode = {};
    s.firing.forEach(function (a) { (byNode[a.group] = byNode[a.group] || []).push(a); });
    var t = h("table", "", undefined, f);
    var head = h("tr", "", undefined, t);
    ["node / group", "alerts", "incident"].forEach(function (c) { h("th", "", c, head); });
    Object.keys(byNode).sort().forEach(function (node) {
      var tr = h("tr", "node-row", undefined, t);
      tr.setAttribute("data-node", node);
      h("td", "", node, tr);
      var cell = h("td", "", undefined, tr);
      byNode[node].forEach(function (a) {
        var d = h("div", "firing-alert", undefined, cell);
        d.setAttribute("data-rule", a.rule);
        h("span", "pill sev-" + a.severity, a.severity, d);
        d.appendChild(document.createTextNode(a.summary + " (since " + a.starts_at + ")"));
      });
      h("td", "", byNode[node].map(function (a) { return a.incident || "–"; })
        .filter(function (v, i, arr) { return arr.indexOf(v) === i; }).join(", "), tr);
    });
  }
  function poll() {
    fetch("api/status", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function (e) { document.getElementById("status").textContent = "cannot reach sigwatch: " + e; })
      .then(function () { setTimeout(poll, 2000); });
  }
  poll();
})();
