// Wordle: the board of coloured tiles and the keyboard's letter states, read from the
// feedback lines the server sent ("C R A N E" then "X G Y X X": G right place, Y elsewhere,
// X not in the word). Refused guesses use no row and are listed under the board.
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  var el = R.el;
  var LETTERS = /^[A-Z](?: [A-Z]){4}$/;
  var MARKS = /^[GYX](?: [GYX]){4}$/;
  var ROWS = 6;
  var KEYBOARD = ["QWERTYUIOP", "ASDFGHJKL", "ZXCVBNM"];
  var RANK = { X: 1, Y: 2, G: 3 };
  var NAMES = { G: "correct", Y: "present", X: "absent" };

  function read(view) {
    var guesses = [];
    var refused = [];
    var won = false;
    R.answersUpTo(view).forEach(function (answer) {
      var lines = String(answer.text || "").split("\n").map(function (line) { return line.trim(); });
      for (var i = 0; i + 1 < lines.length; i++) {
        if (LETTERS.test(lines[i]) && MARKS.test(lines[i + 1])) {
          guesses.push({ letters: lines[i].split(" "), marks: lines[i + 1].split(" "), turn: answer.turn });
          i++;
        }
      }
      if (/^Invalid guess /m.test(answer.text) || answer.error) refused.push(answer);
      if (/You won in /.test(answer.text)) won = true;
    });
    return { guesses: guesses, refused: refused, won: won };
  }

  R.register("wordle", {
    rewardSoFar: function (view) {
      return read(view).won ? 1 : 0;
    },
    render: function (target, view) {
      var game = read(view);
      target.appendChild(el("h2", null, "Wordle"));
      var grid = el("div", "wordle-board");
      for (var r = 0; r < Math.max(ROWS, game.guesses.length); r++) {
        var guess = game.guesses[r];
        var row = el("div", "wordle-row" + (guess ? " filled" : ""));
        if (guess && guess.turn === view.index) row.className += " latest";
        for (var c = 0; c < 5; c++) {
          var tile = el("span", "wordle-tile" + (guess ? " " + NAMES[guess.marks[c]] : ""), guess ? guess.letters[c] : "");
          if (guess) tile.dataset.mark = guess.marks[c];
          row.appendChild(tile);
        }
        grid.appendChild(row);
      }
      target.appendChild(grid);
      target.dataset.guesses = String(game.guesses.length);

      var states = {};
      game.guesses.forEach(function (g) {
        g.letters.forEach(function (letter, i) {
          var mark = g.marks[i];
          if (!states[letter] || RANK[mark] > RANK[states[letter]]) states[letter] = mark;
        });
      });
      var keyboard = el("div", "wordle-keyboard");
      KEYBOARD.forEach(function (keys) {
        var line = el("div", "wordle-keys");
        keys.split("").forEach(function (key) {
          var node = el("span", "wordle-key" + (states[key] ? " " + NAMES[states[key]] : ""), key);
          node.dataset.key = key;
          if (states[key]) node.dataset.mark = states[key];
          line.appendChild(node);
        });
        keyboard.appendChild(line);
      });
      target.appendChild(keyboard);
      if (game.refused.length) {
        var list = el("ul", "wordle-refused");
        game.refused.forEach(function (answer) {
          list.appendChild(el("li", "replay-error", "turn " + answer.turn + ": " + answer.text.split("\n")[0]));
        });
        target.appendChild(list);
      }
      if (game.won) target.appendChild(el("p", "wordle-status", "won"));
    },
  });
})();
