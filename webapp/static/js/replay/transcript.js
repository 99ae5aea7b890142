// Any environment without a board of its own: the conversation up to the current turn, with
// each tool call, the environment's answer and errors marked. Text only (textContent).
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  var el = R.el;

  function argumentsText(args) {
    return typeof args === "string" ? args : JSON.stringify(args);
  }

  R.register("transcript", {
    render: function (target, view) {
      target.appendChild(el("h2", null, "Transcript"));
      var list = el("ol", "replay-transcript");
      if (view.initialText) {
        var start = el("li", "replay-transcript-turn" + (view.index === 0 ? " current" : ""));
        start.appendChild(el("div", "message-role", "start"));
        start.appendChild(el("pre", "message-content", view.initialText));
        list.appendChild(start);
      }
      for (var i = 1; i <= view.index && i < view.turns.length; i++) {
        var turn = view.turns[i];
        var item = el("li", "replay-transcript-turn" + (i === view.index ? " current" : ""));
        item.dataset.turn = String(i);
        item.appendChild(el("div", "message-role", "turn " + i));
        if (turn.think) {
          var details = el("details", "replay-think");
          details.appendChild(el("summary", null, "reasoning"));
          details.appendChild(el("pre", "message-content", turn.think));
          item.appendChild(details);
        }
        if (turn.text) item.appendChild(el("pre", "message-content", turn.text));
        turn.calls.forEach(function (call) {
          item.appendChild(el("code", "tool-call", call.name + "(" + argumentsText(call.arguments) + ")"));
        });
        turn.results.forEach(function (result) {
          var box = el("pre", "message-content replay-result" + (result.error ? " replay-error" : ""), result.text);
          item.appendChild(box);
        });
        list.appendChild(item);
      }
      target.appendChild(list);
    },
  });
})();
