// The replay viewer's renderer registry and the helpers renderers share.
// A renderer draws one environment kind's board for a turn of a stored episode:
//   EnvlabReplay.register("catch", { render: function (target, view) { ... } });
// `view` is { episode, turns, index, initialText }; turns[i] (i >= 1) has `calls`
// [{name, arguments}], `results` [{name, text, error}], `text` and `think`.
// Every piece of model or environment text goes through textContent (el, from
// webapp/static/js/dom.js), never parsed as HTML: it is untrusted.
(function () {
  "use strict";
  var renderers = {};

  // The environment's answers up to turn `index`, oldest first, with the turn each came in
  // (0 = the observation that came with the prompt).
  function answersUpTo(view) {
    var answers = [{ turn: 0, text: view.initialText || "", error: false, call: null }];
    for (var i = 1; i <= view.index && i < view.turns.length; i++) {
      view.turns[i].results.forEach(function (result, k) {
        answers.push({ turn: i, text: result.text, error: result.error, call: view.turns[i].calls[k] || null });
      });
    }
    return answers;
  }

  window.EnvlabReplay = {
    register: function (name, renderer) {
      renderers[name] = renderer;
    },
    get: function (name) {
      return renderers[name] || renderers.transcript;
    },
    el: window.envlab.dom.el,
    clear: window.envlab.dom.clear,
    answersUpTo: answersUpTo,
  };
})();
