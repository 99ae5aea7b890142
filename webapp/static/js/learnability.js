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
    var url = form.dataset.api + encodeURIComponent(recipe) + "/learnability/";
    window.envlab.http.postJson(url, body, form.elements.csrfmiddlewaretoken.value) // webapp/static/js/http.js
      .then(function (answer) {
        if (answer.status === 202 && answer.body && typeof answer.body.id === "number") {
          form.dataset.job = String(answer.body.id);
          say("Queued as job #" + answer.body.id + ": the card appears here once it has run;", "/jobs/" + answer.body.id + "/");
        } else {
          say(errorsText(answer.body));
        }
      })
      .catch(function () { say("The request did not reach the server; try again."); })
      .then(function () { button.disabled = false; });
  });
})();
