/*
 * The run page's facts, events and alert banner, kept live.
 *
 * run_live.js owns the socket; it dispatches every message it receives as the DOM event
 * "envlab:run-message" and each re-read it starts (a gap in sequence numbers) as
 * "envlab:run-resync". The messages only say that something changed; this script then reads
 * the truth over REST: GET /api/runs/<id>/ (worker, attempts, checkpoint, started, finished,
 * alerts, status_display) and GET /api/runs/<id>/events/?after=<newest shown id>. A snapshot
 * (every connect and reconnect) and a resync re-read everything, so a missed message costs
 * nothing once the socket is back; events are kept by id, so nothing shows twice.
 *
 * Event messages and alert texts may quote model or environment text: they are inserted
 * with textContent only, never parsed as HTML.
 *
 * The Tools and Checkpoints tables are re-read the same way: the checkpoints with the run
 * (its `checkpoints`), the tools from GET /api/runs/<id>/tools/ on a metrics note that logs a
 * tool's numbers (at most once per TOOLS_EVERY_MS) and on every full read.
 *
 * Test hooks: #tool-table[data-calls] (calls of every tool shown), #checkpoints[data-count]
 * (rows shown); #run-page[data-facts] ("synced" after each completed read, "syncing",
 * "error"); #run-events[data-last-event]; each li.event[data-event-id].
 */
