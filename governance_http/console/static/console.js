// Governance console: lazy span tree, span detail panel, live run header, confirmations.
// Plain JavaScript, no library; every page works without it (links fall back to pages).
"use strict";

function fetchHtml(url) {
  return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } }).then(
    function (response) {
      if (response.status === 401) {
        window.location.assign("/sign-in?next=" + encodeURIComponent(window.location.pathname));
        throw new Error("signed out");
      }
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      return response.text();
    }
  );
}

function fragmentOf(html) {
  var template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

function loadChildren(details) {
  if (details.dataset.loaded) {
    return;
  }
  details.dataset.loaded = "1";
  var holder = details.querySelector(":scope > .children");
  holder.textContent = "Loading…";
  fetchHtml(details.dataset.childrenUrl).then(
    function (html) {
      holder.replaceChildren(fragmentOf(html));
    },
    function (error) {
      holder.textContent = "Could not load child spans (" + error.message + ").";
      delete details.dataset.loaded;
    }
  );
}

function showDetail(url) {
  var panel = document.getElementById("span-detail");
  if (!panel) {
    window.location.assign(url.replace(/[?&]fragment=1/, ""));
    return;
  }
  panel.setAttribute("aria-busy", "true");
  fetchHtml(url).then(function (html) {
    panel.replaceChildren(fragmentOf(html));
    panel.removeAttribute("aria-busy");
  });
}

document.addEventListener(
  "toggle",
  function (event) {
    var details = event.target;
    if (details instanceof HTMLDetailsElement && details.open && details.dataset.childrenUrl) {
      loadChildren(details);
    }
  },
  true
);

document.addEventListener("click", function (event) {
  var target = event.target instanceof Element ? event.target : null;
  if (!target) {
    return;
  }
  var detailLink = target.closest("a[data-detail-url]");
  if (detailLink) {
    event.preventDefault();
    document.querySelectorAll(".span-row.selected, tr.match.selected").forEach(function (row) {
      row.classList.remove("selected");
    });
    var row = detailLink.closest(".span-row, tr.match");
    if (row) {
      row.classList.add("selected");
    }
    showDetail(detailLink.dataset.detailUrl);
    return;
  }
  var more = target.closest("a[data-more]");
  if (more) {
    event.preventDefault();
    more.textContent = "Loading…";
    fetchHtml(more.href).then(function (html) {
      more.replaceWith(fragmentOf(html));
    });
  }
});

document.addEventListener("submit", function (event) {
  var button = event.submitter;
  if (button && button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
    event.preventDefault();
  }
});

// A running run's header is polled; when new spans arrived, the top level is reloaded.
function pollRun() {
  var header = document.getElementById("run-header");
  if (!header || !header.dataset.liveUrl) {
    return;
  }
  var focused = header.contains(document.activeElement);
  if (focused) {
    window.setTimeout(pollRun, 3000);
    return;
  }
  fetchHtml(header.dataset.liveUrl).then(
    function (html) {
      var fresh = fragmentOf(html).firstElementChild;
      if (!fresh) {
        return;
      }
      var before = header.dataset.total;
      header.replaceWith(fresh);
      var tree = document.getElementById("span-tree");
      if (tree && fresh.dataset.total !== before && header.dataset.spansUrl) {
        fetchHtml(header.dataset.spansUrl).then(function (rows) {
          tree.replaceChildren(fragmentOf(rows));
        });
      }
      if (fresh.dataset.liveUrl) {
        window.setTimeout(pollRun, 3000);
      }
    },
    function () {
      window.setTimeout(pollRun, 10000);
    }
  );
}

document.addEventListener("DOMContentLoaded", function () {
  window.setTimeout(pollRun, 3000);
});
