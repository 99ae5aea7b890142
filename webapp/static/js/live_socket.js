/*
 * One reconnecting WebSocket to this page's own origin, as window.envlab.liveSocket; the run
 * page (run_live.js) and the environment console (env_console.js) use it.
 *
 *   var live = envlab.liveSocket.open({
 *     path: "/ws/...",                      // on this page's host, wss: under https:
 *     noRetry: { 4401: "not logged in" },   // close codes that are final, with their reason
 *     onMessage: function (message) {},     // each message that parses as JSON; others dropped
 *     onState: function (live, label) {},  // "connecting" | "reconnecting" | "closed"
 *     onClose: function (event) {},         // the socket in use closed, before any retry
 *   });
 *   live.isOpen(); live.send(text); live.resetBackoff();
 *
 * The server refuses with a noRetry code (no session, no access, nothing to watch): retrying
 * would only be refused again, so the socket stays closed and onState gets ("closed",
 * "closed: <reason>"). Any other close reconnects after 0.5 s, doubling up to 30 s, plus up to
 * 250 ms of jitter so that many tabs do not come back in step after a server restart. Only the
 * page knows when a connection has really been accepted (the run page's snapshot, the
 * console's tool list): it calls resetBackoff() then, so a server that accepts and drops at
 * once is still retried ever more slowly. What a page missed while away (sequence numbers,
 * re-reads over REST) is the page's own business: the server sends a snapshot on every connect.
 */
(function () {
  "use strict";

  var FIRST_DELAY_MS = 500;
  var MAX_DOUBLINGS = 6;
  var MAX_DELAY_MS = 30000;
  var JITTER_MS = 250;

  // Milliseconds before reconnect number `retries` (1 for the first), without the jitter.
  function backoff(retries) {
    return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * Math.pow(2, Math.min(retries - 1, MAX_DOUBLINGS)));
  }

  function LiveSocket(options) {
    this.path = options.path;
    this.noRetry = options.noRetry || {};
    this.onMessage = options.onMessage;
    this.onState = options.onState || function () {};
    this.onClose = options.onClose || function () {};
    this.socket = null;
    this.retries = 0;
    this.stopped = false;
  }

  LiveSocket.prototype.connect = function () {
    if (this.stopped) return;
    var self = this;
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var socket = new WebSocket(scheme + "//" + window.location.host + this.path);
    this.socket = socket;
    this.onState(this.retries ? "reconnecting" : "connecting");
    socket.onmessage = function (event) {
      var message;
      try {
        message = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      self.onMessage(message);
    };
    socket.onclose = function (event) {
      if (self.socket !== socket) return;
      self.socket = null;
      self.onClose(event);
      var reason = self.noRetry[event.code];
      if (reason) {
        self.stopped = true;
        self.onState("closed", "closed: " + reason);
        return;
      }
      self.retries += 1;
      var delay = backoff(self.retries) + Math.random() * JITTER_MS;
      self.onState("reconnecting");
      setTimeout(function () {
        self.connect();
      }, delay);
    };
  };

  LiveSocket.prototype.isOpen = function () {
    return !!this.socket && this.socket.readyState === WebSocket.OPEN;
  };

  // Sends text on the open socket; false (nothing sent) while there is none.
  LiveSocket.prototype.send = function (text) {
    if (!this.isOpen()) return false;
    this.socket.send(text);
    return true;
  };

  LiveSocket.prototype.resetBackoff = function () {
    this.retries = 0;
  };

  function open(options) {
    var live = new LiveSocket(options);
    live.connect();
    return live;
  }

  var envlab = (window.envlab = window.envlab || {});
  envlab.liveSocket = { open: open };
})();
