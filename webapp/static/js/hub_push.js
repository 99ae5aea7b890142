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

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    status.textContent = "starting…";
    var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
    window.envlab.http.startJob(form.dataset.api, { repo_id: repo.value.trim(), private: isPrivate.checked }, token, status, button);  // webapp/static/js/http.js
  });
})();
