// The reward composer: a tree editor over plain term objects {name, kind, weight, environments,
// params, terms}. Every edit is checked (debounced) by POST /api/reward-recipes/validate/, the
// checks a save makes; each error is shown beside the row its dotted path names. Saving uses the
// recipes API; the preview scores one stored rollout with the draft, or has a job play a fresh
// episode (polled at GET /api/jobs/<id>/) and shows it the same way. All text from the server,
// the user or an environment goes in as textContent or a value, never as HTML.
(function () {
  "use strict";
  var root = document.getElementById("composer-page");
  if (!root) return;

  var VALIDATE_DELAY_MS = 350;
  var POLL_MS = 1000;
  var POLL_ERRORS = 30; // consecutive failed polls before giving up on a job
  var data = JSON.parse(document.getElementById("composer-data").textContent);
  var catalog = data.catalog;
  var kinds = {};
  catalog.kinds.forEach(function (kind) { kinds[kind.kind] = kind; });
  var envKeys = {};
  catalog.environments.forEach(function (env) { envKeys[env.name] = env.key; });
  var csrf = (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";

  var byId = window.envlab.dom.byId;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "className") node.className = attrs[key];
      else if (key === "dataset") Object.keys(attrs.dataset).forEach(function (d) { node.dataset[d] = attrs.dataset[d]; });
      else node.setAttribute(key, attrs[key]);
    });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // --- the draft -------------------------------------------------------------------------------
  var recipe = data.recipe;
  var state = { terms: recipe ? recipe.terms.map(imported) : [] };
  var uid = 0;

  function imported(term) {
    var copy = {
      name: term.name, kind: term.kind || "env_reward", params: Object.assign({}, term.params || {}),
      _id: ++uid, _auto: false,
    };
    if (term.weight !== undefined) copy.weight = term.weight;
    if (term.environments) copy.environments = term.environments.slice();
    if (term.terms) copy.terms = term.terms.map(imported);
    return copy;
  }

  function payload(term) {
    var out = { name: term.name, kind: term.kind, params: term.params };
    if (term.weight !== undefined) out.weight = term.weight;
    if (term.environments && term.environments.length) out.environments = term.environments;
    if (kinds[term.kind] && kinds[term.kind].container) out.terms = (term.terms || []).map(payload);
    return out;
  }

  function draft() {
    return {
      name: byId("recipe-name").value,
      description: byId("recipe-description").value,
      terms: state.terms.map(payload),
    };
  }

  function allNames(terms, out) {
    terms.forEach(function (t) { out[t.name] = true; allNames(t.terms || [], out); });
    return out;
  }

  function freshName(base) {
    var taken = allNames(state.terms, {});
    if (!taken[base]) return base;
    for (var i = 2; ; i++) if (!taken[base + "_" + i]) return base + "_" + i;
  }

  function newTerm() {
    return { name: freshName("env_reward"), kind: "env_reward", params: {}, _id: ++uid, _auto: true };
  }

  // --- attributes for a term's environments ---------------------------------------------------
  function attributesFor(term, ancestors) {
    var names = (term.environments && term.environments.length) ? term.environments : null;
    for (var i = ancestors.length - 1; !names && i >= 0; i--) {
      if (ancestors[i].environments && ancestors[i].environments.length) names = ancestors[i].environments;
    }
    // A registered environment's recorded kind; a bundled kind's own name (wordle) stands for itself.
    var keys = names ? names.map(function (n) { return envKeys[n] || (catalog.attributes[n] ? n : ""); })
      : catalog.environments.map(function (e) { return e.key; });
    if (!keys.length) keys = Object.keys(catalog.attributes);
    var seen = {}, out = [];
    keys.forEach(function (key) {
      (catalog.attributes[key] || catalog.attributes[""] || []).forEach(function (a) {
        if (!seen[a.name] && a.name.indexOf("<") < 0) { seen[a.name] = true; out.push(a); }
      });
    });
    return out;
  }

  function fillDatalist(list, term, ancestors) {
    list.textContent = "";
    attributesFor(term, ancestors).forEach(function (a) {
      list.appendChild(el("option", { value: a.name }, a.description));
    });
  }

  // --- rendering --------------------------------------------------------------------------------
  function render() {
    var tree = byId("term-tree");
    tree.textContent = "";
    state.terms.forEach(function (term, i) { tree.appendChild(row(term, state.terms, i, "terms." + i, [])); });
    // Paths moved with the rows: the old errors would point at the wrong ones until the
    // next check (which every structural change asks for) answers.
    lastErrors = null;
  }

  function paramValue(field, raw) {
    if (raw === "") return undefined;
    if (field.control === "number" || field.control === "integer" || field.control === "number_or_attribute") {
      var number = Number(raw);
      if (raw.trim() !== "" && isFinite(number)) return number;
      return raw; // not a number: sent as typed, so the server says what is wrong with it
    }
    return raw;
  }

  function paramInput(term, field, ancestors, listId) {
    var input;
    var current = term.params[field.name];
    if (field.control === "select") {
      input = el("select", {});
      if (field.default === undefined || field.default === null) input.appendChild(el("option", { value: "" }, "—"));
      field.options.forEach(function (option) {
        var item = el("option", { value: option }, option);
        if (current === option || (current === undefined && field.default === option)) item.selected = true;
        input.appendChild(item);
      });
    } else {
      var numeric = field.control === "number" || field.control === "integer";
      input = el("input", { type: numeric ? "number" : "text" });
      if (numeric) input.setAttribute("step", field.control === "integer" ? "1" : "any");
      if (field.control === "attribute" || field.control === "number_or_attribute") input.setAttribute("list", listId);
      if (field.max_length) input.setAttribute("maxlength", String(field.max_length));
      if (field.default !== undefined && field.default !== null) input.placeholder = String(field.default);
      else if (field.control === "number_or_attribute") input.placeholder = "a number or an attribute";
      else if (field.control === "attribute") input.placeholder = "an attribute";
      if (current !== undefined && current !== null) input.value = String(current);
    }
    input.className = "param-input";
    input.dataset.param = field.name;
    input.addEventListener(field.control === "select" ? "change" : "input", function () {
      var value = paramValue(field, input.value);
      if (value === undefined) delete term.params[field.name];
      else term.params[field.name] = value;
      changed();
    });
    return input;
  }

  function button(text, className, onClick, label) {
    var b = el("button", { type: "button", className: "button small-button " + className }, text);
    if (label) b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  function row(term, siblings, index, path, ancestors) {
    var spec = kinds[term.kind] || kinds.env_reward;
    var item = el("li", { className: "term", dataset: { path: path, kind: term.kind } });
    var head = el("div", { className: "term-head" });

    var name = el("input", { type: "text", className: "term-name", maxlength: "64", "aria-label": "Term name" });
    name.value = term.name;
    name.addEventListener("input", function () { term.name = name.value; term._auto = false; changed(); });

    var kind = el("select", { className: "term-kind", "aria-label": "Kind" });
    catalog.kinds.forEach(function (k) {
      var option = el("option", { value: k.kind }, k.container ? k.kind + " (container)" : k.kind);
      if (k.kind === term.kind) option.selected = true;
      kind.appendChild(option);
    });
    kind.addEventListener("change", function () {
      term.kind = kind.value;
      term.params = {};
      if (kinds[term.kind].container) term.terms = term.terms || [];
      else delete term.terms;
      if (term._auto) { term.name = ""; term.name = freshName(term.kind); }
      render();
      changed();
    });

    var weight = el("input", { type: "number", step: "any", className: "term-weight", placeholder: "1", "aria-label": "Weight" });
    if (term.weight !== undefined) weight.value = String(term.weight);
    weight.addEventListener("input", function () {
      var value = paramValue({ control: "number" }, weight.value);
      if (value === undefined) delete term.weight; else term.weight = value;
      changed();
    });

    var envs = el("input", { type: "text", className: "term-environments", list: "environment-names", placeholder: "every environment", "aria-label": "Environments (comma-separated)" });
    envs.value = (term.environments || []).join(", ");
    var list = el("datalist", { id: "attributes-" + term._id });
    envs.addEventListener("input", function () {
      var names = envs.value.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
      if (names.length) term.environments = names; else delete term.environments;
      fillDatalist(list, term, ancestors);
      changed();
    });

    head.appendChild(el("span", { className: "term-label" }, "Term"));
    head.appendChild(name);
    head.appendChild(kind);
    head.appendChild(labelled("weight", weight));
    head.appendChild(labelled("only on", envs));
    head.appendChild(button("↑", "term-up", function () { move(siblings, index, -1); }, "Move up"));
    head.appendChild(button("↓", "term-down", function () { move(siblings, index, 1); }, "Move down"));
    head.appendChild(button("Remove", "term-remove danger", function () { siblings.splice(index, 1); render(); changed(); }));
    if (spec.container) {
      head.appendChild(button("Add child", "term-add-child", function () {
        term.terms = term.terms || [];
        term.terms.push(newTerm());
        render();
        changed();
      }));
    }
    item.appendChild(head);
    item.appendChild(el("p", { className: "help term-help" }, spec.description));

    if (spec.fields.length) {
      var params = el("div", { className: "term-params" });
      spec.fields.forEach(function (field) {
        var holder = el("label", { className: "param", dataset: { param: field.name } });
        holder.appendChild(el("span", { className: "param-name" }, field.name + (field.required ? " *" : "")));
        holder.appendChild(paramInput(term, field, ancestors, list.id));
        if (field.description) holder.title = field.description;
        params.appendChild(holder);
      });
      item.appendChild(params);
    }
    if (term.kind === "expression") {
      item.appendChild(el("p", { className: "help" }, "Attributes: " + attributesFor(term, ancestors).map(function (a) { return a.name; }).join(", ")));
    }
    fillDatalist(list, term, ancestors);
    item.appendChild(list);
    item.appendChild(el("ul", { className: "field-errors term-errors" }));
    if (spec.container) {
      var children = el("ol", { className: "term-children" });
      (term.terms || []).forEach(function (child, i) {
        children.appendChild(row(child, term.terms, i, path + ".terms." + i, ancestors.concat([term])));
      });
      item.appendChild(children);
    }
    return item;
  }

  function labelled(text, input) {
    var label = el("label", { className: "term-field" });
    label.appendChild(el("span", { className: "muted small" }, text));
    label.appendChild(input);
    return label;
  }

  function move(siblings, index, by) {
    var to = index + by;
    if (to < 0 || to >= siblings.length) return;
    var item = siblings.splice(index, 1)[0];
    siblings.splice(to, 0, item);
    render();
    changed();
  }

  // --- errors beside their rows -------------------------------------------------------------------
  var lastErrors = null;

  function clearErrors() {
    Array.prototype.forEach.call(root.querySelectorAll(".term-errors, #composer-errors, #recipe-name-errors"), function (list) { list.textContent = ""; });
    Array.prototype.forEach.call(root.querySelectorAll(".has-error"), function (node) { node.classList.remove("has-error"); });
    Array.prototype.forEach.call(root.querySelectorAll(".term.invalid"), function (node) { node.classList.remove("invalid"); });
  }

  function showErrors(errors) {
    lastErrors = errors;
    clearErrors();
    var rows = Array.prototype.slice.call(root.querySelectorAll("#term-tree .term"));
    errors.forEach(function (error) {
      var path = error.path || "", best = null;
      rows.forEach(function (r) {
        var p = r.dataset.path;
        if ((path === p || path.indexOf(p + ".") === 0) && (!best || p.length > best.dataset.path.length)) best = r;
      });
      if (!best) {
        var target = path === "name" ? byId("recipe-name-errors") : byId("composer-errors");
        if (path === "name") byId("recipe-name-field").classList.add("has-error");
        target.appendChild(el("li", {}, path && path !== "name" ? path + ": " + error.message : error.message));
        return;
      }
      var rest = path.slice(best.dataset.path.length + 1);
      best.classList.add("invalid");
      var list = best.querySelector(":scope > .term-errors");
      list.appendChild(el("li", { dataset: { path: path } }, rest ? rest + ": " + error.message : error.message));
      var field = null;
      if (rest.indexOf("params.") === 0) field = best.querySelector(':scope > .term-params > .param[data-param="' + cssName(rest.split(".")[1]) + '"]');
      else if (rest === "name") field = best.querySelector(":scope > .term-head .term-name");
      else if (rest === "weight") field = best.querySelector(":scope > .term-head .term-weight");
      else if (rest === "environments" || rest.indexOf("environments.") === 0) field = best.querySelector(":scope > .term-head .term-environments");
      if (field) (field.classList.contains("param") ? field : field.parentNode).classList.add("has-error");
    });
  }

  function cssName(name) { return String(name).replace(/[^A-Za-z0-9_]/g, ""); }

  function apiErrors(body) {
    // A 400 from the recipes API: {dotted path: [messages]} (or DRF's {detail}).
    var out = [];
    Object.keys(body || {}).forEach(function (key) {
      var messages = Array.isArray(body[key]) ? body[key] : [body[key]];
      messages.forEach(function (m) {
        out.push({ path: key === "non_field_errors" || key === "detail" ? "" : key, message: typeof m === "string" ? m : JSON.stringify(m) });
      });
    });
    return out;
  }

  // --- live validation ----------------------------------------------------------------------------
  var timer = null, asked = 0;

  function setStatus(mode, text) {
    var status = byId("validation-status");
    status.dataset.state = mode;
    status.textContent = text;
  }

  function changed() {
    setStatus("pending", "checking…");
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(function () { timer = null; validate(); }, VALIDATE_DELAY_MS);
  }

  function send(method, url, body) {
    return fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (json) {
        return { status: response.status, ok: response.ok, body: json };
      });
    });
  }

  function validate() {
    var mine = ++asked;
    return send("POST", data.urls.validate, draft()).then(function (answer) {
      if (mine !== asked) return; // an older draft's answer: a newer one is on its way
      if (!answer.ok) { setStatus("failed", "could not check (" + answer.status + ")"); return; }
      showErrors(answer.body.errors);
      var count = answer.body.errors.length;
      setStatus(count ? "errors" : "ok", count ? count + (count === 1 ? " problem" : " problems") : "valid");
    }).catch(function () { if (mine === asked) setStatus("failed", "could not check"); });
  }

  // --- save ------------------------------------------------------------------------------------------
  function save() {
    var saveErrors = byId("save-errors");
    saveErrors.textContent = "";
    var url = recipe ? data.urls.recipe : data.urls.create;
    byId("save-recipe").disabled = true;
    send(recipe ? "PUT" : "POST", url, draft()).then(function (answer) {
      byId("save-recipe").disabled = false;
      if (answer.ok) {
        window.location.assign(data.urls.page.replace("{id}", String(answer.body.id)));
        return;
      }
      var errors = apiErrors(answer.body);
      showErrors(errors);
      setStatus("errors", "not saved");
      errors.forEach(function (e) { saveErrors.appendChild(el("li", {}, e.path ? e.path + ": " + e.message : e.message)); });
    }).catch(function () {
      byId("save-recipe").disabled = false;
      saveErrors.appendChild(el("li", {}, "could not reach the server; nothing was saved"));
    });
  }

  // --- preview ---------------------------------------------------------------------------------------
  function number(value) {
    if (value === null || value === undefined) return "—";
    return Math.abs(value) >= 1e4 || (value !== 0 && Math.abs(value) < 1e-3) ? value.toExponential(3) : String(Math.round(value * 1e4) / 1e4);
  }

  var lostEpisode = false;

  function how(node, parentKind) {
    if (!node.applies) {
      if (lostEpisode) return "not applied (the episode was lost: unscored)";
      return node.environments ? "not applied here (only on " + node.environments.join(", ") + ")" : "not applied (its parent does not apply here)";
    }
    if (node.value === null) return "not applicable (the episode lacks what it reads)";
    if (node.contribution !== null) return node.weight + " × " + number(node.value) + " = " + number(node.contribution);
    if (parentKind === "gate") return "passed to the gate";
    if (parentKind === "sequential") return "in sequence";
    return "";
  }

  function treeNodes(nodes, parentKind) {
    var list = el("ul", { className: "preview-nodes" });
    nodes.forEach(function (node) {
      var item = el("li", { className: "preview-node", dataset: { term: node.name } });
      item.appendChild(el("code", { className: "preview-name" }, node.name));
      item.appendChild(el("span", { className: "muted small" }, " " + node.kind + " "));
      item.appendChild(el("strong", { className: "preview-value" }, number(node.value)));
      var note = how(node, parentKind);
      if (note) item.appendChild(el("span", { className: "muted small preview-how" }, " — " + note));
      if (node.children.length) item.appendChild(treeNodes(node.children, node.kind));
      list.appendChild(item);
    });
    return list;
  }

  // One panel for both sources: a stored rollout's scores or a fresh episode's job result,
  // each `{total, values, tree}` (webapp.workbench.composer.preview_scores).
  function showPreview(result, source, summary, lost, messages) {
    lostEpisode = lost;
    byId("preview-summary").textContent = summary;
    var tree = byId("preview-tree");
    tree.textContent = "";
    tree.appendChild(treeNodes(result.tree, "weighted_sum"));
    showTranscript(messages);
    var result_ = byId("preview-result");
    result_.hidden = false;
    result_.dataset.source = source;
    result_.dataset.total = result.total === null ? "" : String(result.total);
  }

  function messageText(message) {
    var parts = [];
    var content = message.content;
    if (typeof content === "string") { if (content) parts.push(content); }
    else if (content !== undefined && content !== null) parts.push(JSON.stringify(content));
    (message.tool_calls || []).forEach(function (call) {
      var fn = call.function || {};
      parts.push("→ " + fn.name + "(" + JSON.stringify(fn.arguments || {}) + ")");
    });
    return parts.join("\n");
  }

  function showTranscript(messages) {
    var holder = byId("preview-transcript"), list = byId("preview-messages");
    list.textContent = "";
    holder.hidden = !messages;
    (messages || []).forEach(function (message) {
      var who = String(message.role || "") + (message.name ? " (" + message.name + ")" : "");
      list.appendChild(el("li", { className: "preview-message", dataset: { role: String(message.role || "") } }, who + ": " + messageText(message)));
    });
  }

  function refused(answer, notFound) {
    var errorLine = byId("preview-error");
    var errors = apiErrors(answer.body);
    var termErrors = errors.filter(function (e) { return e.path.indexOf("terms") === 0; });
    if (termErrors.length) showErrors(termErrors);
    errorLine.textContent = answer.status === 404 ? notFound
      : errors.map(function (e) { return e.path ? e.path + ": " + e.message : e.message; }).join("; ");
    errorLine.hidden = false;
    byId("preview-result").hidden = true;
  }

  var playing = 0; // the newest fresh episode asked for; older answers are dropped

  function preview() {
    var errorLine = byId("preview-error");
    errorLine.hidden = true;
    var run = byId("preview-run").value;
    if (!run) { errorLine.textContent = "You have no run to take a rollout from yet."; errorLine.hidden = false; return; }
    var ref = { run: Number(run) };
    var seq = byId("preview-seq").value.trim();
    if (seq !== "") ref.seq = Number(seq);
    playing++;
    send("POST", data.urls.preview, { terms: state.terms.map(payload), rollout: ref }).then(function (answer) {
      if (!answer.ok) { refused(answer, "No such rollout in your runs."); return; }
      var result = answer.body, shown = result.rollout;
      showPreview(result, "rollout", "Run " + shown.run + ", rollout " + shown.seq + " (step " + shown.step + ", " + (shown.env || "—") + "): total " + number(result.total) + " = the sum of weight × score over the top-level terms; the run stored " + number(shown.stored_reward) + ".", shown.unscored, null);
    }).catch(function () { errorLine.textContent = "could not reach the server"; errorLine.hidden = false; });
  }

  function freshEpisode() {
    var errorLine = byId("preview-error"), status = byId("fresh-episode-status"), link = byId("fresh-episode-link");
    errorLine.hidden = true;
    var environment = byId("fresh-environment").value;
    if (!environment) { errorLine.textContent = "Register an environment first."; errorLine.hidden = false; return; }
    var play = { environment: Number(environment), policy: byId("fresh-policy").value };
    if (byId("fresh-seed").value.trim() !== "") play.seed = whole("fresh-seed");
    var name = byId("fresh-name").value.trim();
    if (name) play.name = name;
    var mine = ++playing;
    link.hidden = true;
    status.textContent = "starting…";
    send("POST", data.urls.preview, { terms: state.terms.map(payload), play: play }).then(function (answer) {
      if (mine !== playing) return;
      if (!answer.ok) { status.textContent = ""; refused(answer, "No such environment."); return; }
      var job = answer.body.job;
      link.href = data.urls.job.replace("{id}", String(job.id));
      link.textContent = "job #" + job.id;
      link.hidden = false;
      follow(job.id, mine, 0);
    }).catch(function () { if (mine === playing) { status.textContent = ""; errorLine.textContent = "could not reach the server; no episode started"; errorLine.hidden = false; } });
  }

  function follow(id, mine, failures) {
    var status = byId("fresh-episode-status");
    window.envlab.http.getJson(data.urls.job_api.replace("{id}", String(id)))
      .then(function (job) {
        if (mine !== playing) return;
        if (job.status === "succeeded") { status.textContent = ""; freshShown(id, job.result); return; }
        if (job.status === "failed") {
          status.textContent = "";
          var errorLine = byId("preview-error");
          errorLine.textContent = "The episode could not be played: " + (job.error || "the job failed");
          errorLine.hidden = false;
          return;
        }
        status.textContent = job.status === "running" ? "playing…" : "waiting for a worker…";
        setTimeout(function () { follow(id, mine, 0); }, POLL_MS);
      })
      .catch(function () {
        if (mine !== playing) return;
        if (failures + 1 >= POLL_ERRORS) { status.textContent = "lost track of the job; see its page"; return; }
        setTimeout(function () { follow(id, mine, failures + 1); }, POLL_MS);
      });
  }

  function freshShown(id, result) {
    var episode = result.episode || {};
    var outcome = episode.lost ? "lost (unscored)" : episode.won ? "won" : "not won";
    showPreview(result, "fresh", "Fresh episode (job #" + id + ", " + (episode.env || "—") + ", seed " + episode.seed + ", " + episode.policy + ", " + outcome + "): total " + number(result.total) + " = the sum of weight × score over the top-level terms; the environment's reward " + number(episode.reward) + ".", Boolean(episode.lost), result.messages || []);
  }

  // --- dry runs --------------------------------------------------------------------------------------
  function dryRun(body, onJob) {
    var errors = byId("dry-run-errors");
    errors.textContent = "";
    if (recipe.version !== recipe.latest_version) body.version = recipe.version;
    send("POST", data.urls.dry_run, body).then(function (answer) {
      if (answer.ok) { onJob(data.urls.job.replace("{id}", String(answer.body.id))); return; }
      apiErrors(answer.body).forEach(function (e) { errors.appendChild(el("li", {}, e.path ? e.path + ": " + e.message : e.message)); });
    }).catch(function () { errors.appendChild(el("li", {}, "could not reach the server; no dry run started")); });
  }

  function whole(id) {
    var raw = byId(id).value.trim();
    return /^[0-9]{1,9}$/.test(raw) ? Number(raw) : raw;
  }

  function setUp() {
    byId("recipe-name").value = recipe ? recipe.name : "";
    byId("recipe-description").value = recipe ? recipe.description : "";
    byId("recipe-name").addEventListener("input", changed);
    byId("recipe-description").addEventListener("input", changed);
    byId("add-term").addEventListener("click", function () { state.terms.push(newTerm()); render(); changed(); });
    byId("save-recipe").addEventListener("click", save);
    var runs = byId("preview-run");
    data.runs.forEach(function (run) { runs.appendChild(el("option", { value: String(run.id) }, "#" + run.id + " " + run.name)); });
    byId("preview-button").addEventListener("click", preview);
    byId("fresh-episode").addEventListener("click", freshEpisode);
    var form = byId("dry-run-form");
    if (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        dryRun({
          environment: whole("dry-run-environment"), policy: byId("dry-run-policy").value,
          groups: whole("dry-run-groups"), group_size: whole("dry-run-group-size"), seed: whole("dry-run-seed"),
        }, function (url) { window.location.assign(url); });
      });
    }
    render();
    if (recipe) validate();
  }

  setUp();
})();
