/*
 * The run page's transcript list, virtualised: only the rows in view (and OVERSCAN more on
 * each side) are in the DOM, whatever the run stored. Rows are ROW_HEIGHT pixels while
 * collapsed; an expanded row (click its "transcript" button) is measured and may grow, and
 * rows above the view that change height move the scroll position with them, so what is on
 * screen stays put.
 *
 * Order: newest step first, newest rollout first within a step. The size comes from the
 * page's per-step counts (rollouts up to its last_seq); rows are read in pages from the
 * rollouts API, newest first (`step=S&before_seq=...`), and kept per step. Live rollouts
 * (add) go on top of their step without re-rendering the others.
 *
 * `?render=all` on the page: the feed as it was before, every row of the shown step
 * rendered whole into the DOM at once; the baseline of bench/transcript_list.py.
 *
 * Model and environment text is inserted with textContent only.
 *
 * A search (setSearch: the rollouts API's filters and ordering as a query string) shows one
 * list instead of the steps: the API's matches in its order (with the step filter, of that
 * step), read page after page through its `next` as the list scrolls; its length grows as
 * pages arrive (a page of placeholders past the last row read until the last page). Live
 * rollouts are not added to a search (they may not match): search again to see them.
 *
 * Test hooks on the box (#rollouts): data-mode ("virtual" | "all"), data-filter ("all" |
 * a step), data-rows (rows in the filtered list), data-ready ("true" once the rows in view
 * are drawn with data), data-focused (the seq a ?rollout= / #rollout- link opened),
 * data-search (the search's query string, "" without one), data-search-done ("true" once
 * its last page is read).
 */
