// The one set of replay controls: play/pause, step, first/last, speed, scrubber, jump, and
// the keyboard (← → Home End, space), over turns 0..last. `show(index)` draws a turn (one
// episode, or every column of the side by side); `url(index)` is the shareable address the
// history keeps. Test hooks on `root`: data-turn, data-playing.
(function () {
  "use strict";
  var R = window.EnvlabReplay;
  if (!R) return;
  var STEP_MS = 1000; // one turn a second at 1x

  R.controls = function (options) {
    var root = options.root;
    var last = Math.max(0, options.last);
    var scrubber = document.getElementById("replay-scrubber");
    var jumpInput = document.getElementById("replay-jump-turn");
    var playButton = document.getElementById("replay-play");
    var speed = document.getElementById("replay-speed");
    scrubber.max = String(last);
    jumpInput.max = String(last);
    var state = { index: Math.max(0, Math.min(last, Number(options.initial) || 0)), timer: null };

    function show(index, push) {
      state.index = Math.max(0, Math.min(last, index));
      options.show(state.index);
      scrubber.value = String(state.index);
      jumpInput.value = String(state.index);
      document.getElementById("replay-position").textContent = "turn " + state.index + " / " + last;
      root.dataset.turn = String(state.index);
      if (push !== false && window.history && window.history.replaceState) {
        window.history.replaceState(null, "", options.url(state.index));
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
      state.timer = window.setTimeout(tick, STEP_MS / (Number(speed.value) || 1));
    }

    function play() {
      if (state.index >= last) show(0);
      playButton.textContent = "Pause";
      root.dataset.playing = "true";
      state.timer = window.setTimeout(tick, STEP_MS / (Number(speed.value) || 1));
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
    return { show: show, pause: pause, last: last };
  };
})();
