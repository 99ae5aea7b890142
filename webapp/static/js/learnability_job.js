// A learnability job's page (templates/jobs/_learnability.html): once the job has succeeded,
// the checks with their reasons, the reward range, solver vs random histograms of the total
// on shared bins (Plotly) and per-term means. job.js polls the job and sets #job-page's
// data-status; this script reads the result once then. All text goes in as textContent.
(function () {
  "use strict";
  var root = document.getElementById("job-page");
  var holder = document.getElementById("learnability-job");
  if (!root || !holder) return;
  var drawn = false;

  var byId = window.envlab.dom.byId;

  function cell(row, text, cls) {
    var td = document.createElement("td");
    if (cls) {
      var span = document.createElement("span");
      span.className = cls;
      span.textContent = text;
      td.appendChild(span);
    } else {
      td.textContent = text;
    }
    row.appendChild(td);
    return td;
  }

  function number(value) {
    return typeof value === "number" && isFinite(value) ? String(Math.round(value * 1000) / 1000) : "—";
  }

  function centres(hist) {
    var x = [], width = [];
    for (var i = 0; i < hist.counts.length; i++) {
      var high = hist.edges[Math.min(i + 1, hist.edges.length - 1)];
      x.push((hist.edges[i] + high) / 2);
      width.push(Math.max(high - hist.edges[i], 1e-9));
    }
    return { x: x, width: hist.counts.length > 1 ? width : undefined };
  }

  function histograms(div, solver, random) {
    if (!window.Plotly || !solver.histogram || !random.histogram) return;
    var s = centres(solver.histogram), r = centres(random.histogram);
    window.Plotly.newPlot(div, [
      { type: "bar", name: "solver", x: s.x, y: solver.histogram.counts, width: s.width, opacity: 0.65 },
      { type: "bar", name: "random", x: r.x, y: random.histogram.counts, width: r.width, opacity: 0.65 },
    ], {
      barmode: "overlay", height: 260, margin: { l: 40, r: 10, t: 10, b: 40 },
      xaxis: { title: { text: "total reward" } }, yaxis: { title: { text: "episodes" } },
    }, { displaylogo: false, responsive: true });
    div.dataset.bins = String(solver.histogram.counts.length);
  }

  function show(result) {
    if (drawn || !result || !result.checks) return;
    drawn = true;
    byId("learnability-result").hidden = false;
    var status = result.verdict && result.verdict.status || "";
    byId("learnability-verdict-status").textContent = status;
    byId("learnability-verdict-status").className = "badge check-" + status;
    byId("learnability-verdict").textContent = result.verdict ? result.verdict.text : "";
    var body = byId("learnability-checks").tBodies[0];
    body.textContent = "";
    Object.keys(result.checks).forEach(function (name) {
      var check = result.checks[name];
      var row = document.createElement("tr");
      row.dataset.check = name;
      cell(row, name);
      cell(row, check.status, "badge check-" + check.status);
      cell(row, check.reason);
      body.appendChild(row);
    });
    var range = byId("learnability-range");
    range.textContent = "";
    [["Top", number(result.range.top) + " (" + result.range.top_source + ")"],
     ["Bottom", number(result.range.bottom) + " (" + result.range.bottom_source + ")"],
     ["Solver mean / max", number(result.solver.mean) + " / " + number(result.solver.max)],
     ["Random mean / max", number(result.random.mean) + " / " + number(result.random.max)]].forEach(function (pair) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = pair[0];
      dd.textContent = pair[1];
      range.appendChild(dt);
      range.appendChild(dd);
    });
    histograms(byId("learnability-histogram"), result.solver, result.random);
    var terms = byId("learnability-terms").tBodies[0];
    terms.textContent = "";
    Object.keys(result.solver.terms || {}).forEach(function (name) {
      var row = document.createElement("tr");
      row.dataset.term = name;
      cell(row, name);
      cell(row, number(result.solver.terms[name].mean));
      cell(row, number((result.random.terms[name] || {}).mean));
      terms.appendChild(row);
    });
  }

  function load() {
    window.envlab.http.getJsonOrNull(root.dataset.api)
      .then(function (job) { if (job && job.status === "succeeded") show(job.result); })
      .catch(function () { window.setTimeout(load, 5000); });
  }

  function start() {
    var job = JSON.parse(byId("job-data").textContent);
    if (job.status === "succeeded" && job.result) { show(job.result); return; }
    new MutationObserver(function () {
      if (!drawn && root.dataset.status === "succeeded") load();
    }).observe(root, { attributes: true, attributeFilter: ["data-status"] });
  }
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
