/*
 * Reading the REST API from page scripts, as window.envlab.http. base.html loads this before
 * any page script.
 */
(function () {
  "use strict";

  // A non-2xx answer; `status` lets a caller tell "no access" (4xx: stop) from "server away"
  // (5xx: read again later).
  function HttpError(url, status) {
    this.name = "HttpError";
    this.message = url + " answered HTTP " + status;
    this.status = status;
  }
  HttpError.prototype = Object.create(Error.prototype);
  HttpError.prototype.constructor = HttpError;

  // The JSON body of a GET with the session cookie; rejects with HttpError on a non-2xx answer.
  function getJson(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(
      function (response) {
        if (!response.ok) throw new HttpError(url, response.status);
        return response.json();
      }
    );
  }

  // The JSON body, or null on a non-2xx answer (a poller stops there: the job is gone or no
  // longer ours); rejects only when the request itself fails (the server is away: poll again).
  function getJsonOrNull(url) {
    return getJson(url).catch(function (error) {
      if (error instanceof HttpError) return null;
      throw error;
    });
  }

  // `next` links are absolute and may carry the server's idea of the scheme (behind a proxy):
  // keep the page's own origin.
  function sameOriginPath(url) {
    var parsed = new URL(url, window.location.href);
    return parsed.pathname + parsed.search;
  }

  // POST `body` as JSON with the form's CSRF token; resolves with {status, body} (body null when
  // the answer is not JSON), rejects only when the request itself fails.
  function postJson(url, body, csrfToken) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return null; }).then(function (answer) {
        return { status: response.status, body: answer };
      });
    });
  }

  // An API refusal as one line: DRF's {"detail": ...} or {field: [messages]}; for textContent.
  function refusalText(body) {
    if (!body || typeof body !== "object") return "the request was refused";
    if (body.detail) return String(body.detail);
    return Object.keys(body).map(function (key) {
      var value = body[key];
      return key + ": " + (Array.isArray(value) ? value.join("; ") : String(value));
    }).join(" · ");
  }

  // POST a request that starts a job (202 {id}) and open the job's page; otherwise say why in
  // `status` (textContent) and enable `button` again.
  function startJob(url, body, csrfToken, status, button) {
    return postJson(url, body, csrfToken)
      .then(function (answer) {
        if (answer.status === 202 && answer.body && answer.body.id) {
          window.location.assign("/jobs/" + encodeURIComponent(String(answer.body.id)) + "/");
          return;
        }
        status.textContent = refusalText(answer.body);
        button.disabled = false;
      })
      .catch(function () {
        status.textContent = "the request failed; try again";
        button.disabled = false;
      });
  }

  function sleep(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  var envlab = (window.envlab = window.envlab || {});
  envlab.http = {
    HttpError: HttpError,
    getJson: getJson,
    getJsonOrNull: getJsonOrNull,
    sameOriginPath: sameOriginPath,
    postJson: postJson,
    refusalText: refusalText,
    startJob: startJob,
    sleep: sleep,
  };
})();
