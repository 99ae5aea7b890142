// Catch: the grid with the ball and the paddle, read from the observation text the server
// sent (rows of ". o P" cells, top first; the paddle is drawn over a caught ball).
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  var el = R.el;
  var ROW = /^[.oP](?: [.oP])+$/;

  function parseGrid(text) {
    var rows = String(text || "")
      .split("\n")
      .map(function (line) { return line.trim(); })
      .filter(function (line) { return ROW.test(line); })
      .map(function (line) { return line.split(" "); });
    return rows.length >= 2 ? rows : null;
  }

  function latest(view) {
    var answers = R.answersUpTo(view);
    for (var i = answers.length - 1; i >= 0; i--) {
      var grid = parseGrid(answers[i].text);
      if (grid) return { grid: grid, answer: answers[i], stale: i !== answers.length - 1 };
    }
    return null;
  }

  function outcome(text) {
    if (/Caught the ball!/.test(text)) return 1;
    if (/Missed the ball\./.test(text)) return -1;
    return null;
  }

  R.register("catch", {
    rewardSoFar: function (view) {
      var found = latest(view);
      if (!found) return null;
      var result = outcome(found.answer.text);
      return result === null ? 0 : result;
    },
    render: function (target, view) {
      var found = latest(view);
      if (!found) return R.get("transcript").render(target, view);
      var table = el("table", "catch-grid");
      var ball = null;
      var paddle = null;
      found.grid.forEach(function (cells, r) {
        var tr = el("tr");
        cells.forEach(function (cell, c) {
          var td = el("td", "catch-cell" + (cell === "o" ? " ball" : cell === "P" ? " paddle" : ""));
          td.textContent = cell === "o" ? "●" : cell === "P" ? "▬" : "";
          if (cell === "o") ball = [r, c];
          if (cell === "P") paddle = [r, c];
          tr.appendChild(td);
        });
        table.appendChild(tr);
      });
      // A caught ball is under the paddle: its row is the paddle's.
      if (!ball && paddle) ball = paddle;
      target.dataset.ballRow = ball ? String(ball[0]) : "";
      target.dataset.ballColumn = ball ? String(ball[1]) : "";
      target.dataset.paddleColumn = paddle ? String(paddle[1]) : "";
      target.appendChild(el("h2", null, "Catch"));
      target.appendChild(table);
      var result = outcome(found.answer.text);
      var status = result === 1 ? "caught" : result === -1 ? "missed" : "falling";
      target.appendChild(el("p", "catch-status", status));
      if (found.stale) target.appendChild(el("p", "replay-error", "this turn's answer had no grid; showing the last one"));
    },
  });
})();
