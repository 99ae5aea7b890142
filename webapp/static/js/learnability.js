// The environment page's learnability form: POSTs /api/reward-recipes/<id>/learnability/ and
// links the queued job; a refusal lists each field's errors. All text goes in as textContent.
(function () {
  "use strict";
  var form = document.getElementById("learnability-form");
  var section = document.getElementById("learnability");
  if (!form || !section) return;
  var message = document.getElementById("learnability-message");

  function say(text, href) {
    message.textContent = text;
    if (href) {
      var link = document.createElement("a");
      link.href = href;
      link.textContent = "follow it";
      message.appendChild(document.createTextNode(" "));
      message.appendChild(link);
    }
  }

  function errorsText(body) {
    if (!body || typeof body !== "object") return "refused";
    if (typeof body.detail === "string") return body.detail;
    return Object.keys(body).map(function (field) {
      var value = body[field];
      return field + ": " + (Array.isArray(value) ? value.join("; ") : String(value));
    }).join(" · ");
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var recipe = form.elements.recipe.value;
    var body = {
      environment: parseInt(section.dataset.environment, 10),
      episodes: parseInt(form.elements.episodes.value, 10),
      seed: parseInt(form.elements.seed.value, 10),
    };
    var button = document.getElementById("learnability-submit");
    button.disabled = true;
    say("Queuing…");
    fetch(form.dataset.api + encodeURIComponent(recipe) + "/learnability/", {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-CSRFToken": form.elements.csrfmiddlewaretoken.value,
      },
      body: JSON.stringify(body),
    })
      .then(function (response) {
        return response.json().catch(function () { return null; }).then(function (data) {
          return { ok: response.status === 202, data: data };
        });
      })
      .then(function (answer) {
        if (answer.ok && answer.data && typeof answer.data.id === "number") {
          form.dataset.job = String(answer.data.id);
          say("Queued as job #" + answer.data.id + ": the card appears here once it has run;", "/jobs/" + answer.data.id + "/");
        } else {
          say(errorsText(answer.data));
        }
      })
      .catch(function () { say("The request did not reach the server; try again."); })
      .then(function () { button.disabled = false; });
  });
})();
