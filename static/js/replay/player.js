// The replay player: reads the stored episode (#replay-data, written by json_script), splits
// it into turns and steps through them, drawing the environment's renderer for each turn.
// Turn 0 is the start (the prompt and the first observation); turn i is the i-th assistant
// message with its tool calls and the environment's answers. The URL keeps ?turn=N.
// Test hooks: #replay-page[data-turn]; #replay-board[data-renderer].
(function () {
  "use strict";
  var root = document.getElementById("replay-page");
  var data = document.getElementById("replay-data");
  if (!root || !data || !window.EnvlabReplay) return;
  var R = window.EnvlabReplay;
  var el = R.el;
  var episode = JSON.parse(data.textContent);
  var SPEEDS_MS = 1000; // one turn a second at 1x
  var THINK = /<think>([\s\S]*?)(?:<\/think>|$)/g;
  var ERROR = /^\s*\{\s*['"]error['"]\s*:/;

  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content
        .map(function (part) {
          return part && typeof part.text === "string" ? part.text : JSON.stringify(part);
        })
        .join("\n");
    }
    return content === null || content === undefined ? "" : JSON.stringify(content);
  }

  function argumentsOf(value) {
    if (typeof value !== "string") return value === undefined ? {} : value;
    try {
      return JSON.parse(value);
    } catch (e) {
      return value; // shown as the model wrote it
    }
  }

  function splitThink(text) {
    var think = [];
    var rest = text.replace(THINK, function (_whole, inner) {
      think.push(inner.trim());
      return "";
    });
    return { think: think.join("\n\n"), text: rest.trim() };
  }

  function buildTurns(messages) {
    var turns = [{ index: 0, calls: [], results: [], text: "", think: "" }];
    (Array.isArray(messages) ? messages : []).forEach(function (m) {
      if (!m || typeof m !== "object") return;
      if (m.role === "assistant") {
        var parts = splitThink(textOf(m.content));
        var calls = (Array.isArray(m.tool_calls) ? m.tool_calls : []).map(function (call) {
          var fn = (call && (call["function"] || call)) || {};
          return { name: String(fn.name || "?"), arguments: argumentsOf(fn.arguments) };
        });
        turns.push({ index: turns.length, calls: calls, results: [], text: parts.text, think: parts.think });
      } else {
        var text = textOf(m.content);
        var target = turns[turns.length - 1];
        target.results.push({
          role: String(m.role || "?"),
          name: m.name ? String(m.name) : "",
          text: text,
          error: m.role === "tool" && ERROR.test(text),
        });
      }
    });
    return turns;
  }

  var prompt = Array.isArray(episode.prompt) ? episode.prompt : [];
  var lastUser = prompt.filter(function (m) { return m && m.role === "user"; }).pop();
  var turns = buildTurns(episode.messages);
  var last = turns.length - 1;
  var renderer = R.get(episode.renderer);
  var board = document.getElementById("replay-board");
  var panel = document.getElementById("replay-turn");
  var scrubber = document.getElementById("replay-scrubber");
  var jumpInput = document.getElementById("replay-jump-turn");
  var playButton = document.getElementById("replay-play");
  var speed = document.getElementById("replay-speed");
  board.dataset.renderer = String(episode.renderer);
  scrubber.max = String(last);
  jumpInput.max = String(last);

  var state = { index: Math.max(0, Math.min(last, Number(episode.turn) || 0)), timer: null };

  function view() {
    return { episode: episode, turns: turns, index: state.index, initialText: lastUser ? textOf(lastUser.content) : "" };
  }

  function formatNumber(value) {
    return typeof value === "number" ? String(Math.round(value * 10000) / 10000) : "—";
  }

  function rewardSoFar(v) {
    if (v.index === last && typeof episode.reward === "number") return episode.reward;
    var known = renderer.rewardSoFar ? renderer.rewardSoFar(v) : null;
    return typeof known === "number" ? known : null;
  }

  function argumentsText(args) {
    return typeof args === "string" ? args : JSON.stringify(args);
  }

  function renderScore(v) {
    var box = el("div", "replay-score");
    box.appendChild(el("span", "replay-so-far", "reward so far " + formatNumber(rewardSoFar(v))));
    if (episode.source === "rollout") {
      var terms = el("ul", "rollout-rewards replay-turn-terms");
      Object.keys(episode.rewards || {}).forEach(function (term) {
        var li = el("li");
        li.appendChild(el("span", "term", term));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(el("span", "value", formatNumber(episode.rewards[term])));
        terms.appendChild(li);
      });
      box.appendChild(terms);
      box.appendChild(el("span", "replay-turn-advantage", "advantage " + formatNumber(episode.advantage)));
    }
    return box;
  }

  function renderPanel(v) {
    R.clear(panel);
    var turn = turns[v.index];
    panel.appendChild(el("h2", null, v.index === 0 ? "Start" : "Turn " + v.index + " of " + last));
    panel.appendChild(renderScore(v));
    if (v.index === 0) {
      prompt.forEach(function (m) {
        var box = el("div", "replay-message role-" + String(m.role || "?").replace(/[^a-z]/g, ""));
        box.appendChild(el("div", "message-role", String(m.role || "?")));
        box.appendChild(el("pre", "message-content", textOf(m.content)));
        panel.appendChild(box);
      });
    }
    if (turn.think) {
      var details = el("details", "replay-think");
      details.appendChild(el("summary", null, "reasoning (" + turn.think.length + " characters)"));
      details.appendChild(el("pre", "message-content", turn.think));
      panel.appendChild(details);
    }
    if (turn.text) panel.appendChild(el("pre", "message-content replay-said", turn.text));
    turn.calls.forEach(function (call) {
      var box = el("div", "replay-call");
      box.appendChild(el("span", "tool-name", call.name));
      box.appendChild(el("code", "tool-args", argumentsText(call.arguments)));
      panel.appendChild(box);
    });
    turn.results.forEach(function (result) {
      var box = el("div", "replay-result" + (result.error ? " replay-error" : ""));
      box.appendChild(el("div", "message-role", result.role + (result.name ? " · " + result.name : "") + (result.error ? " · error" : "")));
      box.appendChild(el("pre", "message-content", result.text));
      panel.appendChild(box);
    });
    if (v.index > 0 && !turn.calls.length && !turn.text && !turn.think) {
      panel.appendChild(el("p", "muted", "(no text, no tool call)"));
    }
  }

  function show(index, push) {
    state.index = Math.max(0, Math.min(last, index));
    var v = view();
    R.clear(board);
    try {
      renderer.render(board, v);
    } catch (e) {
      // A renderer that cannot read this episode's texts falls back to the transcript.
      R.clear(board);
      R.get("transcript").render(board, v);
    }
    renderPanel(v);
    scrubber.value = String(state.index);
    jumpInput.value = String(state.index);
    document.getElementById("replay-position").textContent = "turn " + state.index + " / " + last;
    root.dataset.turn = String(state.index);
    if (push !== false && window.history && window.history.replaceState) {
      window.history.replaceState(null, "", episode.path + "?turn=" + state.index);
    }
  }

  function pause() {
    if (state.timer !== null) window.clearTimeout(state.timer);
    state.timer = null;
    playButton.textContent = "Play";
    root.dataset.playing = "false";
  }

  function tick() {
    if (state.index >= last) return pause();
    show(state.index + 1);
    state.timer = window.setTimeout(tick, SPEEDS_MS / (Number(speed.value) || 1));
  }

  function play() {
    if (state.index >= last) show(0);
    playButton.textContent = "Pause";
    root.dataset.playing = "true";
    state.timer = window.setTimeout(tick, SPEEDS_MS / (Number(speed.value) || 1));
  }

  function toggle() {
    if (state.timer === null) play();
    else pause();
  }

  function step(delta) {
    pause();
    show(state.index + delta);
  }

  playButton.addEventListener("click", toggle);
  document.getElementById("replay-first").addEventListener("click", function () { pause(); show(0); });
  document.getElementById("replay-last").addEventListener("click", function () { pause(); show(last); });
  document.getElementById("replay-back-step").addEventListener("click", function () { step(-1); });
  document.getElementById("replay-forward").addEventListener("click", function () { step(1); });
  scrubber.addEventListener("input", function () { pause(); show(Number(scrubber.value) || 0); });
  document.getElementById("replay-jump").addEventListener("submit", function (event) {
    event.preventDefault();
    pause();
    show(parseInt(jumpInput.value, 10) || 0);
  });
  document.addEventListener("keydown", function (event) {
    var tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || event.altKey || event.ctrlKey || event.metaKey) return;
    var actions = {
      ArrowLeft: function () { step(-1); },
      ArrowRight: function () { step(1); },
      Home: function () { pause(); show(0); },
      End: function () { pause(); show(last); },
    };
    if (event.key === " " && tag !== "BUTTON") actions[" "] = toggle;
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  });

  show(state.index, false);
  root.dataset.ready = "true";
})();
