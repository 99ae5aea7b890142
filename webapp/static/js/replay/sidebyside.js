// Side by side: 2-4 stored episodes of the same seed in columns, driven by ONE set of replay
// controls (controls.js) over the longest episode; a column that has ended stays on its last
// turn. Columns still being played on the worker show as pending: the page polls their
// evaluation over REST and reloads once every one has ended.
// Test hooks: #sidebyside-page[data-turn][data-ready]; .sbs-column[data-turn];
// .sbs-column .replay-board[data-renderer].
(function () {
  "use strict";
  var root = document.getElementById("sidebyside-page");
  var data = document.getElementById("sidebyside-data");
  if (!root || !data || !window.EnvlabReplay) return;
  var R = window.EnvlabReplay;
  var page = JSON.parse(data.textContent);

  var played = [];
  (page.columns || []).forEach(function (column) {
    var box = document.querySelector('.sbs-column[data-column="' + Number(column.column) + '"]');
    if (!box || !column.replay) return;
    var episode = R.Episode(column.replay, box.querySelector(".replay-board"), box.querySelector(".replay-turn"));
    played.push({ box: box, episode: episode });
  });

  if (played.length) {
    var last = Math.max.apply(null, played.map(function (p) { return p.episode.last; }));
    R.controls({
      root: root,
      last: last,
      initial: page.turn,
      show: function (index) {
        played.forEach(function (p) {
          var shown = p.episode.show(Math.min(index, p.episode.last));
          p.box.dataset.turn = String(shown);
          p.box.classList.toggle("ended", index >= p.episode.last);
        });
      },
      url: function (index) { return page.path + "?" + page.query + (page.query ? "&" : "") + "turn=" + index; },
    });
  }

  var pending = page.pending || [];
  if (pending.length) {
    var line = document.getElementById("sbs-progress-text");
    var timer = window.setInterval(function () {
      Promise.all(pending.map(function (evaluation) {
        return window.envlab.http.getJsonOrNull(evaluation.api)
          .catch(function () { return null; });
      })).then(function (bodies) {
        var done = 0, total = 0, active = false;
        bodies.forEach(function (body, i) {
          if (!body) { active = true; total += pending[i].total; return; }
          done += body.progress.done;
          total += body.progress.total;
          if (body.status === "queued" || body.status === "running") active = true;
        });
        if (line) line.textContent = "Playing on the worker (greedy): " + done + " / " + total + " episode(s) stored";
        if (!active) {
          window.clearInterval(timer);
          window.location.reload(); // the columns as stored
        }
      });
    }, 1500);
  }
  root.dataset.ready = "true";
})();