(function () {
  "use strict";

  var ROW_HEIGHT = 76;
  var OVERSCAN = 8;
  // Small pages: a page of 20-turn transcripts is parsed on the main thread between frames.
  var FIRST_PAGE = 40;
  var MAX_PAGE = 100;
  var WHOLE_PAGE = 500; // reading a whole step (links, ?render=all)
  var GAP = 8; // px between rows, inside ROW_HEIGHT
  var RETRY_MS = 2000;

  var el = window.envlab.dom.el;
  var getJson = window.envlab.http.getJson;

  function formatNumber(value) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(3) : "—";
  }

  function messageText(content) {
    if (content === null || content === undefined) return "";
    if (typeof content === "string") return content;
    if (Array.isArray(content)) {
      return content
        .map(function (part) {
          if (part && typeof part === "object" && typeof part.text === "string") return part.text;
          if (typeof part === "string") return part;
          return JSON.stringify(part);
        })
        .join("\n");
    }
    return JSON.stringify(content);
  }

  function normaliseMessages(value) {
    if (typeof value === "string") return [{ role: "user", content: value }];
    return Array.isArray(value) ? value : [];
  }

  function renderMessage(message, withToolCalls) {
    var m = message && typeof message === "object" ? message : { role: "?", content: message };
    var role = String(m.role || "?");
    var li = el("li", "message role-" + role.toLowerCase().replace(/[^a-z0-9_-]/g, ""));
    li.appendChild(el("div", "message-role", role + (m.name ? " · " + String(m.name) : "")));
    var text = messageText(m.content);
    if (text || !withToolCalls) li.appendChild(el("pre", "message-content", text));
    var calls = withToolCalls && Array.isArray(m.tool_calls) ? m.tool_calls : [];
    if (calls.length) {
      var ul = el("ul", "tool-calls");
      calls.forEach(function (call) {
        var fn = call && typeof call === "object" && call.function && typeof call.function === "object" ? call.function : {};
        var args = fn.arguments;
        var item = el("li", "tool-call");
        item.appendChild(el("span", "tool-name", fn.name === undefined ? "" : String(fn.name)));
        item.appendChild(
          el("pre", "tool-args", typeof args === "string" ? args : args === undefined ? "" : JSON.stringify(args))
        );
        ul.appendChild(item);
      });
      li.appendChild(ul);
    }
    return li;
  }

  function renderTranscript(article, r) {
    var body = el("div", "rollout-body");
    var prompt = normaliseMessages(r.prompt);
    if (prompt.length) {
      var details = el("details", "rollout-prompt");
      details.appendChild(
        el("summary", null, "prompt (" + prompt.length + " message" + (prompt.length === 1 ? "" : "s") + ")")
      );
      var promptList = el("ol", "messages");
      prompt.forEach(function (m) {
        promptList.appendChild(renderMessage(m, false));
      });
      details.appendChild(promptList);
      body.appendChild(details);
    }
    var list = el("ol", "messages");
    normaliseMessages(r.messages).forEach(function (m) {
      list.appendChild(renderMessage(m, true));
    });
    body.appendChild(list);
    article.appendChild(body);
  }

  // One row: the head (seq, step, env, reward, advantage, replay and prompt links), the
  // per-term rewards and, expanded, the transcript.
  function renderRow(r, urls, expanded, onToggle) {
    var article = el("article", "rollout" + (expanded ? " expanded" : ""));
    article.dataset.seq = String(r.seq);
    article.dataset.step = String(r.step);
    article.id = "rollout-" + r.seq;
    var head = el("header", "rollout-head");
    var count = normaliseMessages(r.messages).length;
    if (onToggle) {
      // First in the row, so a narrow screen that clips the head keeps it.
      var toggle = el("button", "rollout-toggle", (expanded ? "▾ " : "▸ ") + count + " message" + (count === 1 ? "" : "s"));
      toggle.type = "button";
      toggle.title = expanded ? "Hide the transcript" : "Show the transcript";
      toggle.setAttribute("aria-expanded", String(!!expanded));
      toggle.addEventListener("click", function () {
        onToggle(r.seq);
      });
      head.appendChild(toggle);
    }
    head.appendChild(el("span", "rollout-seq", "#" + r.seq));
    head.appendChild(el("span", "rollout-step", "step " + r.step));
    head.appendChild(el("span", "rollout-env", r.env || "—"));
    head.appendChild(el("span", "rollout-reward", "reward " + formatNumber(r.reward)));
    head.appendChild(el("span", "rollout-advantage", "advantage " + formatNumber(r.advantage)));
    var replay = el("a", "rollout-replay", "replay");
    replay.href = urls.replay(r.seq);
    head.appendChild(replay);
    if (typeof r.prompt_key === "string" && /^[0-9a-f]{1,64}$/.test(r.prompt_key)) {
      var promptLink = el("a", "rollout-prompt-link", "prompt");
      promptLink.href = urls.prompt(r.prompt_key);
      head.appendChild(promptLink);
    }
    article.appendChild(head);
    var terms = el("ul", "rollout-rewards");
    var rewards = r.rewards && typeof r.rewards === "object" ? r.rewards : {};
    Object.keys(rewards).forEach(function (term) {
      var li = el("li");
      li.appendChild(el("span", "term", term));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "value", formatNumber(rewards[term])));
      terms.appendChild(li);
    });
    article.appendChild(terms);
    if (expanded) renderTranscript(article, r);
    return article;
  }

  // --- the list -----------------------------------------------------------------------

  function RolloutList(options) {
    this.box = options.box;
    this.filterSelect = options.filter || null;
    this.statusNode = options.status || null;
    this.api = options.api;
    this.stepsApi = options.stepsApi;
    var runId = Number(options.runId);
    var promptTemplate = String(options.promptUrl || "");
    this.urls = {
      replay: function (seq) {
        return "/replay/runs/" + runId + "/" + Number(seq) + "/";
      },
      prompt: function (key) {
        return promptTemplate.replace("__key__", encodeURIComponent(key));
      },
    };
    this.mode = options.renderAll ? "all" : "virtual";
    this.filter = null; // null: every step
    this.search = ""; // the API's search parameters; "" shows the steps
    this.found = null; // the search's one entry (rows in the API's order)
    this.onSearched = options.onSearched || function () {};
    this.expanded = new Map(); // seq -> measured height
    this.nodes = new Map(); // key -> row node in the DOM
    this.frame = null;
    this.shift = 0; // px to scroll by at the next render (rows above the view grew)
    this.failedAt = 0;
    this.retryTimer = null;
    this.onEmpty = options.onEmpty || function () {};
    // The rows the server rendered stay on screen until the list has drawn its own.
    this.served = Array.prototype.slice.call(this.box.children);
    this.spacer = el("div", "vlist-spacer");
    this.spacer.hidden = this.served.length > 0;
    this.box.appendChild(this.spacer);
    this.box.dataset.mode = this.mode;
    var self = this;
    this.resizer =
      typeof ResizeObserver === "function"
        ? new ResizeObserver(function (entries) {
            self.measured(entries);
          })
        : null;
    this.box.addEventListener(
      "scroll",
      function () {
        self.schedule();
      },
      { passive: true }
    );
    window.addEventListener("resize", function () {
      self.schedule();
    });
    if (this.filterSelect) {
      this.filterSelect.addEventListener("change", function () {
        var value = self.filterSelect.value;
        self.setFilter(value === "all" ? null : Number(value));
      });
    }
    this.reset(options.steps || [], Number(options.throughSeq) || 0);
  }

  RolloutList.prototype.reset = function (steps, throughSeq) {
    // Counts of the rollouts up to throughSeq; every later one comes through add().
    this.base = throughSeq;
    this.highWater = throughSeq;
    this.steps = new Map();
    var self = this;
    steps.forEach(function (pair) {
      self.entry(Number(pair[0])).count = Number(pair[1]) || 0;
    });
    if (this.filter !== null && !this.steps.has(this.filter)) this.filter = null;
    this.expanded.clear();
    this.clearNodes();
    this.reorder();
    this.schedule();
  };

  RolloutList.prototype.reload = function () {
    // After a resumed run forgot its later steps: sizes read again; returns the seq they cover.
    var self = this;
    return getJson(this.stepsApi).then(function (body) {
      self.reset(body.steps || [], Number(body.last_seq) || 0);
      return self.base;
    });
  };

  RolloutList.prototype.entry = function (step) {
    var entry = this.steps.get(step);
    if (!entry) {
      // Read from just above everything seen: the pages below it are contiguous.
      entry = { step: step, count: 0, rows: [], seqs: new Set(), cursor: this.highWater + 1, done: false, loading: false };
      this.steps.set(step, entry);
      this.orderDirty = true;
    }
    return entry;
  };

  RolloutList.prototype.reorder = function () {
    this.order = Array.from(this.steps.keys()).sort(function (a, b) {
      return b - a;
    });
    this.recount();
    this.renderFilter();
    this.orderDirty = false;
  };

  RolloutList.prototype.recount = function () {
    var prefix = [0];
    var self = this;
    this.order.forEach(function (step, k) {
      prefix.push(prefix[k] + self.steps.get(step).count);
    });
    this.prefix = prefix;
  };

  RolloutList.prototype.length = function () {
    if (this.found) return this.found.count;
    if (this.filter !== null) return this.steps.get(this.filter).count;
    return this.prefix[this.prefix.length - 1];
  };

  RolloutList.prototype.locate = function (index) {
    // index in the shown list -> [entry, index within its step]
    if (this.found) return [this.found, index];
    if (this.filter !== null) return [this.steps.get(this.filter), index];
    var lo = 0;
    var hi = this.order.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (this.prefix[mid] <= index) lo = mid;
      else hi = mid - 1;
    }
    return [this.steps.get(this.order[lo]), index - this.prefix[lo]];
  };

  RolloutList.prototype.indexOfSeq = function (seq, step) {
    if (this.found) {
      for (var f = 0; f < this.found.rows.length; f++) if (this.found.rows[f].seq === seq) return f;
      return -1;
    }
    var entry = this.steps.get(step);
    if (!entry || (this.filter !== null && this.filter !== step)) return -1;
    var j = -1;
    for (var i = 0; i < entry.rows.length; i++) {
      if (entry.rows[i].seq === seq) {
        j = i;
        break;
      }
    }
    if (j < 0) return -1;
    return this.filter !== null ? j : this.prefix[this.order.indexOf(step)] + j;
  };

  RolloutList.prototype.extras = function () {
    // The expanded rows of the shown list, by index: [[index, extra height], ...]
    var out = [];
    var self = this;
    this.expanded.forEach(function (info, seq) {
      var index = self.indexOfSeq(seq, info.step);
      if (index >= 0) out.push([index, Math.max(0, info.height - ROW_HEIGHT)]);
    });
    out.sort(function (a, b) {
      return a[0] - b[0];
    });
    return out;
  };

  function offsetOf(index, extras) {
    var y = index * ROW_HEIGHT;
    for (var k = 0; k < extras.length && extras[k][0] < index; k++) y += extras[k][1];
    return y;
  }

  function indexAt(y, extras) {
    var acc = 0;
    for (var k = 0; k < extras.length; k++) {
      var top = extras[k][0] * ROW_HEIGHT + acc;
      if (y < top) break;
      if (y < top + ROW_HEIGHT + extras[k][1]) return extras[k][0];
      acc += extras[k][1];
    }
    return Math.floor(Math.max(0, y - acc) / ROW_HEIGHT);
  }

  RolloutList.prototype.schedule = function () {
    if (this.frame !== null) return;
    var self = this;
    this.frame = window.requestAnimationFrame(function () {
      self.frame = null;
      self.render();
    });
  };

  RolloutList.prototype.clearNodes = function () {
    var self = this;
    this.nodes.forEach(function (node) {
      if (self.resizer) self.resizer.unobserve(node);
    });
    this.nodes.clear();
    this.spacer.textContent = "";
  };

  RolloutList.prototype.render = function () {
    if (this.orderDirty) this.reorder();
    if (this.mode === "all") return this.renderEverything();
    var n = this.length();
    var extras = this.extras();
    var total = n * ROW_HEIGHT;
    extras.forEach(function (e) {
      total += e[1];
    });
    this.spacer.style.height = total + "px";
    if (this.shift) {
      this.box.scrollTop += this.shift;
      this.shift = 0;
    }
    this.box.dataset.rows = String(n);
    this.box.dataset.filter = this.filter === null ? "all" : String(this.filter);
    this.onEmpty(n === 0);
    var top = this.box.scrollTop;
    var first = Math.max(0, indexAt(top, extras) - OVERSCAN);
    var last = Math.min(n - 1, indexAt(top + this.box.clientHeight, extras) + OVERSCAN);
    var wanted = [];
    var keys = new Set();
    var missing = false;
    var drawn = false;
    for (var i = first; i <= last; i++) {
      var at = this.locate(i);
      var entry = at[0];
      var row = entry.rows[at[1]];
      var key = row ? "r" + row.seq : "p" + entry.step + ":" + at[1];
      var node = this.nodes.get(key);
      if (!node) {
        node = row ? this.rowNode(row) : el("div", "rollout-placeholder", "loading…");
        this.nodes.set(key, node);
      }
      var y = offsetOf(i, extras) + "px";
      if (node.style.top !== y) node.style.top = y;
      wanted.push(node);
      keys.add(key);
      if (row) drawn = true;
      else {
        missing = true;
        this.load(entry, at[1]);
      }
    }
    var self = this;
    this.nodes.forEach(function (node, key) {
      if (!keys.has(key)) {
        if (self.resizer) self.resizer.unobserve(node);
        if (node.parentNode) node.parentNode.removeChild(node);
        self.nodes.delete(key);
      }
    });
    // DOM order = list order, moving only what is out of place.
    var prev = null;
    wanted.forEach(function (node) {
      var expected = prev ? prev.nextSibling : self.spacer.firstChild;
      if (node !== expected) self.spacer.insertBefore(node, expected);
      prev = node;
    });
    this.box.dataset.ready = String(!missing);
    // The server's rows go as soon as the list shows one of its own (never both at once).
    if (drawn || !missing) this.takeOver();
  };

  RolloutList.prototype.takeOver = function () {
    if (this.served === null) return;
    this.served.forEach(function (node) {
      if (node.parentNode) node.parentNode.removeChild(node);
    });
    this.served = null;
    this.box.classList.add("vlist");
    this.spacer.hidden = false;
  };

  RolloutList.prototype.rowNode = function (row) {
    var self = this;
    var expanded = this.expanded.has(row.seq);
    var node = renderRow(row, this.urls, expanded, function (seq) {
      self.toggle(seq);
    });
    if (expanded && this.resizer) this.resizer.observe(node);
    return node;
  };

  RolloutList.prototype.find = function (seq) {
    var found = null;
    if (this.found && this.found.seqs.has(seq)) {
      this.found.rows.forEach(function (r) {
        if (r.seq === seq) found = r;
      });
      return found;
    }
    this.steps.forEach(function (entry) {
      if (!found && entry.seqs.has(seq)) {
        for (var i = 0; i < entry.rows.length; i++) if (entry.rows[i].seq === seq) found = entry.rows[i];
      }
    });
    return found;
  };

  RolloutList.prototype.toggle = function (seq, open) {
    var row = this.find(seq);
    if (!row) return;
    var isOpen = this.expanded.has(seq);
    if (open === undefined) open = !isOpen;
    if (open === isOpen) return;
    var key = "r" + seq;
    var old = this.nodes.get(key);
    var extrasBefore = this.extras();
    var index = this.indexOfSeq(seq, row.step);
    var rowTop = index >= 0 ? offsetOf(index, extrasBefore) : 0;
    var oldHeight = isOpen ? this.expanded.get(seq).height : ROW_HEIGHT;
    if (open) this.expanded.set(seq, { step: row.step, height: ROW_HEIGHT });
    else this.expanded.delete(seq);
    var node = this.rowNode(row);
    if (old) {
      if (this.resizer) this.resizer.unobserve(old);
      node.style.top = old.style.top;
      old.parentNode.replaceChild(node, old);
      this.nodes.set(key, node);
    }
    var height = ROW_HEIGHT;
    if (open) {
      height = old ? node.offsetHeight + GAP : ROW_HEIGHT;
      this.expanded.get(seq).height = height;
    }
    // A row that starts above the view keeps what is on screen in place.
    if (rowTop < this.box.scrollTop) this.shift += height - oldHeight;
    this.render();
  };

  RolloutList.prototype.measured = function (entries) {
    var changed = false;
    var self = this;
    var extras = null;
    entries.forEach(function (e) {
      var seq = Number(e.target.dataset.seq);
      var info = self.expanded.get(seq);
      if (!info || !e.target.isConnected) return;
      var height = e.target.offsetHeight + GAP;
      if (height === info.height || !height) return;
      if (!extras) extras = self.extras();
      var index = self.indexOfSeq(seq, info.step);
      if (index >= 0 && offsetOf(index, extras) < self.box.scrollTop) self.shift += height - info.height;
      info.height = height;
      changed = true;
    });
    if (changed) this.schedule();
  };

  RolloutList.prototype.loadPage = function (entry, url, failure, take) {
    // Reads `url` into `entry` with `take(body)` (true when read, or moot). Resolves to false
    // when the read failed: `failure` and the error are shown, and reads wait RETRY_MS.
    var self = this;
    entry.loading = getJson(url)
      .then(take)
      .catch(function (error) {
        self.failedAt = Date.now();
        self.status(failure + error.message);
        return false;
      })
      .then(function (ok) {
        entry.loading = null;
        self.schedule();
        return ok;
      });
    return entry.loading;
  };

  RolloutList.prototype.load = function (entry, upto, whole) {
    // The next page of a step, newest first below what it holds. Resolves to false when
    // the read failed (retried on a later render, not sooner than RETRY_MS).
    if (entry.loading) return entry.loading;
    if (entry.done || entry.rows.length > upto) return Promise.resolve(true);
    if (entry === this.found) return this.loadFound(entry);
    var self = this;
    var wait = this.failedAt + RETRY_MS - Date.now();
    if (wait > 0) {
      if (!this.retryTimer) {
        this.retryTimer = setTimeout(function () {
          self.retryTimer = null;
          self.schedule();
        }, wait);
      }
      return Promise.resolve(false);
    }
    var limit = Math.max(FIRST_PAGE, Math.min(whole ? WHOLE_PAGE : MAX_PAGE, upto - entry.rows.length + 4 * OVERSCAN));
    var url =
      this.api + "?step=" + entry.step + "&before_seq=" + encodeURIComponent(entry.cursor) + "&limit=" + limit;
    return this.loadPage(entry, url, "Could not read transcripts: ", function (body) {
      if (self.steps.get(entry.step) !== entry) return true; // reset meanwhile
      (body.results || []).forEach(function (r) {
        var seq = Number(r.seq);
        if (seq < entry.cursor) entry.cursor = seq;
        if (entry.seqs.has(seq)) return;
        entry.seqs.add(seq);
        entry.rows.push(r);
      });
      if (!body.next) {
        entry.done = true;
        if (entry.count !== entry.rows.length) {
          entry.count = entry.rows.length;
          self.recount();
          self.renderFilter();
        }
      }
      self.status("");
      return true;
    });
  };

  RolloutList.prototype.loadFound = function (entry) {
    // The search's next page, as the API's `next` names it (same origin: its path only).
    var self = this;
    if (Date.now() < this.failedAt + RETRY_MS) return Promise.resolve(false);
    return this.loadPage(entry, entry.next, "Could not search the transcripts: ", function (body) {
      if (self.found !== entry) return true; // searched again meanwhile
      (body.results || []).forEach(function (r) {
        var seq = Number(r.seq);
        if (entry.seqs.has(seq)) return;
        entry.seqs.add(seq);
        entry.rows.push(r);
      });
      if (body.next) {
        var next = new URL(body.next, window.location.href);
        entry.next = next.pathname + next.search;
        entry.count = entry.rows.length + FIRST_PAGE;
      } else {
        entry.done = true;
        entry.count = entry.rows.length;
        self.box.dataset.searchDone = "true";
      }
      self.onSearched(entry.done ? entry.rows.length : null, body.search || null);
      self.status("");
      return true;
    });
  };

  RolloutList.prototype.setSearch = function (query) {
    // `query`: the API's search parameters ("" shows the steps again); the step filter joins them.
    this.search = String(query || "");
    this.found = null;
    if (this.search) {
      var params = new URLSearchParams(this.search);
      if (this.filter !== null) params.set("step", String(this.filter));
      params.set("limit", String(MAX_PAGE));
      this.found = { step: "search", count: FIRST_PAGE, rows: [], seqs: new Set(), next: this.api + "?" + params, done: false, loading: null };
    }
    this.box.dataset.search = this.search;
    this.box.dataset.searchDone = "false";
    this.expanded.clear();
    this.clearNodes();
    this.box.scrollTop = 0;
    this.box.dataset.ready = "false";
    this.render();
  };

  RolloutList.prototype.loadAll = function (entry) {
    // Every row of the step, page after page (the ?render=all baseline and links).
    var self = this;
    if (entry.done) return Promise.resolve();
    return this.load(entry, entry.rows.length + WHOLE_PAGE, true).then(function (ok) {
      if (!ok) throw new Error("transcripts of step " + entry.step + " could not be read");
      return self.loadAll(entry);
    });
  };

  RolloutList.prototype.add = function (r) {
    // A live rollout: on top of its step, nothing else re-rendered.
    var seq = Number(r.seq);
    if (!(seq > this.base)) return; // counted already; a page brings it
    var entry = this.entry(Number(r.step));
    if (entry.seqs.has(seq)) return;
    if (seq > this.highWater) this.highWater = seq;
    entry.seqs.add(seq);
    if (!entry.rows.length || entry.rows[0].seq < seq) entry.rows.unshift(r);
    else {
      var i = 0;
      while (i < entry.rows.length && entry.rows[i].seq > seq) i++;
      entry.rows.splice(i, 0, r);
    }
    entry.count += 1;
    if (this.orderDirty) this.reorder();
    else {
      this.recount();
      this.renderFilter();
    }
    if (this.mode === "virtual" && (this.filter === null || this.filter === entry.step)) {
      var index = this.indexOfSeq(seq, entry.step);
      // A row above the view: what is on screen stays put (applied once the list is taller).
      if (index >= 0 && offsetOf(index, this.extras()) < this.box.scrollTop) this.shift += ROW_HEIGHT;
      // The rows below move down by one: only placeholders are keyed by index.
      this.dropPlaceholders();
    }
    if (this.mode === "all" && this.allShown && (this.filter === null || this.filter === entry.step)) {
      var node = renderRow(r, this.urls, true, null);
      this.spacer.insertBefore(node, this.spacer.firstChild);
      this.box.dataset.rows = String(this.spacer.children.length);
      this.onEmpty(false);
      return;
    }
    this.schedule();
  };

  RolloutList.prototype.dropPlaceholders = function () {
    var self = this;
    this.nodes.forEach(function (node, key) {
      if (key.charAt(0) === "p") {
        if (node.parentNode) node.parentNode.removeChild(node);
        self.nodes.delete(key);
      }
    });
  };

  RolloutList.prototype.setFilter = function (step) {
    if (step !== null && !this.steps.has(step)) step = null;
    this.filter = step;
    if (this.filterSelect) this.filterSelect.value = step === null ? "all" : String(step);
    if (this.search) return this.setSearch(this.search); // the same search, of that step
    this.clearNodes();
    this.allShown = false;
    this.box.scrollTop = 0;
    this.box.dataset.ready = "false";
    this.render();
  };

  RolloutList.prototype.renderFilter = function () {
    var select = this.filterSelect;
    if (!select) return;
    var self = this;
    var options = select.options;
    var wanted = ["all"].concat(this.order.map(String));
    var same = options.length === wanted.length;
    for (var i = 0; same && i < wanted.length; i++) same = options[i].value === wanted[i];
    if (!same) {
      select.textContent = "";
      wanted.forEach(function (value) {
        select.appendChild(el("option", null, ""));
        select.lastChild.value = value;
      });
    }
    var total = this.prefix[this.prefix.length - 1];
    options[0].textContent = "all steps (" + total + ")";
    for (var k = 1; k < options.length; k++) {
      var count = self.steps.get(Number(options[k].value)).count;
      var label = "step " + options[k].value + " (" + count + ")";
      if (options[k].textContent !== label) options[k].textContent = label;
    }
    select.value = this.filter === null ? "all" : String(this.filter);
  };

  RolloutList.prototype.status = function (text) {
    if (this.statusNode && this.statusNode.textContent !== text) this.statusNode.textContent = text;
  };

  RolloutList.prototype.focus = function (seq) {
    // A link to one rollout (?rollout=<seq> or #rollout-<seq>): its step, scrolled to, opened.
    var self = this;
    if (this.search) this.setSearch(""); // a link opens the rollout among its step's
    return getJson(this.api + "?after_seq=" + (seq - 1) + "&limit=1")
      .then(function (body) {
        var r = (body.results || [])[0];
        if (!r || Number(r.seq) !== seq) return;
        var entry = self.entry(Number(r.step));
        if (self.orderDirty) self.reorder();
        self.setFilter(entry.step);
        var find = function () {
          if (entry.seqs.has(seq) || entry.done) return Promise.resolve();
          return self.loadAll(entry).then(find);
        };
        return find().then(function () {
          if (!entry.seqs.has(seq)) return;
          self.render();
          self.box.scrollTop = offsetOf(self.indexOfSeq(seq, entry.step), self.extras());
          self.render();
          self.toggle(seq, true); // in the DOM now: measured as it opens
          self.box.dataset.focused = String(seq);
          if (self.box.scrollIntoView) self.box.scrollIntoView({ block: "start" });
        });
      })
      .catch(function (error) {
        self.status("Could not open rollout " + seq + ": " + error.message);
      });
  };

  RolloutList.prototype.renderEverything = function () {
    // ?render=all: the old feed, every row of the shown list whole in the DOM.
    if (this.allShown || this.allLoading) return;
    var self = this;
    var entries = this.filter !== null ? [this.steps.get(this.filter)] : this.order.map(function (s) {
      return self.steps.get(s);
    });
    this.allLoading = true;
    this.box.dataset.ready = "false";
    entries
      .reduce(function (chain, entry) {
        return chain.then(function () {
          return self.loadAll(entry);
        });
      }, Promise.resolve())
      .then(function () {
        var fragment = document.createDocumentFragment();
        var shown = 0;
        entries.forEach(function (entry) {
          entry.rows.forEach(function (r) {
            fragment.appendChild(renderRow(r, self.urls, true, null));
            shown += 1;
          });
        });
        self.spacer.textContent = "";
        self.spacer.style.height = "";
        self.spacer.appendChild(fragment);
        self.takeOver();
        self.allShown = true;
        self.box.dataset.rows = String(shown);
        self.box.dataset.filter = self.filter === null ? "all" : String(self.filter);
        self.onEmpty(shown === 0);
        self.box.dataset.ready = "true";
      })
      .finally(function () {
        self.allLoading = false;
      });
  };

  window.EnvlabRolloutList = RolloutList;
  window.EnvlabRolloutList.ROW_HEIGHT = ROW_HEIGHT;
})();
