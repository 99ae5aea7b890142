/*
 * DOM helpers every page script shares, as window.envlab.dom. base.html loads this before any
 * page script (all deferred, so they run in document order).
 *
 * Model, environment and user text is untrusted: el() and setText() put it in with
 * textContent only, so it is shown as text and never parsed as HTML.
 */
(function () {
  "use strict";

  // An element with an optional class and text (any value, shown as String(value)).
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function byId(id) {
    return document.getElementById(id);
  }

  // The text of #id, when the page has it; an unchanged text is left alone (no DOM mutation
  // for observers and the browser to redo on every poll).
  function setText(id, text) {
    var node = byId(id);
    if (node && node.textContent !== text) node.textContent = text;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  var envlab = (window.envlab = window.envlab || {});
  envlab.dom = { el: el, byId: byId, setText: setText, clear: clear };
})();
