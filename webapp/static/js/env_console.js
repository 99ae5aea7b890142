/*
 * The environment console: reset an episode and call its tools by hand over a WebSocket
 * (webapp.catalog.consumers.EnvironmentConsoleConsumer).
 *
 * The tool forms are built from the tool schemas the server sends (the adapter's, as the
 * model sees them). Everything that comes from the server or the environment is inserted
 * as text (textContent / createTextNode), never parsed as HTML.
 *
 * Test hooks: #console-page[data-live][data-episode][data-reward][data-done];
 * #console-tools form.tool[data-tool]; each #console-log li.console-entry[data-kind]
 * (reset, call, result, error, note).
 */
(function () {
  "use strict";

  var root = document.getElementById("console-page");
  if (!root) return;
  var cfg = JSON.parse(document.getElementById("console-config").textContent);

  var NO_RETRY_CODES = {
    4401: "not logged in",
    4403: "not allowed",
    4404: "environment not found",
    4429: "too many consoles open",
  };
  var MAX_LOG_ENTRIES = 500;

  var state = { socket: null, ready: false, prompt: null }; // socket: webapp/static/js/live_socket.js

  // --- small helpers -----------------------------------------------------------------

  var el = window.envlab.dom.el, byId = window.envlab.dom.byId; // webapp/static/js/dom.js

  function show(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value);
    } catch (e) {
      return String(value);
    }
  }

  function setLive(live, label) {
    root.dataset.live = live;
    var indicator = byId("console-status");
    indicator.textContent = label || live;
    indicator.className = "live-indicator live-" + live;
  }

  function setReady(ready) {
    state.ready = ready;
    byId("reset-button").disabled = !ready;
    Array.prototype.forEach.call(document.querySelectorAll("#console-tools button[type=submit]"), function (b) {
      b.disabled = !ready;
    });
  }

  function send(message) {
    if (!state.socket.isOpen()) {
      note("Not connected: the message was not sent.");
      return false;
    }
    var text = JSON.stringify(message);
    if (new TextEncoder().encode(text).length > cfg.max_message_bytes) {
      note("Too large: a message may be at most " + Math.floor(cfg.max_message_bytes / 1024) + " kB.");
      return false;
    }
    return state.socket.send(text);
  }

  // --- transcript ----------------------------------------------------------------------

  function entry(kind, role, title, body, bodyClass) {
    var log = byId("console-log");
    var li = el("li", "message console-entry role-" + role);
    li.dataset.kind = kind;
    li.appendChild(el("div", "message-role", title));
    if (body !== null && body !== undefined) li.appendChild(el("pre", "message-content" + (bodyClass ? " " + bodyClass : ""), body));
    log.appendChild(li);
    while (log.children.length > MAX_LOG_ENTRIES) log.removeChild(log.firstElementChild);
    li.scrollIntoView({ block: "nearest" });
    return li;
  }

  function note(text) {
    return entry("note", "system", "console", text);
  }

  // --- state ---------------------------------------------------------------------------

  function renderState(s) {
    if (!s || typeof s !== "object") return;
    var dl = byId("console-state");
    dl.textContent = "";
    Object.keys(s)
      .sort()
      .forEach(function (key) {
        dl.appendChild(el("dt", null, key));
        var dd = el("dd", null, show(s[key]));
        dd.dataset.key = key;
        dl.appendChild(dd);
      });
    if ("reward" in s) root.dataset.reward = show(s.reward);
    if ("done" in s) root.dataset.done = show(s.done);
    if ("lost" in s) root.dataset.lost = show(s.lost);
  }

  // --- tool forms ----------------------------------------------------------------------

  function typesOf(schema) {
    var t = schema && schema.type;
    if (Array.isArray(t)) return t.map(String);
    return [t ? String(t) : "string"];
  }

  function controlFor(toolName, paramName, schema, required) {
    var types = typesOf(schema);
    var id = "tool-" + toolName + "-" + paramName;
    var control;
    if (Array.isArray(schema.enum) && schema.enum.length) {
      control = el("select");
      if (!required) {
        var none = el("option", null, "—");
        none.value = "";
        control.appendChild(none);
      }
      schema.enum.forEach(function (choice, index) {
        var option = el("option", null, show(choice));
        option.value = String(index);
        control.appendChild(option);
      });
      control.dataset.kind = "enum";
    } else if (types[0] === "boolean") {
      control = el("select");
      [["", "—"], ["true", "true"], ["false", "false"]].forEach(function (pair) {
        var option = el("option", null, pair[1]);
        option.value = pair[0];
        control.appendChild(option);
      });
      control.dataset.kind = "boolean";
    } else if (types[0] === "integer" || types[0] === "number") {
      control = el("input");
      control.type = "number";
      control.step = types[0] === "integer" ? "1" : "any";
      control.dataset.kind = "number";
    } else if (types[0] === "array" || types[0] === "object") {
      control = el("textarea", "code");
      control.rows = 2;
      control.placeholder = types[0] === "array" ? "[ ]" : "{ }";
      control.dataset.kind = "json";
    } else {
      control = el("input");
      control.type = "text";
      control.dataset.kind = "string";
    }
    control.id = id;
    control.name = paramName;
    control.dataset.param = paramName;
    control.required = false; // the server says what is missing, in its own words
    return control;
  }

  function readArguments(form, tool) {
    var properties = (tool.parameters && tool.parameters.properties) || {};
    var required = (tool.parameters && tool.parameters.required) || [];
    var args = {};
    Array.prototype.forEach.call(form.querySelectorAll("[data-param]"), function (control) {
      var name = control.dataset.param;
      var value = control.value;
      var kind = control.dataset.kind;
      if (kind === "enum") {
        if (value !== "") args[name] = properties[name].enum[Number(value)];
      } else if (kind === "boolean") {
        if (value !== "") args[name] = value === "true";
      } else if (kind === "number") {
        if (value !== "") args[name] = Number(value);
      } else if (kind === "json") {
        if (value.trim() !== "") args[name] = value; // parsed and checked by the server
      } else if (value !== "" || required.indexOf(name) >= 0) {
        args[name] = value;
      }
    });
    return args;
  }

  function renderTools(tools) {
    var box = byId("console-tools");
    box.textContent = "";
    if (!Array.isArray(tools) || !tools.length) {
      box.appendChild(el("p", "muted", "This environment offers no tools."));
      return;
    }
    tools.forEach(function (tool) {
      var name = String(tool.name);
      var form = el("form", "tool");
      form.dataset.tool = name;
      form.autocomplete = "off";
      var heading = el("h3");
      heading.appendChild(el("code", null, name));
      form.appendChild(heading);
      if (tool.description) form.appendChild(el("p", "tool-description", tool.description));
      var properties = (tool.parameters && tool.parameters.properties) || {};
      var required = (tool.parameters && tool.parameters.required) || [];
      var names = Object.keys(properties);
      if (names.length) {
        var grid = el("div", "form-grid");
        names.forEach(function (paramName) {
          var schema = properties[paramName] || {};
          var isRequired = required.indexOf(paramName) >= 0;
          var field = el("div", "field");
          var control = controlFor(name, paramName, schema, isRequired);
          var label = el("label", null, paramName + " (" + typesOf(schema).join(" | ") + (isRequired ? "" : ", optional") + ")");
          label.htmlFor = control.id;
          field.appendChild(label);
          field.appendChild(control);
          if (schema.description) field.appendChild(el("p", "help", schema.description));
          grid.appendChild(field);
        });
        form.appendChild(grid);
      } else {
        form.appendChild(el("p", "muted", "No parameters."));
      }
      var button = el("button", "button primary", "Call " + name);
      button.type = "submit";
      button.disabled = !state.ready;
      form.appendChild(button);
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var args = readArguments(form, tool);
        if (send({ type: "call", tool: name, arguments: args })) {
          entry("call", "assistant", "call · " + name, show(args));
        }
      });
      box.appendChild(form);
    });
  }

  // --- reset ---------------------------------------------------------------------------

  byId("reset-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var seedText = byId("reset-seed").value.trim();
    var seed = null;
    if (seedText !== "") {
      seed = Number(seedText);
      if (!Number.isSafeInteger(seed)) {
        note("The seed must be a whole number.");
        return;
      }
    }
    var rowText = byId("reset-row").value.trim();
    var row = {};
    if (rowText !== "") {
      try {
        row = JSON.parse(rowText);
      } catch (e) {
        note("Reset options: not valid JSON (" + e.message + ").");
        return;
      }
      if (!row || typeof row !== "object" || Array.isArray(row)) {
        note('Reset options: a JSON object is needed, e.g. {"blanks": 10}.');
        return;
      }
    }
    var target = byId("reset-target").value;
    if (target !== "") row.target = target;
    var prompt = byId("reset-prompt").value;
    if (prompt !== "") row.prompt = prompt;
    if (send({ type: "reset", seed: seed, row: row })) {
      state.prompt = typeof row.prompt === "string" ? row.prompt : null;
      entry("call", "system", "reset", "seed " + (seed === null ? "none" : seed) + " · row " + show(row));
    }
  });

  byId("console-clear").addEventListener("click", function () {
    byId("console-log").textContent = "";
  });

  // --- messages from the server --------------------------------------------------------

  function handle(message) {
    if (!message || typeof message !== "object") return;
    if (message.type === "status") {
      setLive("connecting", show(message.message));
    } else if (message.type === "tools") {
      state.socket.resetBackoff();
      renderTools(message.tools);
      setLive("live");
      setReady(true);
    } else if (message.type === "reset") {
      root.dataset.episode = "running";
      var observation = message.observation === null || message.observation === undefined ? null : show(message.observation);
      entry("reset", "user", "observation after reset (appended to the prompt)", observation === null ? "(none)" : observation);
      if (state.prompt !== null) {
        entry("reset", "user", "the model's first message", state.prompt + (observation === null ? "" : observation));
      }
      renderState(message.state);
    } else if (message.type === "result") {
      entry("result", "tool", "tool · " + show(message.tool), show(message.output));
      renderState(message.state);
    } else if (message.type === "episode_closed") {
      root.dataset.episode = "none";
      note(show(message.message));
    } else if (message.type === "error") {
      var title = "error" + (message.tool ? " · " + show(message.tool) : "");
      var li = entry("error", "tool", title, show(message.message), "error-text");
      if (message.output !== undefined) {
        li.appendChild(el("div", "message-role", "the model would get"));
        li.appendChild(el("pre", "message-content", show(message.output)));
      }
      renderState(message.state);
    }
  }

  state.socket = window.envlab.liveSocket.open({
    path: cfg.ws_path,
    noRetry: NO_RETRY_CODES,
    onState: setLive,
    onMessage: handle,
    onClose: function () {
      setReady(false);
      if (root.dataset.episode === "running") {
        root.dataset.episode = "none";
        note("Connection lost: the episode ended with it. Reset to start again.");
      }
    },
  });
})();
