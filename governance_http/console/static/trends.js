// The trends page's hover tip: a chart's bar or point shows its <title> text beside the
// pointer (the title stays the accessible text and the tip without script).
"use strict";
(function () {
  const tip = document.createElement("div");
  tip.id = "chart-tip";
  tip.setAttribute("role", "tooltip");
  tip.hidden = true;
  document.addEventListener("DOMContentLoaded", () => document.body.appendChild(tip));
  function show(event) {
    const mark = event.target.closest("svg.trend-chart rect, svg.trend-chart circle");
    if (!mark) { tip.hidden = true; return; }
    const title = mark.querySelector("title");
    tip.textContent = title ? title.textContent : "";
    tip.hidden = false;
    const x = Math.min(event.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${event.clientY + 14}px`;
  }
  document.addEventListener("mousemove", show);
  document.addEventListener("mouseleave", () => { tip.hidden = true; });
})();
