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
    h("div", "meta", inc.id + " · first line " + inc.start + (inc.end ? " · resolved " + inc.end : "") +
      (inc.resolving_since ? " · all alerts resolved " + inc.resolving_since + ", resolves unless one fires again" : "") +
      (inc.follows ? " · follows " + inc.follows : "") +
      " · " + plural(inc.alerts, "alert", "alerts") + " · still affected: " + (inc.affected.join(", ") || "none"), c);
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
  // "3m 12s", "2h 5m", "4d 1h": how long, by the wall clock.
  function span(ms) {
    var s = Math.max(0, Math.floor(ms / 1000)), d = Math.floor(s / 86400), hr = Math.floor(s % 86400 / 3600),
      m = Math.floor(s % 3600 / 60), sec = s % 60;
    if (d) return d + "d " + hr + "h";
    if (hr) return hr + "h " + m + "m";
    if (m) return m + "m " + sec + "s";
    return sec + "s";
  }
  // Every "firing for" on the page counts on by the wall clock between polls.
  var skew = 0;
  function tickAges() {
    var now = Date.now() + skew;
    document.querySelectorAll("[data-fired-at]").forEach(function (e) {
      e.textContent = "firing for " + span(now - Date.parse(e.getAttribute("data-fired-at")));
    });
  }
  setInterval(tickAges, 1000);
  function render(s) {
    // Ages use the server's clock: the browser's may be off.
    var gen = Date.parse(s.generated);
    if (!isNaN(gen)) skew = gen - Date.now();
    var st = document.getElementById("status");
    st.textContent = "source: " + s.source + " · updated " + s.generated + " · ";
    var a = h("a", "report-link", "report of this run", st);
    a.setAttribute("href", "report");
    var incs = document.getElementById("incidents");
    incs.textContent = "";
    h("h2", "", s.incidents.length + " open incident(s)", incs);
    s.incidents.forEach(function (i) { incident(i, incs, false); });
    if (s.resolved_incidents.length) {
      h("h2", "", "recently resolved", incs);
      s.resolved_incidents.forEach(function (i) { incident(i, incs, true); });
    }
    var sil = s.silences || [];
    if (sil.length) {
      h("h2", "", sil.length + " silence(s) in force: matching alerts are recorded, not sent", incs);
      sil.forEach(function (x) {
        var c = h("div", "card silence", undefined, incs);
        c.setAttribute("data-silence", x.id);
        h("div", "title", Object.keys(x.matchers).map(function (k) { return k + "=" + x.matchers[k]; }).join(", "), c);
        h("div", "meta", x.id + " · by " + (x.created_by || "?") + " · until " + x.ends_at + " · " + x.comment, c);
      });
    }
    var flap = s.flapping || [];
    if (flap.length) {
      h("h2", "", flap.length + " resolution(s) held for the flap window: firing again before then is the same episode, not a new page", incs);
      flap.forEach(function (x) {
        var c = h("div", "card flapping sev-" + x.severity, undefined, incs);
        c.setAttribute("data-flapping", x.rule + "/" + x.group);
        h("div", "title", x.rule + " · " + x.group, c);
        h("div", "meta", "firing since " + x.starts_at + " · resolved " + x.resolved_at + " · sent as resolved at " + x.held_until + " unless it fires again", c);
      });
    }
    var f = document.getElementById("firing");
    f.textContent = "";
    h("h2", "", s.firing.length + " alert(s) firing", f);
    var byNode = {};
    s.firing.forEach(function (a) { (byNode[a.group] = byNode[a.group] || []).push(a); });
    var t = h("table", "", undefined, f);
    var head = h("tr", "", undefined, t);
    ["node / group", "alerts (wall-clock age; line times are the logs' own)", "incident"]
      .forEach(function (c) { h("th", "", c, head); });
    Object.keys(byNode).sort().forEach(function (node) {
      var tr = h("tr", "node-row", undefined, t);
      tr.setAttribute("data-node", node);
      h("td", "", node, tr);
      var cell = h("td", "", undefined, tr);
      byNode[node].forEach(function (a) {
        var d = h("div", "firing-alert", undefined, cell);
        d.setAttribute("data-rule", a.rule);
        h("span", "pill sev-" + a.severity, a.severity, d);
        d.appendChild(document.createTextNode(a.summary + " "));
        var age = h("span", "age", "", d);
        age.setAttribute("data-fired-at", a.fired_at);
        h("span", "muted", " · fired " + a.fired_at + " · first line " + a.starts_at +
          (a.last_line_at ? " · last line " + a.last_line_at : ""), d);
        if (a.rule === "novel") {
          // A new template that is harmless: known for good (and added
          // to the baseline the run started from).
          var b = h("button", "know", "mark known", d);
          b.setAttribute("data-template", a.group);
          b.addEventListener("click", function () {
            b.disabled = true;
            fetch("api/templates/" + encodeURIComponent(a.group) + "/known", { method: "POST", credentials: "same-origin" })
              .then(function (r) { b.textContent = r.ok ? "known" : "failed (" + r.status + ")"; })
              .catch(function () { b.textContent = "failed"; b.disabled = false; });
          });
        }
      });
      h("td", "", byNode[node].map(function (a) { return a.incident || "–"; })
        .filter(function (v, i, arr) { return arr.indexOf(v) === i; }).join(", "), tr);
    });
    tickAges();
  }
  function poll() {
    // The address without user:password@ (a page opened as
    // http://user:pw@host/ has them in its base URL, and fetch refuses a
    // URL with credentials); the browser sends the basic credentials it
    // was given for this origin by itself.
    var url = location.origin + location.pathname.replace(/[^\/]*$/, "") + "api/status";
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function (e) { document.getElementById("status").textContent = "cannot reach sigwatch: " + e; })
      .then(function () { setTimeout(poll, 2000); });
  }
  poll();
})();
