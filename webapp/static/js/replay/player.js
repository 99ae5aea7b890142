// The replay player: reads the stored episode (#replay-data, written by json_script) and
// steps through its turns (episode.js) with the replay controls (controls.js). The URL keeps
// ?turn=N. Test hooks: #replay-page[data-turn]; #replay-board[data-renderer].
(function () {
  "use strict";
  var root = document.getElementById("replay-page");
  var data = document.getElementById("replay-data");
  if (!root || !data || !window.EnvlabReplay) return;
  var R = window.EnvlabReplay;
  var episode = JSON.parse(data.textContent);
  var played = R.Episode(episode, document.getElementById("replay-board"), document.getElementById("replay-turn"));
  R.controls({
    root: root,
    last: played.last,
    initial: episode.turn,
    show: played.show,
    url: function (index) { return episode.path + "?turn=" + index; },
  });
  root.dataset.ready = "true";
})();
