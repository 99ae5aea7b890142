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
    sleep: sleep,
  };
})();
