// The run page's "Re-score with a recipe" card (templates/runs/_rescore_form.html): lists the
// user's recipes from GET /api/reward-recipes/, posts {recipe} to POST /api/runs/<id>/rescore/
// and opens the job's page. Recipe names and errors go in as textContent.
(function () {
  "use strict";
  var form = document.getElementById("rescore-form");
  if (!form) return;
  var select = document.getElementById("rescore-recipe");
  var status = document.getElementById("rescore-form-status");
  var button = document.getElementById("rescore-button");

  window.envlab.http.getJsonOrNull(form.dataset.recipes)
    .then(function (body) { return body || []; })
    .then(function (recipes) {
      select.textContent = "";
      if (!recipes.length) {
        var none = document.createElement("option");
        none.value = "";
        none.textContent = "no recipes yet: save one first";
        select.appendChild(none);
        button.disabled = true;
        return;
      }
      recipes.forEach(function (recipe) {
        var option = document.createElement("option");
        option.value = String(recipe.id);
        option.textContent = recipe.name + " (v" + recipe.latest_version + ")";
        select.appendChild(option);
      });
      form.dataset.ready = "true";
    })
    .catch(function () { status.textContent = "could not list your recipes"; });

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!select.value) return;
    button.disabled = true;
    status.textContent = "starting…";
    var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
    window.envlab.http.startJob(form.dataset.api, { recipe: Number(select.value) }, token, status, button);  // webapp/static/js/http.js
  });
})();
