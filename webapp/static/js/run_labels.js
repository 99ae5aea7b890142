/*
 * The run page's name, tags, group and notes, edited in place by the run's owner:
 * PATCH /api/runs/<id>/ with the form's values, then the page shows what the server stored.
 * Every value is the user's own text: shown with textContent only (envlab.dom).
 */
(function () {
  "use strict";
  var dom = window.envlab.dom;
  var form = dom.byId("run-labels-form");
  if (!form) return;

  function tagList(text) {
    return text.split(",").map(function (tag) { return tag.trim(); }).filter(function (tag) { return tag; });
  }

  function show(run) {
    dom.setText("run-name", run.name);
    var tags = dom.byId("run-tags");
    dom.clear(tags);
    if (!run.tags.length) tags.appendChild(dom.el("span", "muted", "—"));
    run.tags.forEach(function (tag) {
      tags.appendChild(dom.el("span", "badge tag", tag));
      tags.appendChild(document.createTextNode(" "));
    });
    var group = dom.byId("run-group");
    dom.clear(group);
    if (run.group) {
      var link = dom.el("a", "", run.group);
      link.href = "/?group=" + encodeURIComponent(run.group);
      group.appendChild(link);
    } else {
      group.appendChild(dom.el("span", "muted", "—"));
    }
    dom.setText("run-notes", run.notes || "—");
    form.elements.tags.value = run.tags.join(", ");
  }

  function showErrors(errors) {
    var list = dom.byId("labels-errors");
    dom.clear(list);
    Object.keys(errors).forEach(function (field) {
      [].concat(errors[field]).forEach(function (message) {
        list.appendChild(dom.el("li", "", field + ": " + message));
      });
    });
    list.hidden = !list.firstChild;
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    dom.setText("labels-state", "saving…");
    var body = {
      name: form.elements.name.value,
      tags: tagList(form.elements.tags.value),
      group: form.elements.group.value,
      notes: form.elements.notes.value,
    };
    fetch(form.dataset.api, {
      method: "PATCH",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-CSRFToken": form.elements.csrfmiddlewaretoken.value,
      },
      body: JSON.stringify(body),
    })
      .then(function (response) {
        return response.json().then(function (data) { return { ok: response.ok, data: data }; });
      })
      .then(function (answer) {
        if (answer.ok) {
          showErrors({});
          show(answer.data);
          dom.setText("labels-state", "saved");
        } else {
          showErrors(answer.data.detail ? { request: answer.data.detail } : answer.data);
          dom.setText("labels-state", "not saved");
        }
      })
      .catch(function () {
        dom.setText("labels-state", "not saved: the server did not answer");
      });
  });
})();
