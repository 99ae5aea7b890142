/*
 * The home page's runs table: bulk tag and bulk delete of the ticked runs over the REST API
 * (PATCH / DELETE /api/runs/<id>/), then a reload, which keeps the table's filters, order and
 * summary columns (they live in the URL). Filters, sorting and paging are plain links and
 * GET forms: they work without this script.
 */
(function () {
  "use strict";
  var dom = window.envlab.dom;
  var form = dom.byId("compare-runs");
  if (!form) return;

  function ticked() {
    return Array.prototype.slice.call(form.querySelectorAll("input[name=run]:checked")).map(function (box) {
      return box.closest("tr");
    });
  }

  function send(method, runId, body) {
    return fetch("/api/runs/" + runId + "/", {
      method: method,
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-CSRFToken": form.elements.csrfmiddlewaretoken.value,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (response) {
      if (response.ok) return null;
      return response.json().then(
        function (data) { return "#" + runId + ": " + (data.detail || JSON.stringify(data)); },
        function () { return "#" + runId + ": HTTP " + response.status; }
      );
    });
  }

  function finish(results) {
    var failures = results.filter(function (message) { return message; });
    if (!failures.length) {
      window.location.reload();
      return;
    }
    var list = dom.byId("bulk-errors");
    dom.clear(list);
    failures.forEach(function (message) { list.appendChild(dom.el("li", "", message)); });
    list.hidden = false;
    dom.setText("bulk-state", (results.length - failures.length) + " of " + results.length + " done; reload to see them");
  }

  dom.byId("bulk-tag-button").addEventListener("click", function () {
    var tag = dom.byId("bulk-tag").value.trim();
    var rows = ticked();
    if (!tag || !rows.length) {
      dom.setText("bulk-state", "tick runs and write a tag first");
      return;
    }
    dom.setText("bulk-state", "tagging…");
    Promise.all(rows.map(function (row) {
      var tags = row.dataset.tags ? row.dataset.tags.split(",") : [];
      if (tags.indexOf(tag) < 0) tags.push(tag);
      return send("PATCH", row.dataset.runId, { tags: tags });
    })).then(finish);
  });

  dom.byId("bulk-delete-button").addEventListener("click", function () {
    var rows = ticked();
    if (!rows.length) {
      dom.setText("bulk-state", "tick the runs to delete first");
      return;
    }
    if (!window.confirm("Delete " + rows.length + " run(s) with their metrics, transcripts and checkpoints?")) return;
    dom.setText("bulk-state", "deleting…");
    Promise.all(rows.map(function (row) { return send("DELETE", row.dataset.runId); })).then(finish);
  });
})();
