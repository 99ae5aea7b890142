// A re-score job's result on the job page (templates/jobs/_rescore.html): old vs new totals,
// zero-variance fractions, per-term means, the overlaid totals histogram and the rollouts whose
// advantage changed sign. job.js calls window.envlabRescore(job) on every poll. Text goes in as
// textContent only.
(function () {
  "use strict";

  var byId = window.envlab.dom.byId;

  function fmt(value, digits) {
    if (value === null || value === undefined) return "—";
    return Number(value).toFixed(digits === undefined ? 4 : digits);
  }

  function percent(value) { return value === null || value === undefined ? "—" : Math.round(value * 100) + " %"; }

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function compare(result) {
    var body = byId("rescore-compare").tBodies[0];
    body.textContent = "";
    var rows = [
      ["total mean", "mean", function (side) { return fmt(side.total.mean); }],
      ["total std", "std", function (side) { return fmt(side.total.std); }],
      ["zero-variance groups", "zero", function (side) { return percent(side.zero_variance_fraction) + " (" + side.zero_variance_groups + ")"; }],
      ["mean within-group spread", "spread", function (side) { return fmt(side.mean_group_std); }],
      ["advantage std", "advantage", function (side) { return fmt(side.advantage.std); }]
    ];
    rows.forEach(function (spec) {
      var tr = document.createElement("tr");
      tr.dataset.row = spec[1];
      var head = document.createElement("th");
      head.textContent = spec[0];
      tr.appendChild(head);
      cell(tr, spec[2](result.old)).dataset.side = "old";
      cell(tr, spec[2](result.new)).dataset.side = "new";
      body.appendChild(tr);
    });
  }

  function terms(result) {
    var body = byId("rescore-terms").tBodies[0];
    body.textContent = "";
    ["old", "new"].forEach(function (side) {
      Object.keys(result[side].terms).forEach(function (name) {
        var term = result[side].terms[name];
        var tr = document.createElement("tr");
        tr.dataset.side = side;
        tr.dataset.term = name;
        cell(tr, name);
        cell(tr, side === "old" ? "the run's" : "new");
        cell(tr, fmt(term.mean));
        cell(tr, String(term.count));
        body.appendChild(tr);
      });
    });
  }

  function signs(result) {
    var body = byId("rescore-signs").tBodies[0];
    var base = byId("rescore-result").dataset.replay;
    var changes = result.sign_changes;
    body.textContent = "";
    byId("rescore-sign-count").textContent = changes.count + (changes.count > changes.shown.length ? " (the " + changes.shown.length + " biggest swings shown)" : "") +
      " · " + changes.became_zero + " became 0, " + changes.became_nonzero + " left 0";
    changes.shown.forEach(function (change) {
      var tr = document.createElement("tr");
      tr.className = "sign-change";
      tr.dataset.seq = String(change.seq);
      var link = document.createElement("a");
      link.href = base + encodeURIComponent(String(change.seq)) + "/";
      link.textContent = "#" + change.seq;
      cell(tr, "").appendChild(link);
      cell(tr, String(change.step));
      cell(tr, fmt(change.old));
      cell(tr, fmt(change.new));
      body.appendChild(tr);
    });
  }

  function histogram(result) {
    var div = byId("rescore-histogram");
    var hist = result.histogram;
    if (!window.Plotly || !hist || div.dataset.bins) return;
    var x = [], width = [];
    for (var i = 0; i < hist.old.length; i++) {
      var low = hist.edges[i], high = hist.edges[Math.min(i + 1, hist.edges.length - 1)];
      x.push((low + high) / 2);
      width.push(Math.max(high - low, 1e-9));
    }
    var many = hist.old.length > 1;
    window.Plotly.newPlot(div, [
      { type: "bar", x: x, y: hist.old, width: many ? width : undefined, name: "old", opacity: 0.6 },
      { type: "bar", x: x, y: hist.new, width: many ? width : undefined, name: "new", opacity: 0.6 }
    ], {
      barmode: "overlay", height: 260, margin: { l: 40, r: 10, t: 10, b: 30 },
      xaxis: { title: { text: "total" } }, yaxis: { title: { text: "rollouts" } }
    }, { displaylogo: false, responsive: true });
    div.dataset.bins = String(hist.old.length);
  }

  window.envlabRescore = function (job) {
    var result = job.result;
    if (!result) return;
    byId("rescore-result").hidden = false;
    var missing = result.not_rescored;
    byId("rescore-rescored").textContent = result.rescored + " of " + result.rollouts;
    byId("rescore-not-rescored").textContent = missing.total + " (" + missing.no_facts + " stored before episode facts were kept, " +
      missing.unscored + " unscored, " + missing.in_incomplete_groups + " in groups with one of those)";
    byId("rescore-groups").textContent = result.groups.compared + " of " + result.groups.total;
    var check = result.old_advantage_check;
    byId("rescore-check").textContent = check.compared ? "max difference from the stored ones " + Number(check.max_abs_difference).toExponential(2) + " over " + check.compared + " rollouts" : "no stored advantages";
    compare(result);
    terms(result);
    signs(result);
    histogram(result);
  };
})();
