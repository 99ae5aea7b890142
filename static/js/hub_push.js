// "Push to the Hub" (templates/partials/hub_push.html): posts {repo_id, private} to the form's API
// (POST /api/runs/<id>/push/ or /api/evaluations/<id>/push/) and opens the job's page. The API's
// refusals go in as textContent.
(function () {
  "use strict";
  var form = document.getElementById("hub-push-form");
  if (!form) return;
  var repo = document.getElementById("hub-push-repo");
  var isPrivate = document.getElementById("hub-push-private");
  var status = document.getElementById("hub-push-status");
  var button = document.getElementById("hub-push-button");

  function csrf() {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function messages(body) {
    if (!body || typeof body !== "object") return "the request was refused";
    if (body.detail) return String(body.detail);
    return Object.keys(body).map(function (key) {
      var value = body[key];
      return key + ": " + (Array.isArray(value) ? value.join("; ") : String(value));
    }).join(" · ");
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    status.textContent = "starting…";
    fetch(form.dataset.api, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify({ repo_id: repo.value.trim(), private: isPrivate.checked })
    })
      .then(function (response) {
        return response.json().catch(function () { return null; }).then(function (body) {
          if (response.status === 202 && body && body.id) {
            window.location.assign("/jobs/" + encodeURIComponent(String(body.id)) + "/");
            return;
          }
          status.textContent = messages(body);
          button.disabled = false;
        });
      })
      .catch(function () {
        status.textContent = "the request failed; try again";
        button.disabled = false;
      });
  });
})();