(function () {
  "use strict";

  var root = document.getElementById("run-page");
  var eventsList = document.getElementById("run-events");
  var configNode = document.getElementById("run-live-config");
  if (!root || !eventsList || !configNode) return;
  var cfg = JSON.parse(configNode.textContent);

  var EVENTS_PAGE = 200;
  // As Run.Phase labels them (webapp/runs/models.py).
  var PHASES = { warmup: "SFT warm-up", grpo: "GRPO" };
  var MAX_EVENTS_SHOWN = 500;

  var lastEventId = 0;
  var shownEvents = new Set();
  Array.prototype.forEach.call(eventsList.querySelectorAll("li[data-event-id]"), function (node) {
    var id = Number(node.dataset.eventId);
    shownEvents.add(id);
    if (id > lastEventId) lastEventId = id;
  });
  eventsList.dataset.lastEvent = String(lastEventId);

  var dom = window.envlab.dom, http = window.envlab.http; // webapp/static/js/dom.js, http.js
  var el = dom.el, byId = dom.byId, setText = dom.setText;
  var HttpError = http.HttpError, getJson = http.getJson, sameOriginPath = http.sameOriginPath, sleep = http.sleep;

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  function formatTime(iso) {
    // As the template writes it (Y-m-d H:i:s, in the server's zone, UTC).
    if (typeof iso !== "string" || !iso) return "—";
    var date = new Date(iso);
    if (isNaN(date.getTime())) return iso;
    return (
      date.getUTCFullYear() + "-" + pad(date.getUTCMonth() + 1) + "-" + pad(date.getUTCDate()) + " " +
      pad(date.getUTCHours()) + ":" + pad(date.getUTCMinutes()) + ":" + pad(date.getUTCSeconds())
    );
  }

  function slug(text) {
    // Django's slugify, for the ASCII kinds events have.
    return String(text)
      .toLowerCase()
      .replace(/[^\w\s-]/g, "")
      .trim()
      .replace(/[-\s]+/g, "-");
  }

  // --- facts, badge and alert banner -----------------------------------------------------

  function renderFacts(run) {
    setText("run-worker", run.external ? "outside the lab (external run)" : run.worker_name ? String(run.worker_name) : "—");
    setText("run-attempts", String(run.attempts === undefined ? "—" : run.attempts));
    var phase = byId("run-phase");
    if (phase && typeof run.phase === "string" && phase.dataset.phase !== run.phase) {
      phase.dataset.phase = run.phase;
      phase.textContent = PHASES[run.phase] || run.phase;
    }
    setText(
      "run-checkpoint",
      typeof run.checkpoint_step === "number" ? "step " + run.checkpoint_step : "—"
    );
    setText("run-started", run.started_at ? formatTime(run.started_at) : "—");
    setText("run-finished", run.finished_at ? formatTime(run.finished_at) : "—");
    // The badge's status is run_live.js's (it hears status changes first); only the wording
    // is refined here, for the status it shows ("succeeded, with warnings").
    var badge = byId("run-status");
    if (badge && run.status === root.dataset.status && typeof run.status_display === "string") {
      if (badge.textContent !== run.status_display) badge.textContent = run.status_display;
    }
  }

  function renderAlerts(alerts) {
    var active = (Array.isArray(alerts) ? alerts : []).filter(function (alert) {
      return alert && alert.active;
    });
    var banner = byId("run-alerts");
    if (!active.length) {
      if (banner) banner.parentNode.removeChild(banner);
      return;
    }
    var fresh = el("section", "card alert-banner");
    fresh.id = "run-alerts";
    fresh.setAttribute("role", "alert");
    fresh.appendChild(
      el("h2", null, "Run health: " + active.length + " active alert" + (active.length === 1 ? "" : "s"))
    );
    var list = el("ul");
    active.forEach(function (alert) {
      var item = el("li", "run-alert");
      item.dataset.kind = String(alert.kind);
      item.appendChild(el("strong", null, String(alert.kind)));
      item.appendChild(
        document.createTextNode(" (step " + String(alert.step) + "): " + String(alert.message))
      );
      list.appendChild(item);
    });
    fresh.appendChild(list);
    if (banner) {
      // Replaced only when it reads differently: screen readers announce a new alert region.
      if (banner.textContent !== fresh.textContent) banner.parentNode.replaceChild(fresh, banner);
      return;
    }
    var titleRow = root.querySelector(".title-row");
    root.insertBefore(fresh, titleRow ? titleRow.nextSibling : root.firstChild);
  }

  // --- tools and checkpoints ---------------------------------------------------------------

  var TOOLS_EVERY_MS = 2000;
  var runPath = "/runs/" + Number(cfg.run) + "/";

  function cell(className, child) {
    var td = el("td", className);
    if (child !== undefined && child !== null) td.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    return td;
  }

  function renderTools(table) {
    var section = byId("tool-table");
    if (!section) return;
    var tools = table && Array.isArray(table.tools) ? table.tools : [];
    var calls = 0;
    var fresh = el("section", "card");
    fresh.id = "tool-table";
    fresh.dataset.api = section.dataset.api;
    var h2 = el("h2", null, "Tools ");
    h2.appendChild(el("span", "muted small", "whole run"));
    fresh.appendChild(h2);
    if (!tools.length) {
      var none = el("p", "muted", "No tool calls recorded yet.");
      none.id = "no-tools";
      fresh.appendChild(none);
    } else {
      var tableNode = el("table", "table compact tool-table");
      var head = el("tr");
      ["Tool", "Calls", "Failures", "Mean latency", "Most common error"].forEach(function (name) {
        var th = el("th", null, name);
        th.scope = "col";
        head.appendChild(th);
      });
      tableNode.appendChild(el("thead")).appendChild(head);
      var body = tableNode.appendChild(el("tbody"));
      tools.forEach(function (tool) {
        calls += Number(tool.calls) || 0;
        var row = el("tr", "tool-row");
        row.dataset.tool = String(tool.name);
        row.appendChild(cell("tool-name", el("code", null, String(tool.name))));
        row.appendChild(cell("tool-calls", String(tool.calls)));
        var failures = cell("tool-failures");
        if (typeof tool.first_failure_seq === "number") {
          var link = el("a", null, String(tool.failures));
          link.href = runPath + "?rollout=" + tool.first_failure_seq + "#rollout-" + tool.first_failure_seq;
          link.title = "first failure: rollout #" + tool.first_failure_seq + ", step " + tool.first_failure_step;
          failures.appendChild(link);
        } else {
          failures.appendChild(document.createTextNode(String(tool.failures)));
        }
        if (tool.calls) {
          failures.appendChild(document.createTextNode(" "));
          failures.appendChild(el("span", "muted small", "(" + Math.round((100 * tool.failures) / tool.calls) + "%)"));
        }
        row.appendChild(failures);
        row.appendChild(cell("tool-latency", typeof tool.latency_s === "number" ? tool.latency_s.toFixed(3) + " s" : "—"));
        var error = cell("tool-error");
        if (tool.top_error) {
          error.appendChild(el("pre", "message-content", String(tool.top_error)));
          error.appendChild(document.createTextNode(" "));
          error.appendChild(el("span", "muted small", tool.top_error_count + "× in the sampled steps"));
        } else {
          error.appendChild(document.createTextNode("—"));
        }
        row.appendChild(error);
        body.appendChild(row);
      });
      fresh.appendChild(tableNode);
      var classes = el("p", "muted small tool-error-classes", "Failures by class: ");
      var errors = table.errors && typeof table.errors === "object" ? table.errors : {};
      Object.keys(errors).forEach(function (name, k) {
        if (k) classes.appendChild(document.createTextNode(" · "));
        var span = el("span", "tool-error-class", name + " " + errors[name]);
        span.dataset.class = name;
        classes.appendChild(span);
      });
      fresh.appendChild(classes);
    }
    fresh.dataset.calls = String(calls);
    if (fresh.textContent !== section.textContent || section.dataset.calls === undefined) {
      section.parentNode.replaceChild(fresh, section);
    }
  }

  function formatBytes(bytes) {
    var units = ["bytes", "KB", "MB", "GB", "TB"];
    var value = Number(bytes) || 0;
    var k = 0;
    while (value >= 1024 && k < units.length - 1) {
      value /= 1024;
      k += 1;
    }
    return k ? value.toFixed(1) + " " + units[k] : value + " bytes";
  }

  function renderCheckpoints(checkpoints) {
    var section = byId("checkpoints");
    if (!section || !Array.isArray(checkpoints)) return;
    section.dataset.count = String(checkpoints.length);
    var evaluate = byId("evaluate-checkpoints");
    if (evaluate) evaluate.hidden = !checkpoints.length;
    if (!checkpoints.length) return; // the page's "No checkpoint yet" stays
    var table = section.querySelector("table.checkpoint-table");
    if (!table) {
      table = el("table", "table compact checkpoint-table");
      var head = el("tr");
      ["Step", "Phase", "Saved", "Size", "As a model", ""].forEach(function (name) {
        var th = el("th", null, name);
        th.scope = "col";
        head.appendChild(th);
      });
      table.appendChild(el("thead")).appendChild(head);
      table.appendChild(el("tbody"));
      Array.prototype.forEach.call(section.querySelectorAll("p"), function (p) {
        p.parentNode.removeChild(p);
      });
      section.appendChild(table);
    }
    var body = table.querySelector("tbody");
    var shown = {};
    Array.prototype.forEach.call(body.querySelectorAll("tr.checkpoint-row"), function (row) {
      shown[row.dataset.step] = true;
    });
    checkpoints.forEach(function (checkpoint) {
      var step = String(Number(checkpoint.step));
      if (shown[step]) return;
      var row = el("tr", "checkpoint-row");
      row.dataset.step = step;
      row.appendChild(cell(null, step));
      row.appendChild(cell(null, String(checkpoint.phase)));
      row.appendChild(cell(null, formatTime(checkpoint.created_at)));
      row.appendChild(cell(null, formatBytes(checkpoint.size_bytes)));
      row.appendChild(cell(null, el("code", null, '{"run": ' + Number(cfg.run) + ', "checkpoint": ' + step + "}")));
      var start = el("a", null, "Start a run from it");
      start.href = "/runs/new/?model=run:" + Number(cfg.run) + "@" + step;
      row.appendChild(cell(null, start));
      // By step: before the first shown row of a later step.
      var next = body.firstElementChild;
      while (next && Number(next.dataset.step) < Number(step)) next = next.nextElementSibling;
      body.insertBefore(row, next);
    });
  }

  var toolsReading = null;
  var toolsAgain = false;
  var toolsReadAt = 0;

  function readTools() {
    // One read at a time, at most one per TOOLS_EVERY_MS; asked meanwhile, it reads once more.
    var section = byId("tool-table");
    if (!section || !section.dataset.api) return Promise.resolve();
    if (toolsReading) {
      toolsAgain = true;
      return toolsReading;
    }
    var wait = Math.max(0, toolsReadAt + TOOLS_EVERY_MS - Date.now());
    toolsReading = sleep(wait)
      .then(function () {
        toolsReadAt = Date.now();
        return getJson(section.dataset.api);
      })
      .then(renderTools)
      .catch(function () {}) // the next note or full read tries again
      .finally(function () {
        toolsReading = null;
        if (toolsAgain) {
          toolsAgain = false;
          readTools();
        }
      });
    return toolsReading;
  }

  // --- events ------------------------------------------------------------------------------

  function renderEvent(event) {
    var item = el("li", "event event-" + slug(event.kind));
    item.dataset.eventId = String(event.id);
    var time = el("time", null, formatTime(event.created_at));
    if (typeof event.created_at === "string") time.setAttribute("datetime", event.created_at);
    item.appendChild(time);
    item.appendChild(document.createTextNode("\n"));
    item.appendChild(el("span", "event-kind", String(event.kind)));
    item.appendChild(document.createTextNode("\n"));
    item.appendChild(el("span", "event-message", String(event.message)));
    return item;
  }

  function insertEvent(event) {
    var id = Number(event && event.id);
    if (!isFinite(id) || shownEvents.has(id)) return;
    shownEvents.add(id);
    if (id > lastEventId) lastEventId = id;
    // Newest first: before the first shown event with a smaller id.
    var child = eventsList.firstElementChild;
    while (child && Number(child.dataset.eventId) > id) child = child.nextElementSibling;
    eventsList.insertBefore(renderEvent(event), child);
    var empty = byId("no-events");
    if (empty) empty.parentNode.removeChild(empty);
    var shown = eventsList.querySelectorAll("li[data-event-id]");
    for (var i = shown.length - 1; i >= MAX_EVENTS_SHOWN; i--) {
      shownEvents.delete(Number(shown[i].dataset.eventId));
      eventsList.removeChild(shown[i]);
    }
  }

  async function readEvents() {
    var base = eventsList.dataset.api;
    var url = base + "?after=" + encodeURIComponent(lastEventId) + "&limit=" + EVENTS_PAGE;
    while (url) {
      var body = await getJson(url);
      (body.results || []).forEach(insertEvent);
      url = body.next ? sameOriginPath(body.next) : null;
    }
    eventsList.dataset.lastEvent = String(lastEventId);
  }

  // --- reading: one reader at a time; asked again while reading, it reads once more -----

  var reading = null;
  var readAgain = false;

  function refresh() {
    if (reading) {
      readAgain = true;
      return reading;
    }
    root.dataset.facts = "syncing";
    reading = (async function () {
      var failures = 0;
      do {
        readAgain = false;
        try {
          var run = await getJson(cfg.api_run);
          renderFacts(run);
          renderAlerts(run.alerts);
          renderCheckpoints(run.checkpoints);
          readTools();
          await readEvents();
          failures = 0;
        } catch (error) {
          if (error instanceof HttpError && error.status >= 400 && error.status < 500) {
            root.dataset.facts = "error"; // logged out or no access: the socket closes too
            return;
          }
          // The server restarts or the network is away: read again, a little later each time.
          failures += 1;
          readAgain = true;
          await sleep(Math.min(30000, 1000 * Math.pow(2, Math.min(failures - 1, 5))));
        }
      } while (readAgain);
      root.dataset.facts = "synced";
    })().finally(function () {
      reading = null;
    });
    return reading;
  }

  document.addEventListener("envlab:run-message", function (event) {
    var message = event.detail;
    if (!message || typeof message !== "object") return;
    if (message.type === "snapshot" || message.type === "status" || message.type === "facts") {
      refresh();
    } else if (message.type === "metrics" && message.values && typeof message.values === "object") {
      if (Object.keys(message.values).some(function (key) {
        return key.indexOf("tools/") === 0;
      })) readTools();
    } else if (typeof message.event === "number" && message.event > lastEventId) {
      refresh(); // a note that names a newer event than the newest shown: one was missed
    }
  });
  document.addEventListener("envlab:run-resync", function () {
    refresh();
  });
})();
