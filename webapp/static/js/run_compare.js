/*
 * The run comparison page: one chart per metric, each the server's figure JSON (trace names
 * are plain text; grouped, each group is a band and its mean line). Smoothing and log scale
 * are the run page's (webapp/static/js/run_charts.js): the same step-weighted smoothing, kept in the
 * URL (`smoothing=`, `log=1`, `x=wall_time`: ungrouped only) so a reload or a shared link shows the same. While one of the
 * runs trains, the page re-reads the same comparison from the API.
 *
 * Test hooks: each .compare-chart[data-drawn] (traces from the server), [data-smoothing],
 * [data-bands] (bands drawn), [data-log] and [data-x].
 */
(function () {
  "use strict";

  var C = window.EnvlabCharts;
  // Tests shorten the wait (window.ENVLAB_COMPARE_POLL_MS, set before the page loads).
  var POLL_MS = Number(window.ENVLAB_COMPARE_POLL_MS) || 10000;
  var page = JSON.parse((document.getElementById("compare-page") || { textContent: "{}" }).textContent);
  var params = new URLSearchParams(window.location.search);
  var maxSmoothing = Number(page.max_smoothing) || 0.99;
  var settings = {
    smoothing: Math.min(maxSmoothing, Math.max(0, Number(params.get("smoothing")) || 0)),
    log_y: params.get("log") === "1",
    x: params.get("x") === "wall_time" && !page.grouped ? "wall_time" : "step",
  };
  var clocks = {}; // run id -> its step -> wall time (run_charts.js)
  Object.keys(page.wall_time || {}).forEach(function (id) {
    clocks[id] = new C.WallClock();
    clocks[id].replace(page.wall_time[id]);
  });
  var charts = Array.prototype.slice.call(document.querySelectorAll(".compare-chart")).map(function (div) {
    var spec = document.getElementById(div.dataset.figure);
    return { div: div, figure: spec ? JSON.parse(spec.textContent) : { data: [], layout: {} }, plotted: false };
  });

  function keepInUrl() {
    var query = new URLSearchParams(window.location.search);
    if (settings.smoothing > 0) query.set("smoothing", settings.smoothing.toFixed(2));
    else query.delete("smoothing");
    if (settings.log_y) query.set("log", "1");
    else query.delete("log");
    if (settings.x === "wall_time") query.set("x", "wall_time");
    else query.delete("x");
    var search = query.toString();
    window.history.replaceState(null, "", window.location.pathname + (search ? "?" + search : ""));
    // The form (another metric, grouping or band) carries the smoothing along.
    var field = document.getElementById("compare-smoothing-field");
    if (field) field.value = settings.smoothing > 0 ? settings.smoothing.toFixed(2) : "";
  }

  function xOf(trace) {
    // Steps, or (a run's trace, x = wall time) the times its steps ended, in ms for Plotly.
    var clock = settings.x === "wall_time" && trace.meta ? clocks[String(trace.meta.run)] : null;
    if (!clock) return trace.x.slice();
    return trace.x.map(function (step) {
      var seconds = clock.at(step);
      return seconds === null ? null : seconds * 1000;
    });
  }

  function traces(figure) {
    var weight = settings.smoothing;
    var data = [];
    figure.data.forEach(function (trace, index) {
      var copy = JSON.parse(JSON.stringify(trace));
      var role = trace.meta && trace.meta.role;
      copy.x = xOf(trace);
      if (!(weight > 0)) {
        data.push(copy);
        return;
      }
      var smoothed = C.ema(trace.x, trace.y, weight, page.span);
      if (role) {
        // A group's band edges and mean are smoothed alike, so the band stays around its mean.
        copy.y = smoothed;
        data.push(copy);
        return;
      }
      var color = (trace.line && trace.line.color) || C.PALETTE[index % C.PALETTE.length];
      copy.line = Object.assign({}, copy.line || {}, { color: color });
      copy.marker = Object.assign({}, copy.marker || {}, { color: color });
      copy.opacity = 0.25;
      copy.showlegend = false;
      data.push(copy);
      data.push({
        type: "scatter",
        mode: "lines",
        name: trace.name + " (smoothed)",
        x: copy.x.slice(),
        y: smoothed,
        line: { width: 2, color: color },
      });
    });
    return data;
  }

  function draw(chart) {
    var P = window.Plotly;
    var figure = chart.figure;
    var layout = JSON.parse(JSON.stringify(figure.layout || {}));
    layout.yaxis = Object.assign({}, layout.yaxis || {}, { type: settings.log_y ? "log" : "linear" });
    if (layout.yaxis.title && layout.yaxis.title.text) layout.yaxis.title = { text: C.plotlyText(layout.yaxis.title.text) };
    if (settings.x === "wall_time") layout.xaxis = { title: { text: "wall time (UTC)" }, type: "date" };
    layout.uirevision = chart.div.id + "|" + settings.log_y + "|" + settings.x;
    var data = traces(figure);
    var config = { displaylogo: false, responsive: true };
    if (chart.plotted) P.react(chart.div, data, layout, config);
    else P.newPlot(chart.div, data, layout, config);
    chart.plotted = true;
    chart.div.dataset.drawn = String(figure.data.length);
    chart.div.dataset.bands = String(
      figure.data.filter(function (t) {
        return t.meta && t.meta.role === "band-upper";
      }).length
    );
    chart.div.dataset.smoothing = settings.smoothing.toFixed(2);
    chart.div.dataset.log = String(settings.log_y);
    chart.div.dataset.x = settings.x;
  }

  function drawAll() {
    charts.forEach(draw);
  }

  function poll() {
    // Live: the same comparison read again while a run trains; stops once none does.
    if (!page.active || !page.api) return;
    window.setTimeout(function () {
      fetch(page.api, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          return response.ok ? response.json() : null;
        })
        .then(function (body) {
          if (!body) return;
          (body.charts || []).forEach(function (item, i) {
            if (charts[i] && item.figure) charts[i].figure = item.figure;
          });
          drawAll();
          page.active = (body.runs || []).some(function (run) {
            return (page.active_statuses || []).indexOf(run.status) >= 0;
          });
        })
        .catch(function () {})
        .then(poll);
    }, POLL_MS);
  }

  function start() {
    if (!charts.length) return;
    if (!window.Plotly || !C) {
      charts.forEach(function (chart) {
        var note = document.createElement("p");
        note.className = "muted";
        note.textContent = "Chart unavailable: plotly.js did not load.";
        chart.div.appendChild(note);
      });
      return;
    }
    var controls = document.getElementById("compare-controls");
    if (controls) {
      controls.appendChild(
        C.renderControls(settings, {
          maxSmoothing: maxSmoothing,
          removable: false,
          stepOnly: !!page.grouped,
          onChange: function (patch) {
            Object.keys(patch).forEach(function (k) {
              settings[k] = patch[k];
            });
            keepInUrl();
            drawAll();
          },
        })
      );
    }
    keepInUrl();
    drawAll();
    poll();
  }

  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
