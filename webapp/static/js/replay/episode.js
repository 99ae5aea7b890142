// One stored episode, split into turns and drawn at any turn into a board and a turn panel.
// Used by the single replay (player.js) and by every column of the side by side
// (sidebyside.js); the controls that move it are controls.js.
// Turn 0 is the start (the prompt and the first observation); turn i is the i-th assistant
// message with its tool calls and the environment's answers. Text only (textContent).
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  if (!R) return;
  var el = R.el;
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

  function argumentsText(args) {
    return typeof args === "string" ? args : JSON.stringify(args);
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

  function formatNumber(value) {
    return typeof value === "number" ? String(Math.round(value * 10000) / 10000) : "—";
  }

  // episode: the replay JSON (webapp/evaluations/arena/replay.py); board, panel: the elements it is
  // drawn into. Returns { turns, last, index, show(index) }.
  function Episode(episode, board, panel) {
    var prompt = Array.isArray(episode.prompt) ? episode.prompt : [];
    var lastUser = prompt.filter(function (m) { return m && m.role === "user"; }).pop();
    var turns = buildTurns(episode.messages);
    var last = turns.length - 1;
    var renderer = R.get(episode.renderer);
    board.dataset.renderer = String(episode.renderer);

    function view(index) {
      return { episode: episode, turns: turns, index: index, initialText: lastUser ? textOf(lastUser.content) : "" };
    }

    function rewardSoFar(v) {
      if (v.index === last && typeof episode.reward === "number") return episode.reward;
      var known = renderer.rewardSoFar ? renderer.rewardSoFar(v) : null;
      return typeof known === "number" ? known : null;
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

    var self = { turns: turns, last: last, index: 0 };
    self.show = function (index) {
      self.index = Math.max(0, Math.min(last, index));
      var v = view(self.index);
      R.clear(board);
      try {
        renderer.render(board, v);
      } catch (e) {
        // A renderer that cannot read this episode's texts falls back to the transcript.
        R.clear(board);
        R.get("transcript").render(board, v);
      }
      renderPanel(v);
      return self.index;
    };
    return self;
  }

  R.Episode = Episode;
  R.textOf = textOf;
})();
