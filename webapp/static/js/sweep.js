// The sweep's parallel-coordinates figure: the server's figure JSON, drawn once.
(function () {
  "use strict";
  function draw() {
    var spec = document.getElementById("sweep-figure");
    var div = document.getElementById("sweep-chart");
    if (!spec || !div) return;
    if (!window.Plotly) {
      var note = document.createElement("p");
      note.className = "muted";
      note.textContent = "Chart unavailable: plotly.js did not load.";
      div.appendChild(note);
      return;
    }
    var figure = JSON.parse(spec.textContent);
    window.Plotly.newPlot(div, figure.data, figure.layout, { displaylogo: false, responsive: true });
    div.dataset.drawn = String(figure.data.length);
  }
  if (document.readyState === "complete") draw();
  else window.addEventListener("load", draw);
})();
