/*
 * Chart helpers for the live run page (webapp/static/js/run_live.js uses them): TensorBoard-style
 * smoothing, step -> wall time, the metric picker, per-chart controls and the user's
 * layout, saved on the server (PUT /api/account/run-layout/).
 *
 * Metric keys come from the run, so they are untrusted text: DOM text goes through
 * textContent, and text handed to Plotly (which reads a few HTML tags in titles and
 * legends) through plotlyText.
 */
(function () {
  "use strict";

  var DEFAULTS = { smoothing: 0, log_y: false, x: "step" };
  var SAVE_DELAY_MS = 400;
  var PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
  ];

  function isInternal(key) {
    return typeof key !== "string" || key.charAt(0) === "_";
  }

  function plotlyText(text) {
    // Plotly turns <b>, <a href=...> and the like in titles, legends and hover labels into
    // markup; entities it shows as the characters they stand for.
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // --- smoothing: an exponential moving average weighted by step distance --------------
  // The average starts at the first value; a point d steps after the previous one decays it by
  // weight^(d * SPAN_UNITS / span), `span` being the chart's step range (the run's max_steps):
  // so a slider value smooths over the same share of a run whether it is 100 or 100k steps
  // long, and whether it logged every step or every tenth. SPAN_UNITS makes a value mean what
  // TensorBoard's per-point EMA means on a 100-point chart. Weight 0 is the raw series; an
  // unfinished (NaN, inf) value is passed through and does not move the average. Kept as a
  // state so live points extend it one at a time.
  var SPAN_UNITS = 100;

  function emaStart(span) {
    return { last: 0, value: 0, step: null, span: span > 0 ? span : SPAN_UNITS };
  }

  function emaStep(state, value, weight, step) {
    if (typeof value !== "number" || !isFinite(value)) return value;
    if (state.step === null) {
      state.last = value;
    } else {
      var distance = typeof step === "number" ? Math.max(0, step - state.step) : 1;
      var decay = Math.pow(weight, (distance * SPAN_UNITS) / state.span);
      // The exact average of the series drawn as straight lines between its points: a run that
      // logged every tenth step then smooths to the same curve as one that logged every step.
      var ramp = decay <= 0 ? 1 : decay >= 1 ? 0 : 1 - (1 - decay) / -Math.log(decay);
      state.last = decay * state.last + (1 - decay) * state.value + ramp * (value - state.value);
    }
    state.value = value;
    state.step = typeof step === "number" ? step : (state.step || 0) + 1;
    return state.last;
  }

  function ema(steps, values, weight, span) {
    // One series smoothed: values[i] logged at steps[i] (ascending).
    var state = emaStart(span);
    return values.map(function (v, i) {
      return emaStep(state, v, weight, steps[i]);
    });
  }

  // --- wall time of a step -------------------------------------------------------------
  // Known exactly for the steps the server sent (downsampled) or the socket announced;
  // in between, interpolated; outside the known range, the nearest known time.

  function WallClock() {
    this.steps = [];
    this.times = [];
  }

  WallClock.prototype.replace = function (rows) {
    this.steps = [];
    this.times = [];
    var self = this;
    (rows || []).forEach(function (row) {
      self.add(row[0], row[1]);
    });
  };

  WallClock.prototype.add = function (step, seconds) {
    if (typeof step !== "number" || typeof seconds !== "number" || !isFinite(seconds)) return;
    var n = this.steps.length;
    if (!n || step > this.steps[n - 1]) {
      this.steps.push(step);
      this.times.push(seconds);
      return;
    }
    var i = this._index(step);
    if (this.steps[i] === step) this.times[i] = seconds;
    else {
      this.steps.splice(i, 0, step);
      this.times.splice(i, 0, seconds);
    }
  };

  WallClock.prototype._index = function (step) {
    // The first index whose step is >= step.
    var lo = 0;
    var hi = this.steps.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (this.steps[mid] < step) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };

  WallClock.prototype.size = function () {
    return this.steps.length;
  };

  WallClock.prototype.at = function (step) {
    var n = this.steps.length;
    if (!n) return null;
    if (step <= this.steps[0]) return this.times[0];
    if (step >= this.steps[n - 1]) return this.times[n - 1];
    var i = this._index(step);
    if (this.steps[i] === step) return this.times[i];
    var s0 = this.steps[i - 1];
    var s1 = this.steps[i];
    var t0 = this.times[i - 1];
    var t1 = this.times[i];
    return t0 + ((t1 - t0) * (step - s0)) / (s1 - s0);
  };

  // --- the picker ----------------------------------------------------------------------

  function groupKeys(keys) {
    // By prefix up to the first "/" ("rewards/", "tools/", ...); keys without one first.
    var groups = new Map();
    keys
      .slice()
      .sort()
      .forEach(function (key) {
        var cut = key.indexOf("/");
        var prefix = cut > 0 ? key.slice(0, cut + 1) : "";
        if (!groups.has(prefix)) groups.set(prefix, []);
        groups.get(prefix).push(key);
      });
    return Array.from(groups.keys())
      .sort()
      .map(function (prefix) {
        return { prefix: prefix, keys: groups.get(prefix) };
      });
  }

  function renderPicker(box, empty, keys, filterText, isAdded, onPick) {
    while (box.firstChild) box.removeChild(box.firstChild);
    var needle = (filterText || "").toLowerCase();
    var shown = keys.filter(function (key) {
      return !needle || key.toLowerCase().indexOf(needle) >= 0;
    });
    groupKeys(shown).forEach(function (group) {
      var section = document.createElement("div");
      section.className = "metric-group";
      section.dataset.prefix = group.prefix;
      var title = document.createElement("h4");
      title.className = "metric-group-title";
      title.textContent = group.prefix || "top level";
      section.appendChild(title);
      var list = document.createElement("ul");
      list.className = "metric-options";
      group.keys.forEach(function (key) {
        var item = document.createElement("li");
        var button = document.createElement("button");
        button.type = "button";
        button.className = "metric-option";
        button.dataset.key = key;
        button.textContent = group.prefix ? key.slice(group.prefix.length) : key;
        button.title = isAdded(key) ? key + " (already a chart)" : "Add a chart of " + key;
        button.disabled = isAdded(key);
        button.addEventListener("click", function () {
          onPick(key);
        });
        item.appendChild(button);
        list.appendChild(item);
      });
      section.appendChild(list);
      box.appendChild(section);
    });
    if (empty) {
      empty.hidden = shown.length > 0;
      empty.textContent = keys.length ? "No metric matches the filter." : "No metrics logged yet.";
    }
  }

  // --- per-chart controls --------------------------------------------------------------

  function renderControls(settings, options) {
    // options: {maxSmoothing, removable, stepOnly (no x-axis choice), onChange(patch), onRemove()}
    var bar = document.createElement("div");
    bar.className = "chart-controls";

    var smoothLabel = document.createElement("label");
    smoothLabel.className = "chart-control";
    smoothLabel.appendChild(document.createTextNode("smoothing "));
    var slider = document.createElement("input");
    slider.type = "range";
    slider.className = "chart-smoothing";
    slider.min = "0";
    slider.max = String(options.maxSmoothing);
    slider.step = "0.01";
    slider.value = String(settings.smoothing);
    var shown = document.createElement("output");
    shown.className = "chart-smoothing-value";
    shown.textContent = Number(settings.smoothing).toFixed(2);
    slider.addEventListener("input", function () {
      var value = Math.min(options.maxSmoothing, Math.max(0, Number(slider.value) || 0));
      shown.textContent = value.toFixed(2);
      options.onChange({ smoothing: value });
    });
    smoothLabel.appendChild(slider);
    smoothLabel.appendChild(shown);
    bar.appendChild(smoothLabel);

    var logLabel = document.createElement("label");
    logLabel.className = "chart-control";
    var log = document.createElement("input");
    log.type = "checkbox";
    log.className = "chart-log";
    log.checked = !!settings.log_y;
    log.addEventListener("change", function () {
      options.onChange({ log_y: log.checked });
    });
    logLabel.appendChild(log);
    logLabel.appendChild(document.createTextNode(" log scale"));
    bar.appendChild(logLabel);

    if (!options.stepOnly) {
      var xLabel = document.createElement("label");
      xLabel.className = "chart-control";
      xLabel.appendChild(document.createTextNode("x "));
      var x = document.createElement("select");
      x.className = "chart-x";
      [
        ["step", "step"],
        ["wall_time", "wall time"],
      ].forEach(function (pair) {
        var option = document.createElement("option");
        option.value = pair[0];
        option.textContent = pair[1];
        x.appendChild(option);
      });
      x.value = settings.x;
      x.addEventListener("change", function () {
        options.onChange({ x: x.value });
      });
      xLabel.appendChild(x);
      bar.appendChild(xLabel);
    }

    if (options.removable) {
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "link-button chart-remove";
      remove.textContent = "remove";
      remove.addEventListener("click", options.onRemove);
      bar.appendChild(remove);
    }
    return bar;
  }

  // --- the user's layout, kept on the server -------------------------------------------

  function LayoutStore(options) {
    // options: {layout, url, csrf, onState(state, message)}
    var layout = options.layout || {};
    this.layout = {
      metrics: Array.isArray(layout.metrics) ? layout.metrics.slice() : [],
      settings: layout.settings && typeof layout.settings === "object" ? JSON.parse(JSON.stringify(layout.settings)) : {},
    };
    this.url = options.url;
    this.csrf = options.csrf;
    this.onState = options.onState || function () {};
    this.timer = null;
    this.saving = null;
    this.dirty = false;
  }

  LayoutStore.prototype.settingsFor = function (ref) {
    var stored = this.layout.settings[ref] || {};
    return {
      smoothing: typeof stored.smoothing === "number" ? stored.smoothing : DEFAULTS.smoothing,
      log_y: typeof stored.log_y === "boolean" ? stored.log_y : DEFAULTS.log_y,
      x: stored.x === "wall_time" ? "wall_time" : DEFAULTS.x,
    };
  };

  LayoutStore.prototype.set = function (ref, patch) {
    var merged = this.settingsFor(ref);
    Object.keys(patch).forEach(function (k) {
      merged[k] = patch[k];
    });
    this.layout.settings[ref] = merged;
    this.changed();
  };

  LayoutStore.prototype.addMetric = function (key) {
    if (this.layout.metrics.indexOf(key) < 0) this.layout.metrics.push(key);
    this.changed();
  };

  LayoutStore.prototype.removeMetric = function (key) {
    this.layout.metrics = this.layout.metrics.filter(function (k) {
      return k !== key;
    });
    delete this.layout.settings["metric:" + key];
    this.changed();
  };

  LayoutStore.prototype.changed = function () {
    this.dirty = true;
    this.onState("pending", "");
    var self = this;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(function () {
      self.timer = null;
      self.save();
    }, SAVE_DELAY_MS);
  };

  LayoutStore.prototype.save = function () {
    if (this.saving) return this.saving; // saved again when this one is done (dirty)
    var self = this;
    this.dirty = false;
    var body = JSON.stringify(this.layout);
    this.saving = fetch(this.url, {
      method: "PUT",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": this.csrf },
      body: body,
    })
      .then(function (response) {
        return response
          .json()
          .catch(function () {
            return {};
          })
          .then(function (data) {
            if (!response.ok) {
              var detail = Object.keys(data)
                .map(function (k) {
                  return k + ": " + [].concat(data[k]).join(" ");
                })
                .join("; ");
              throw new Error(detail || "HTTP " + response.status);
            }
          });
      })
      .then(
        function () {
          self.onState(self.dirty ? "pending" : "saved", "");
        },
        function (error) {
          self.onState("error", "Layout not saved: " + error.message);
        }
      )
      .finally(function () {
        self.saving = null;
        if (self.dirty && self.timer === null) self.save();
      });
    return this.saving;
  };

  window.EnvlabCharts = {
    DEFAULTS: DEFAULTS,
    PALETTE: PALETTE,
    isInternal: isInternal,
    plotlyText: plotlyText,
    emaStart: emaStart,
    emaStep: emaStep,
    ema: ema,
    WallClock: WallClock,
    groupKeys: groupKeys,
    renderPicker: renderPicker,
    renderControls: renderControls,
    LayoutStore: LayoutStore,
  };
})();
