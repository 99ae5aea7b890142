// The evaluation page: progress polled over REST while running, the results table sortable,
// the checkpoint chart drawn from the server's figure JSON, transcripts rendered as text.
(function () {
  "use strict";
  var page = document.getElementById("evaluation-page");
  if (!page) return;

  var el = window.envlab.dom.el; // text only, never HTML

  // --- sortable table -------------------------------------------------------------------
  var table = document.getElementById("results-table");
  if (table) {
    var direction = {};
    table.querySelectorAll("th button.sort-button").forEach(function (button, column) {
      button.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var up = direction[column] = !direction[column];
        rows.sort(function (a, b) {
          var x = a.cells[column].getAttribute("data-value"), y = b.cells[column].getAttribute("data-value");
          var nx = parseFloat(x), ny = parseFloat(y);
          var cmp = !isNaN(nx) && !isNaN(ny) ? nx - ny : String(x).localeCompare(String(y));
          return up ? cmp : -cmp;
        });
        rows.forEach(function (row) { body.appendChild(row); });
        table.querySelectorAll("th").forEach(function (th) { th.removeAttribute("aria-sort"); });
        button.parentNode.setAttribute("aria-sort", up ? "ascending" : "descending");
      });
    });
  }

  // --- transcripts ----------------------------------------------------------------------
  var list = document.getElementById("episode-list");
  var data = document.getElementById("episodes-data");
  if (list && data) {
    JSON.parse(data.textContent).forEach(function (episode) {
      var box = el("details", "episode");
      var summary = el("summary", null, episode.model + " · episode " + episode.index + " · seed " + episode.seed +
        " · reward " + episode.reward + (episode.won ? " · won" : "") +
        (episode.tool_failures ? " · " + episode.tool_failures + " failed call(s)" : ""));
      if (typeof episode.replay_url === "string" && episode.replay_url.charAt(0) === "/") {
        var replay = el("a", "episode-replay", "replay");
        replay.href = episode.replay_url;
        summary.appendChild(document.createTextNode(" · "));
        summary.appendChild(replay);
      }
      box.appendChild(summary);
      (episode.messages || []).forEach(function (message) {
        var row = el("div", "message role-" + String(message.role || ""));
        row.appendChild(el("strong", null, String(message.role || "") + (message.name ? " (" + message.name + ")" : "") + ": "));
        var content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
        row.appendChild(el("span", "content", content));
        (message.tool_calls || []).forEach(function (call) {
          var fn = call["function"] || {};
          row.appendChild(el("code", "tool-call", (fn.name || "?") + "(" + JSON.stringify(fn.arguments) + ")"));
        });
        box.appendChild(row);
      });
      list.appendChild(box);
    });
  }

  // --- checkpoint chart -----------------------------------------------------------------
  function drawChart() {
    var figure = document.getElementById("checkpoint-figure");
    var div = document.getElementById("checkpoint-chart");
    if (!figure || !div) return;
    if (!window.Plotly) { div.appendChild(el("p", "muted", "Chart unavailable: plotly.js did not load.")); return; }
    var spec = JSON.parse(figure.textContent);
    window.Plotly.newPlot(div, spec.data, spec.layout, { displaylogo: false, responsive: true });
  }
  if (document.readyState === "complete") drawChart(); else window.addEventListener("load", drawChart);

  // --- progress while running -----------------------------------------------------------
  var status = page.getAttribute("data-status");
  if (status === "queued" || status === "running") {
    var timer = setInterval(function () {
      window.envlab.http.getJsonOrNull(page.getAttribute("data-api"))
        .then(function (body) {
          if (!body) return;
          var bar = document.getElementById("evaluation-progress");
          bar.max = body.progress.total; bar.value = body.progress.done;
          document.getElementById("evaluation-progress-text").textContent =
            body.progress.done + " / " + body.progress.total + " episodes";
          document.getElementById("evaluation-status").textContent = body.status;
          if (body.status !== "queued" && body.status !== "running") {
            clearInterval(timer);
            window.location.reload(); // the table and transcripts as stored
          }
        })
        .catch(function () {});
    }, 2000);
  }
})();
