/*
 * The live run page: WebSocket notifications, REST for the data.
 *
 * The database is the truth and the socket may drop messages, so every notification is
 * checked against the last applied sequence number; a gap, a reconnect or a redone step
 * is answered by reading the missing data over REST. Rollouts are deduplicated by seq,
 * metric points by step.
 *
 * Everything that comes from a model or an environment is inserted as text
 * (textContent / createTextNode), never parsed as HTML.
 *
 * Test hooks: #run-page[data-last-seq][data-live][data-status]; each .chart[data-points]
 * (points in its first trace); each .rollout[data-seq][data-step] (rollout_list.js).
 */
(function () {
  "use strict";

  var root = document.getElementById("run-page");
  if (!root) return;
  var cfg = JSON.parse(document.getElementById("run-live-config").textContent);
  var chartSpecs = JSON.parse(document.getElementById("run-charts").textContent);

  var NO_RETRY_CODES = { 4401: "not logged in", 4404: "run not found" };
  var socket = null; // webapp/static/js/live_socket.js, opened once the page is drawn
  var ROLLOUT_PAGE = 200;
  var FLUSH_MS = 100;

  var state = {
    lastSeq: Number(cfg.last_seq) || 0,
    syncing: false,
    buffer: [],
    run: {
      status: cfg.status,
      step: cfg.step,
      maxSteps: cfg.max_steps,
      cancelRequested: cfg.cancel_requested,
      // Whether Resume is offered: the server's word (a failed run resumes only after an
      // infrastructure failure), else the resumable statuses.
      resumable: cfg.resumable,
      elapsed: cfg.elapsed_seconds,
      eta: cfg.eta_seconds,
      at: Date.now(),
      // The status as people read it ("succeeded, with warnings"), for the status it was
      // given with: the page's own badge at first, then each snapshot, status note and read.
      display: { status: cfg.status, text: (document.getElementById("run-status") || {}).textContent },
    },
  };

  // --- small helpers -----------------------------------------------------------------

  var dom = window.envlab.dom, http = window.envlab.http; // webapp/static/js/dom.js, http.js
  var el = dom.el, byId = dom.byId, setText = dom.setText;
  var getJson = http.getJson, sameOriginPath = http.sameOriginPath, sleep = http.sleep;

  function setLastSeq(seq) {
    if (seq > state.lastSeq) {
      state.lastSeq = seq;
      root.dataset.lastSeq = String(seq);
    }
  }

  function setLive(live, label) {
    root.dataset.live = live;
    setText("live-indicator", label || live);
    var indicator = byId("live-indicator");
    if (indicator) indicator.className = "live-indicator live-" + live;
  }

  function formatDuration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "—";
    var s = Math.max(0, Math.round(seconds));
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    var rest = s % 60;
    function pad(n) {
      return n < 10 ? "0" + n : String(n);
    }
    if (h) return h + "h " + pad(m) + "m " + pad(rest) + "s";
    if (m) return m + "m " + pad(rest) + "s";
    return rest + "s";
  }

  // --- run status, progress and the clock ----------------------------------------------

  function isActive(status) {
    return cfg.active_statuses.indexOf(status) >= 0;
  }

  function renderRun() {
    var run = state.run;
    root.dataset.status = run.status;
    var badge = byId("run-status");
    if (badge) {
      var display = run.display && run.display.status === run.status && run.display.text;
      badge.textContent = display || run.status;
      badge.className = "badge status-" + run.status;
    }
    var progress = byId("run-progress");
    if (progress) {
      progress.max = run.maxSteps || 1;
      progress.value = run.step || 0;
    }
    setText("run-step", String(run.step || 0));
    setText("run-max-steps", String(run.maxSteps));
    var cancelForm = byId("cancel-form");
    if (cancelForm) cancelForm.hidden = !(isActive(run.status) && !run.cancelRequested);
    var resumeForm = byId("resume-form");
    if (resumeForm) {
      resumeForm.hidden = typeof run.resumable === "boolean" ? !run.resumable : cfg.resumable_statuses.indexOf(run.status) < 0;
    }
    var cancelNote = byId("run-cancel-requested");
    if (cancelNote) cancelNote.hidden = !(run.cancelRequested && isActive(run.status));
    // Nothing more comes live once the run has ended: the badge goes (back when resumed).
    var indicator = byId("live-indicator");
    if (indicator) indicator.hidden = !isActive(run.status);
    var rescoreCard = byId("rescore-card"); // the owner's only
    if (rescoreCard) rescoreCard.hidden = isActive(run.status);
    tick();
  }

  function tick() {
    var run = state.run;
    var since = (Date.now() - run.at) / 1000;
    var running = run.status === "running";
    var elapsed = run.elapsed === null || run.elapsed === undefined ? null : run.elapsed + (running ? since : 0);
    var eta = run.eta === null || run.eta === undefined || !running ? null : Math.max(0, run.eta - since);
    setText("run-elapsed", formatDuration(elapsed));
    setText("run-eta", formatDuration(eta));
  }

  function applyRunSnapshot(data) {
    state.run.status = data.status;
    if (typeof data.status_display === "string") state.run.display = { status: data.status, text: data.status_display };
    if (typeof data.step === "number") state.run.step = data.step;
    if (typeof data.max_steps === "number") state.run.maxSteps = data.max_steps;
    if ("cancel_requested" in data) state.run.cancelRequested = !!data.cancel_requested;
    state.run.resumable = typeof data.resumable === "boolean" ? data.resumable : null;
    if ("resumable_reason" in data) {
      var why = byId("run-not-resumable");
      if (why) {
        var shown = data.status === "failed" && data.resumable_reason ? data.resumable_reason : "";
        why.textContent = shown ? "Cannot resume: " + shown + "." : "";
        why.hidden = !shown;
      }
    }
    var progress = data.progress || data;
    state.run.elapsed = progress.elapsed_seconds;
    state.run.eta = progress.eta_seconds;
    state.run.at = Date.now();
    if ("error" in data) {
      var error = byId("run-error");
      if (error) {
        error.textContent = data.error || "";
        error.hidden = !data.error;
      }
    }
    renderRun();
  }

  function advanceStep(step) {
    // A new step seen in the metrics: move the bar and re-estimate the ETA locally,
    // as the server does (average step time so far).
    var run = state.run;
    if (step <= run.step) return;
    var since = (Date.now() - run.at) / 1000;
    var elapsed = run.elapsed === null || run.elapsed === undefined ? null : run.elapsed + since;
    run.step = step;
    run.elapsed = elapsed;
    run.eta = elapsed !== null && step > 0 ? (elapsed / step) * Math.max(0, run.maxSteps - step) : null;
    run.at = Date.now();
    renderRun();
  }

  var runFetch = null;
  function refreshRun() {
    if (runFetch) return runFetch;
    runFetch = getJson(cfg.api_run)
      .then(applyRunSnapshot)
      .catch(function () {})
      .then(function () {
        runFetch = null;
      });
    return runFetch;
  }

  // --- charts ---------------------------------------------------------------------------
  // Each chart holds, per metric key, the points it plotted (deduplicated by step) and
  // two Plotly traces: the raw series (index 2i) and its smoothed copy (2i + 1), shown
  // with the raw one faint behind it once smoothing is above 0. The fixed charts come from
  // webapp/runs/telemetry/charts.py; the user adds charts of any other key from the metric picker,
  // and their layout (added charts, smoothing, log scale, x axis) is saved per user.

  var C = window.EnvlabCharts;
  var chartPage = JSON.parse(byId("run-chart-page").textContent);
  var WALL_TIME_KEY = chartPage.wall_time_key;
  var chartsBox = byId("charts");
  var layoutState = byId("chart-layout-state");
  var layoutStore = new C.LayoutStore({
    layout: chartPage.layout,
    url: chartPage.api_layout,
    csrf: chartPage.csrf_token,
    onState: function (stateName, message) {
      if (!layoutState) return;
      layoutState.dataset.state = stateName;
      layoutState.textContent =
        stateName === "error" ? message : stateName === "pending" ? "saving layout…" : "";
      layoutState.className = "small " + (stateName === "error" ? "error-text" : "muted");
    },
  });
  var clock = new C.WallClock();
  clock.replace(chartPage.wall_time);
  var knownKeys = new Set();
  var addedByKey = new Map(); // metric key -> its added chart
  var metricChartCount = 0;
  var metricsLoading = 0;

  function plotly() {
    return window.Plotly || null;
  }

  function makeChart(spec, div, ref, removable) {
    var style = {};
    var first = spec.figure.data[0] || {};
    Object.keys(first).forEach(function (k) {
      if (k !== "name" && k !== "x" && k !== "y") style[k] = first[k];
    });
    var chart = {
      ref: ref,
      spec: spec,
      div: div,
      plotDiv: null,
      style: style,
      keys: [],
      points: {}, // key -> {steps: [...], values: Map(step -> value)}
      ema: {}, // key -> smoothing state after its last point
      plotted: false,
      removable: removable,
      patterns: spec.match.patterns.map(function (p) {
        return new RegExp("^(?:" + p + ")$");
      }),
    };
    if (div) {
      var settings = layoutStore.settingsFor(ref);
      div.appendChild(
        C.renderControls(settings, {
          maxSmoothing: chartPage.max_smoothing,
          removable: removable,
          onChange: function (patch) {
            layoutStore.set(ref, patch);
            renderChart(chart);
          },
          onRemove: function () {
            removeMetricChart(chart);
          },
        })
      );
      chart.note = el("p", "chart-note muted small");
      chart.note.hidden = true;
      div.appendChild(chart.note);
      chart.plotDiv = el("div", "chart-plot");
      div.appendChild(chart.plotDiv);
    }
    return chart;
  }

  var charts = chartSpecs.map(function (spec) {
    return makeChart(spec, byId("chart-" + spec.id), spec.id, false);
  });
  var fixedCount = charts.length;

  function fixedChartFor(key) {
    for (var i = 0; i < fixedCount; i++) {
      var chart = charts[i];
      if (chart.spec.match.always.indexOf(key) >= 0) return chart;
      for (var j = 0; j < chart.patterns.length; j++) {
        if (chart.patterns[j].test(key)) return chart;
      }
    }
    return null;
  }

  function chartsFor(key) {
    var found = [];
    var fixed = fixedChartFor(key);
    if (fixed) found.push(fixed);
    if (addedByKey.has(key)) found.push(addedByKey.get(key));
    return found;
  }

  function xOf(chart, steps) {
    if (layoutStore.settingsFor(chart.ref).x !== "wall_time") return steps.slice();
    return steps.map(function (step) {
      var seconds = clock.at(step);
      return seconds === null ? null : seconds * 1000;
    });
  }

  function smoothingSpan() {
    // Smoothing's step scale (run_charts.js): the run's planned length, fixed while it trains.
    return state.run.maxSteps;
  }

  function chartData(chart) {
    var settings = layoutStore.settingsFor(chart.ref);
    var weight = settings.smoothing;
    var data = [];
    chart.keys.forEach(function (key, i) {
      var known = chart.points[key];
      var xs = xOf(chart, known.steps);
      var ys = known.steps.map(function (step) {
        return known.values.get(step);
      });
      var state = C.emaStart(smoothingSpan());
      var smoothed = ys.map(function (y, j) {
        return C.emaStep(state, y, weight, known.steps[j]);
      });
      chart.ema[key] = state;
      var color = C.PALETTE[i % C.PALETTE.length];
      var name = C.plotlyText(key);
      var raw = JSON.parse(JSON.stringify(chart.style));
      raw.name = name;
      raw.x = xs;
      raw.y = ys;
      raw.legendgroup = "k" + i;
      raw.marker = Object.assign({}, raw.marker || {}, { color: color });
      raw.line = Object.assign({}, raw.line || {}, { color: color });
      raw.opacity = weight > 0 ? 0.25 : 1;
      raw.showlegend = !(weight > 0);
      data.push(raw);
      data.push({
        type: "scatter",
        mode: "lines",
        name: name + " (smoothed)",
        x: xs.slice(),
        y: smoothed,
        legendgroup: "k" + i,
        line: { color: color, width: 2 },
        visible: weight > 0,
        showlegend: weight > 0,
      });
    });
    return data;
  }

  function chartLayout(chart) {
    var settings = layoutStore.settingsFor(chart.ref);
    var layout = JSON.parse(JSON.stringify(chart.spec.figure.layout));
    layout.title = { text: C.plotlyText(chart.spec.title) };
    layout.yaxis = Object.assign({}, layout.yaxis || {}, { type: settings.log_y ? "log" : "linear" });
    if (layout.yaxis.title && layout.yaxis.title.text) {
      layout.yaxis.title = { text: C.plotlyText(layout.yaxis.title.text) };
    }
    layout.xaxis =
      settings.x === "wall_time"
        ? { title: { text: "wall time (UTC)" }, type: "date" }
        : { title: { text: "step" }, rangemode: "tozero", type: "linear" };
    // A zoom kept across another x axis or y scale would show an empty range.
    layout.uirevision = chart.ref + "|" + settings.x + "|" + settings.log_y;
    return layout;
  }

  function setChartHooks(chart) {
    if (!chart.div) return;
    var settings = layoutStore.settingsFor(chart.ref);
    var firstKey = chart.keys[0];
    var count = firstKey && chart.points[firstKey] ? chart.points[firstKey].steps.length : 0;
    chart.div.dataset.points = String(count);
    chart.div.dataset.smoothing = settings.smoothing.toFixed(2);
    chart.div.dataset.log = String(settings.log_y);
    chart.div.dataset.x = settings.x;
    if (chart.note) {
      chart.note.hidden = !(settings.x === "wall_time" && !clock.size());
      chart.note.textContent = chart.note.hidden ? "" : "This run recorded no wall times: plot it by step.";
    }
  }

  function renderChart(chart) {
    var P = plotly();
    if (P && chart.plotDiv) {
      var config = { responsive: true, displaylogo: false };
      var data = chartData(chart);
      if (chart.plotted) P.react(chart.plotDiv, data, chartLayout(chart), config);
      else P.newPlot(chart.plotDiv, data, chartLayout(chart), config);
      chart.plotted = true;
      chart.div.classList.add("plotted");
    }
    setChartHooks(chart);
  }

  function chartKeysFor(chart, series) {
    var always = chart.spec.match.always.slice();
    if (chart.removable) return always;
    var extra = Object.keys(series)
      .filter(function (key) {
        return always.indexOf(key) < 0 && fixedChartFor(key) === chart;
      })
      .sort();
    return always.concat(extra);
  }

  function drawChart(chart, series) {
    // Replace a chart's data with a full series ({key: [[step, value], ...]}).
    chart.keys = chartKeysFor(chart, series);
    chart.points = {};
    chart.keys.forEach(function (key) {
      var rows = series[key] || [];
      var map = new Map();
      rows.forEach(function (p) {
        map.set(p[0], p[1]);
      });
      chart.points[key] = {
        steps: rows.map(function (p) {
          return p[0];
        }),
        values: map,
      };
    });
    renderChart(chart);
  }

  function initialCharts() {
    charts.forEach(function (chart) {
      var series = {};
      chart.spec.figure.data.forEach(function (trace) {
        series[trace.name] = trace.x.map(function (x, i) {
          return [x, trace.y[i]];
        });
      });
      drawChart(chart, series);
    });
    chartPage.metric_charts.forEach(function (spec) {
      var key = spec.keys[0];
      var chart = createMetricChart(key, spec);
      var series = {};
      series[key] = spec.figure.data[0].x.map(function (x, i) {
        return [x, spec.figure.data[0].y[i]];
      });
      drawChart(chart, series);
    });
  }

  // --- added charts and the metric picker ---

  function metricSpec(key) {
    // As webapp/runs/telemetry/charts.py metric_chart writes it (for a key picked on this page).
    var base = chartSpecs.length ? chartSpecs[0].figure : { data: [{}], layout: {} };
    var layout = JSON.parse(JSON.stringify(base.layout));
    layout.showlegend = false;
    layout.yaxis = { title: { text: key } };
    var trace = JSON.parse(JSON.stringify(base.data[0] || {}));
    trace.name = key;
    trace.x = [];
    trace.y = [];
    return {
      id: "metric:" + key,
      title: key,
      keys: [key],
      match: { always: [key], patterns: [] },
      figure: { data: [trace], layout: layout },
    };
  }

  function createMetricChart(key, spec) {
    metricChartCount += 1;
    var div = el("div", "chart card chart-metric");
    div.id = "chart-metric-" + metricChartCount;
    div.dataset.chart = "metric:" + key;
    div.dataset.metric = key;
    div.dataset.points = "0";
    div.appendChild(el("h3", "chart-title", key));
    chartsBox.appendChild(div);
    var chart = makeChart(spec || metricSpec(key), div, "metric:" + key, true);
    chart.keys = [key];
    chart.points[key] = { steps: [], values: new Map() };
    charts.push(chart);
    addedByKey.set(key, chart);
    knownKeys.add(key);
    return chart;
  }

  function addMetricChart(key) {
    if (addedByKey.has(key) || C.isInternal(key)) return;
    if (layoutStore.layout.metrics.length >= chartPage.max_metric_charts) {
      layoutStore.onState("error", "At most " + chartPage.max_metric_charts + " added charts: remove one first.");
      return;
    }
    var chart = createMetricChart(key, null);
    layoutStore.addMetric(key);
    renderChart(chart);
    refreshPicker();
    // Points announced meanwhile wait in `pending` and are checked against what this read
    // brings (a point at or below its last step is a duplicate).
    metricsLoading += 1;
    var url =
      cfg.api_metrics + "?max_points=" + encodeURIComponent(cfg.metric_points) + "&key=" + encodeURIComponent(key);
    getJson(url)
      .then(function (body) {
        if (addedByKey.get(key) === chart) drawChart(chart, (body && body.series) || {});
      })
      .catch(function () {
        catchUp(state.lastSeq);
      })
      .finally(function () {
        metricsLoading -= 1;
        if (pending.length) scheduleFlush();
      });
  }

  function removeMetricChart(chart) {
    var key = chart.keys[0];
    if (addedByKey.get(key) !== chart) return;
    addedByKey.delete(key);
    charts.splice(charts.indexOf(chart), 1);
    var P = plotly();
    if (P && chart.plotDiv && chart.plotted) P.purge(chart.plotDiv);
    if (chart.div && chart.div.parentNode) chart.div.parentNode.removeChild(chart.div);
    layoutStore.removeMetric(key);
    refreshPicker();
  }

  var pickerBox = byId("metric-groups");
  var pickerEmpty = byId("metric-picker-empty");
  var pickerFilter = byId("metric-filter");

  function refreshPicker() {
    if (!pickerBox) return;
    C.renderPicker(
      pickerBox,
      pickerEmpty,
      Array.from(knownKeys),
      pickerFilter ? pickerFilter.value : "",
      function (key) {
        return addedByKey.has(key);
      },
      addMetricChart
    );
  }

  function learnKeys(keys) {
    var before = knownKeys.size;
    keys.forEach(function (key) {
      if (!C.isInternal(key)) knownKeys.add(key);
    });
    if (knownKeys.size !== before) refreshPicker();
  }

  if (pickerFilter) pickerFilter.addEventListener("input", refreshPicker);
  learnKeys(chartPage.keys);

  // Metrics: points from notifications wait here and are plotted in one batch per chart.
  var pending = [];
  var flushTimer = null;
  var metricsReload = null;
  var metricsReloadAgain = false;

  function queueMetrics(step, values) {
    var keys = Object.keys(values || {});
    learnKeys(keys);
    var wall = (values || {})[WALL_TIME_KEY];
    if (typeof step === "number" && typeof wall === "number") clock.add(step, wall);
    keys.forEach(function (key) {
      var value = values[key];
      if (typeof value !== "number" || !isFinite(value)) return;
      if (!chartsFor(key).length) return;
      pending.push({ key: key, step: step, value: value });
    });
    if (typeof step === "number") advanceStep(step);
    scheduleFlush();
  }

  function scheduleFlush() {
    if (flushTimer === null) flushTimer = setTimeout(flushMetrics, FLUSH_MS);
  }

  function flushMetrics() {
    flushTimer = null;
    if (metricsReload || metricsLoading) return; // plotted after the read, checked against its data
    var batch = pending;
    pending = [];
    var redoneFrom = Infinity; // the earliest step recorded again with other values
    var perChart = new Map();
    batch.forEach(function (point) {
      chartsFor(point.key).forEach(function (chart) {
        var known = chart.points[point.key];
        if (known) {
          var last = known.steps.length ? known.steps[known.steps.length - 1] : -Infinity;
          if (point.step <= last) {
            // Already plotted (a duplicate after a catch-up) or a step redone after a
            // resume with other values: then the stored series is re-read.
            if (known.values.get(point.step) !== point.value) redoneFrom = Math.min(redoneFrom, point.step);
            return;
          }
        }
        if (!perChart.has(chart)) perChart.set(chart, new Map());
        var byKey = perChart.get(chart);
        if (!byKey.has(point.key)) byKey.set(point.key, []);
        var list = byKey.get(point.key);
        if (list.length && point.step <= list[list.length - 1].step) {
          if (list[list.length - 1].step === point.step) list[list.length - 1] = point;
          else redoneFrom = Math.min(redoneFrom, point.step);
          return;
        }
        list.push(point);
      });
    });
    if (redoneFrom !== Infinity) {
      redoFrom(redoneFrom);
      return;
    }
    var P = plotly();
    perChart.forEach(function (byKey, chart) {
      var weight = layoutStore.settingsFor(chart.ref).smoothing;
      var update = { x: [], y: [] };
      var indices = [];
      var newKey = false;
      byKey.forEach(function (list, key) {
        var known = chart.points[key];
        if (!known) {
          known = chart.points[key] = { steps: [], values: new Map() };
          chart.keys.push(key);
          newKey = true;
        }
        var steps = list.map(function (p) {
          return p.step;
        });
        var values = list.map(function (p) {
          return p.value;
        });
        list.forEach(function (p) {
          known.steps.push(p.step);
          known.values.set(p.step, p.value);
        });
        if (newKey) return;
        var state = chart.ema[key] || (chart.ema[key] = C.emaStart(smoothingSpan()));
        var xs = xOf(chart, steps);
        var i = chart.keys.indexOf(key);
        update.x.push(xs, xs.slice());
        update.y.push(
          values,
          values.map(function (v, j) {
            return C.emaStep(state, v, weight, steps[j]);
          })
        );
        indices.push(2 * i, 2 * i + 1);
      });
      if (newKey || !chart.plotted) renderChart(chart);
      else {
        if (P && chart.plotDiv && indices.length) P.extendTraces(chart.plotDiv, update, indices);
        setChartHooks(chart);
      }
    });
  }

  function reloadMetrics() {
    if (metricsReload) {
      metricsReloadAgain = true;
      return metricsReload;
    }
    var url = cfg.api_metrics + "?max_points=" + encodeURIComponent(cfg.metric_points);
    metricsReload = getJson(url)
      .then(function (body) {
        var series = body.series || {};
        clock.replace(series[WALL_TIME_KEY] || []);
        learnKeys(Object.keys(series));
        charts.forEach(function (chart) {
          drawChart(chart, series);
        });
      })
      .finally(function () {
        metricsReload = null;
        if (metricsReloadAgain) {
          metricsReloadAgain = false;
          return reloadMetrics();
        }
        if (pending.length) scheduleFlush();
      });
    return metricsReload;
  }

  // --- rollouts -------------------------------------------------------------------------
  // The transcript list is webapp/static/js/rollout_list.js (virtualised, paged per step); this
  // script feeds it the live rollouts, read in order after the last one it was given.

  var feed = byId("rollouts");
  var pageParams = new URLSearchParams(window.location.search);
  var rolloutList = new window.EnvlabRolloutList({
    box: feed,
    filter: byId("rollout-step-filter"),
    status: byId("rollout-list-status"),
    api: cfg.api_rollouts,
    stepsApi: cfg.api_rollout_steps,
    runId: cfg.run,
    promptUrl: feed.dataset.promptUrl,
    steps: cfg.rollout_steps || [],
    throughSeq: cfg.last_seq,
    renderAll: pageParams.get("render") === "all",
    onEmpty: function (empty) {
      var note = byId("no-rollouts");
      if (note) note.hidden = !empty;
    },
  });
  // Everything up to the page's seq is in the list's counts (paged in as it scrolls).
  var lastRolloutSeq = Number(cfg.last_seq) || 0;
  var startStep = pageParams.get("step");
  if (startStep !== null && /^[0-9]{1,9}$/.test(startStep)) rolloutList.setFilter(Number(startStep));
  var linked = pageParams.get("rollout") || (/^#rollout-([0-9]{1,15})$/.exec(window.location.hash) || [])[1];
  if (linked && /^[0-9]{1,15}$/.test(linked)) rolloutList.focus(Number(linked));

  // The search above the list: its fields are the rollouts API's parameters, kept in the
  // page's query string, so a reload (or a shared link) shows the same search.
  var SEARCH_FIELDS = ["q", "min_reward", "max_reward", "term", "term_min", "tool", "tool_failed", "unscored", "ordering"];
  var searchForm = byId("rollout-search");

  function searchQuery() {
    var params = new URLSearchParams();
    SEARCH_FIELDS.forEach(function (name) {
      var field = searchForm.elements.namedItem(name);
      var value = field ? String(field.value).trim() : "";
      if (value) params.set(name, value);
    });
    return params.toString();
  }

  function keepInUrl(query) {
    var params = new URLSearchParams(window.location.search);
    SEARCH_FIELDS.concat(["rollout"]).forEach(function (name) {
      params.delete(name);
    });
    new URLSearchParams(query).forEach(function (value, name) {
      params.set(name, value);
    });
    if (rolloutList.filter === null) params.delete("step");
    else params.set("step", String(rolloutList.filter));
    var search = params.toString();
    window.history.replaceState(null, "", window.location.pathname + (search ? "?" + search : "") + window.location.hash);
  }

  function searchStatus(matches, how) {
    var node = byId("rollout-search-status");
    if (!node) return;
    var text = "";
    if (rolloutList.search) {
      text = matches === null ? "searching…" : matches + " match" + (matches === 1 ? "" : "es");
      if (how && how.mode === "scan") text += " (text searched in the newest " + how.scanned + " of at most " + how.limit + " rollouts)";
    }
    node.textContent = text;
  }

  if (searchForm && !pageParams.get("rollout") && pageParams.get("render") !== "all") {
    SEARCH_FIELDS.forEach(function (name) {
      var field = searchForm.elements.namedItem(name);
      var value = pageParams.get(name);
      if (field && value !== null) field.value = value;
    });
    rolloutList.onSearched = searchStatus;
    var startQuery = searchQuery();
    if (startQuery) rolloutList.setSearch(startQuery);
    searchForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var query = searchQuery();
      rolloutList.setSearch(query);
      searchStatus(null, null);
      keepInUrl(query);
    });
    searchForm.addEventListener("reset", function () {
      // After the form has cleared its fields.
      setTimeout(function () {
        rolloutList.setSearch("");
        searchStatus(null, null);
        keepInUrl("");
      }, 0);
    });
    byId("rollout-step-filter").addEventListener("change", function () {
      keepInUrl(rolloutList.search);
    });
  }

  function insertRollout(r) {
    var seq = Number(r.seq);
    if (seq > lastRolloutSeq) lastRolloutSeq = seq;
    rolloutList.add(r);
  }

  function redoFrom() {
    // A resumed run trains again from its checkpoint: the server forgot what came after
    // it. Re-read the series and the list's sizes; reading from the seq those cover
    // brings the rollouts of the new timeline.
    var sized = rolloutList.reload().then(function (coveredSeq) {
      lastRolloutSeq = coveredSeq;
      return fetchRollouts();
    });
    Promise.all([reloadMetrics(), sized]).catch(function () {
      catchUp(state.lastSeq);
    });
  }

  var rolloutFetch = null;
  var rolloutFetchAgain = false;

  function fetchRollouts() {
    // One reader at a time, always from the last shown seq: no gap, no duplicate.
    if (rolloutFetch) {
      rolloutFetchAgain = true;
      return rolloutFetch;
    }
    rolloutFetch = (async function () {
      var url =
        cfg.api_rollouts + "?after_seq=" + encodeURIComponent(lastRolloutSeq) + "&limit=" + ROLLOUT_PAGE;
      while (url) {
        var body = await getJson(url);
        (body.results || []).forEach(insertRollout);
        url = body.next ? sameOriginPath(body.next) : null;
      }
    })().finally(function () {
      rolloutFetch = null;
      if (rolloutFetchAgain) {
        rolloutFetchAgain = false;
        return fetchRollouts();
      }
    });
    return rolloutFetch;
  }

  // --- notifications --------------------------------------------------------------------

  var catchUpRun = null;
  var catchUpTarget = 0;
  var catchUpAgain = false;

  function catchUp(coveredSeq) {
    // Re-read everything over REST. Events at or below `coveredSeq` were stored before
    // the read began, so afterwards they are shown; notifications wait in the buffer
    // meanwhile and are applied (or skipped by seq) once the read is done.
    catchUpTarget = Math.max(catchUpTarget, coveredSeq);
    state.syncing = true;
    setLive("syncing");
    // Whatever else the page shows (run_facts.js) is re-read too.
    document.dispatchEvent(new CustomEvent("envlab:run-resync", { detail: { seq: coveredSeq } }));
    if (catchUpRun) {
      catchUpAgain = true;
      return catchUpRun;
    }
    catchUpRun = (async function () {
      do {
        catchUpAgain = false;
        var target = catchUpTarget;
        try {
          await Promise.all([reloadMetrics(), fetchRollouts()]);
          setLastSeq(target);
        } catch (e) {
          // The server is restarting or unreachable: read again shortly.
          catchUpAgain = true;
          await sleep(2000);
        }
      } while (catchUpAgain);
      catchUpRun = null;
      state.syncing = false;
      var buffered = state.buffer;
      state.buffer = [];
      buffered.sort(function (a, b) {
        return (Number(a.seq) || 0) - (Number(b.seq) || 0);
      });
      buffered.forEach(handle);
      if (!state.syncing) setLive(socket && socket.isOpen() ? "live" : "reconnecting");
    })();
    return catchUpRun;
  }

  function handle(message) {
    if (!message || typeof message !== "object") return;
    if (message.type === "snapshot") {
      socket.resetBackoff();
      applyRunSnapshot(message);
      state.buffer = [];
      catchUp(Number(message.seq) || 0);
      return;
    }
    if (message.type === "status") {
      if (message.status) {
        state.run.status = message.status;
        if (typeof message.status_display === "string") {
          state.run.display = { status: message.status, text: message.status_display };
        }
        if (typeof message.step === "number") state.run.step = Math.max(state.run.step, message.step);
        renderRun();
      }
      refreshRun();
      return;
    }
    if (state.syncing) {
      state.buffer.push(message);
      return;
    }
    var seq = Number(message.seq);
    if (!isFinite(seq) || seq <= state.lastSeq) return; // already shown
    if (message.type === "metrics") {
      if (seq > state.lastSeq + 1) {
        catchUp(seq);
        return;
      }
      setLastSeq(seq);
      queueMetrics(Number(message.step), message.values);
    } else if (message.type === "rollouts") {
      var first = Number(message.first_seq);
      if (!isFinite(first) || first > state.lastSeq + 1) {
        catchUp(seq);
        return;
      }
      setLastSeq(seq);
      fetchRollouts().catch(function () {
        catchUp(seq);
      });
    }
  }

  initialCharts();
  renderRun();
  setInterval(tick, 500);
  if (!window.Plotly) {
    // plotly.js loads before this script (both deferred); when it failed, the rest of the
    // page still works.
    charts.forEach(function (chart) {
      if (chart.div) chart.div.appendChild(el("p", "muted", "Charts unavailable: plotly.js did not load."));
    });
  }
  socket = window.envlab.liveSocket.open({
    path: cfg.ws_path,
    noRetry: NO_RETRY_CODES,
    onState: setLive,
    onMessage: function (message) {
      handle(message);
      // Every message, for the other parts of the page (run_facts.js); they read over REST.
      document.dispatchEvent(new CustomEvent("envlab:run-message", { detail: message }));
    },
  });
})();
