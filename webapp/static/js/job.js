// A job's page: polls GET /api/jobs/<id>/ while it runs; a finished dry run draws its verdict
// and one histogram per reward term and for the total. All text goes in as textContent.
(function () {
  "use strict";
  var root = document.getElementById("job-page");
  if (!root) return;

  var byId = window.envlab.dom.byId;

  function bars(div, name, hist) {
    if (!window.Plotly || !hist) return;
    var edges = hist.edges, counts = hist.counts, x = [], width = [];
    for (var i = 0; i < counts.length; i++) {
      x.push((edges[i] + edges[Math.min(i + 1, edges.length - 1)]) / 2);
      width.push(Math.max(edges[Math.min(i + 1, edges.length - 1)] - edges[i], 1e-9) || 0.1);
    }
    window.Plotly.newPlot(div, [{ type: "bar", x: x, y: counts, width: counts.length > 1 ? width : undefined, name: name }],
      { height: 220, margin: { l: 40, r: 10, t: 10, b: 30 }, xaxis: { title: { text: name } }, yaxis: { title: { text: "episodes" } } },
      { displaylogo: false, responsive: true });
    div.dataset.bins = String(counts.length);
  }

  function show(job) {
    root.dataset.status = job.status;
    byId("job-status").textContent = job.status;
    byId("job-status").className = "badge status-" + job.status;
    byId("job-progress").max = job.progress.total;
    byId("job-progress").value = job.progress.done;
    byId("job-progress-text").textContent = job.progress.done + " / " + job.progress.total;
    var error = byId("job-error");
    error.textContent = job.error || "";
    error.hidden = !job.error;
    var result = job.result;
    if (job.kind === "rescore" && window.envlabRescore) window.envlabRescore(job);  // webapp/static/js/rescore.js
    if (job.kind === "hub_push" && result) {
      byId("hub-push-result").hidden = false;
      byId("hub-push-rows").textContent = String(result.rows);
      byId("hub-push-bytes").textContent = String(result.bytes);
      byId("hub-push-path").textContent = String(result.path);
      byId("hub-push-commit").textContent = String(result.commit);
      var link = byId("hub-push-link");
      link.textContent = String(result.repo_id);
      // Only a web address becomes a link: the result comes from the Hub's answer.
      if (/^https?:\/\//.test(String(result.url))) link.href = String(result.url);
      return;
    }
    if (job.kind !== "dry_run" || !result) return;
    byId("dry-run-result").hidden = false;
    byId("dry-run-verdict").textContent = result.verdict;
    byId("dry-run-zero").textContent = Math.round(result.zero_variance_fraction * 100) + " %";
    byId("dry-run-spread").textContent = result.mean_group_std.toFixed(4);
    var probe = result.probe;  // absent from dry runs made before the probe existed
    if (probe) {
      byId("dry-run-pass-rate").textContent = probe.pass_rate.toFixed(2) + " (" + probe.passed + " of " +
        probe.episodes + " episodes above " + probe.pass_threshold.toFixed(3) + ", " + probe.threshold_from + ")";
      byId("dry-run-expected").textContent = Math.round(probe.expected_zero_variance_fraction * 100) + " % (G = " +
        probe.group_size + ")";
      var warning = byId("dry-run-probe-warning");
      warning.textContent = probe.warning || "";
      warning.hidden = !probe.warning;
    }
    bars(byId("histogram-total"), "total", result.total.histogram);
    var holder = byId("term-histograms");
    holder.textContent = "";
    Object.keys(result.terms).forEach(function (name) {
      var title = document.createElement("h3");
      title.textContent = name;
      var div = document.createElement("div");
      div.className = "chart term-histogram";
      div.dataset.term = name;
      holder.appendChild(title);
      holder.appendChild(div);
      bars(div, name, result.terms[name].histogram);
    });
  }

  function poll() {
    window.envlab.http.getJsonOrNull(root.dataset.api)
      .then(function (job) {
        if (!job) return;
        show(job);
        if (job.status === "queued" || job.status === "running") window.setTimeout(poll, 1500);
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  }

  function start() {
    var job = JSON.parse(byId("job-data").textContent);
    show(job);
    if (job.status === "queued" || job.status === "running") window.setTimeout(poll, 1500);
  }
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
