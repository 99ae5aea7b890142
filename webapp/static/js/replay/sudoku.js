// Sudoku: the board with the givens, the model's placements highlighted and refused moves
// marked, read from the boards the server drew ("1 | 5 3 . | . 7 . | . . . |" rows) and the
// place(row, column, digit) calls.
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  var el = R.el;
  var ROW = /^([1-9]) \|((?: [1-9.]){3} \|){3}$/;

  function parseGrid(text) {
    var grid = [];
    String(text || "").split("\n").forEach(function (line) {
      line = line.trim();
      if (!ROW.test(line)) return;
      grid.push(line.slice(1).replace(/\|/g, " ").trim().split(/\s+/).map(function (cell) {
        return cell === "." ? 0 : Number(cell);
      }));
    });
    return grid.length === 9 ? grid : null;
  }

  function cellOf(call) {
    var args = call && call.arguments;
    if (!args || typeof args !== "object") return null;
    var row = Number(args.row), column = Number(args.column);
    if (!(row >= 1 && row <= 9 && column >= 1 && column <= 9)) return null;
    return { row: row - 1, column: column - 1, digit: args.digit };
  }

  function read(view) {
    var answers = R.answersUpTo(view);
    var givens = parseGrid(answers[0].text);
    var board = givens;
    var refused = [];
    var latest = null;
    var score = givens ? 0 : null;
    answers.slice(1).forEach(function (answer) {
      var grid = parseGrid(answer.text);
      if (grid) board = grid;
      var refusal = answer.error || /^Invalid move:/m.test(answer.text);
      var cell = cellOf(answer.call);
      if (refusal) refused.push({ turn: answer.turn, cell: cell, text: answer.text.split("\n")[0] });
      else if (cell && answer.turn === view.index) latest = cell;
      var progress = /\(progress ([0-9.]+)\)|Reward ([0-9.]+)\./.exec(answer.text);
      if (progress) score = Number(progress[1] || progress[2]);
    });
    return { givens: givens, board: board, refused: refused, latest: latest, score: score };
  }

  R.register("sudoku", {
    rewardSoFar: function (view) {
      return read(view).score;
    },
    render: function (target, view) {
      var game = read(view);
      if (!game.board) return R.get("transcript").render(target, view);
      target.appendChild(el("h2", null, "Sudoku"));
      var refusedHere = {};
      game.refused.forEach(function (move) {
        if (move.cell) refusedHere[move.cell.row + "," + move.cell.column] = move.turn === view.index ? "refused current" : "refused";
      });
      var table = el("table", "sudoku-board");
      var placed = 0;
      game.board.forEach(function (cells, r) {
        var tr = el("tr");
        cells.forEach(function (value, c) {
          var given = game.givens && game.givens[r][c] !== 0;
          var classes = ["sudoku-cell"];
          if (given) classes.push("given");
          else if (value) { classes.push("placed"); placed++; }
          if (game.latest && game.latest.row === r && game.latest.column === c) classes.push("latest");
          if (refusedHere[r + "," + c]) classes.push(refusedHere[r + "," + c]);
          var td = el("td", classes.join(" "), value ? String(value) : "");
          td.dataset.row = String(r + 1);
          td.dataset.column = String(c + 1);
          tr.appendChild(td);
        });
        table.appendChild(tr);
      });
      target.dataset.placed = String(placed);
      target.dataset.refused = String(game.refused.length);
      target.appendChild(table);
      if (game.refused.length) {
        var list = el("ul", "sudoku-refused");
        game.refused.forEach(function (move) {
          list.appendChild(el("li", "replay-error", "turn " + move.turn + ": " + move.text));
        });
        target.appendChild(list);
      }
    },
  });
})();
