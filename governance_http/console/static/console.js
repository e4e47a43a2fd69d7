// Governance console: lazy span tree (expanders), span detail panel, live run header, the live
// approvals queue, confirmations, copying ids.
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

// A span's expander is a link to its children's page; with script it opens them in place.
function toggleChildren(expander) {
  var holder = document.getElementById(expander.getAttribute("aria-controls"));
  if (!holder) {
    return;
  }
  var open = expander.getAttribute("aria-expanded") !== "true";
  expander.setAttribute("aria-expanded", open ? "true" : "false");
  holder.hidden = !open;
  if (!open || expander.dataset.loaded) {
    return;
  }
  expander.dataset.loaded = "1";
  holder.textContent = "Loading…";
  fetchHtml(expander.dataset.childrenUrl).then(
    function (html) {
      holder.replaceChildren(fragmentOf(html));
    },
    function (error) {
      holder.textContent = "Could not load child spans (" + error.message + ").";
      delete expander.dataset.loaded;
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

document.addEventListener("click", function (event) {
  var target = event.target instanceof Element ? event.target : null;
  if (!target) {
    return;
  }
  var expander = target.closest("a.expander[data-children-url]");
  if (expander) {
    event.preventDefault();
    toggleChildren(expander);
    return;
  }
  var detailLink = target.closest("a[data-detail-url]");
  if (detailLink) {
    event.preventDefault();
    document.querySelectorAll(".span-row.selected, tr.match.selected").forEach(function (row) {
      row.classList.remove("selected");
    });
    var row = detailLink.closest(".span-row, tr.match");
    if (!row && detailLink.closest(".match-nav")) {
      // The previous/next links of the detail panel select their row in the list.
      var spanId = new URL(detailLink.href).pathname.split("/").pop();
      row = document.querySelector('tr.match[data-span-id="' + CSS.escape(spanId) + '"]');
    }
    if (row) {
      row.classList.add("selected");
    }
    showDetail(detailLink.dataset.detailUrl);
    return;
  }
  var copy = target.closest("button[data-copy]");
  if (copy) {
    copyText(copy, copy.dataset.copy);
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

function copied(button, message) {
  var status = document.getElementById("copy-status");
  if (status) {
    status.textContent = message;
  }
  button.textContent = message === "Copied" ? "Copied" : "Copy";
  window.setTimeout(function () {
    button.textContent = "Copy";
  }, 1500);
}

// The clipboard API needs a secure context (https or localhost); elsewhere a hidden text
// field is selected and copied.
function copyText(button, text) {
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(
      function () {
        copied(button, "Copied");
      },
      function () {
        copied(button, "Could not copy: select the id and copy it");
      }
    );
    return;
  }
  var field = document.createElement("textarea");
  field.value = text;
  field.setAttribute("readonly", "");
  field.className = "visually-hidden";
  document.body.appendChild(field);
  field.select();
  var done = document.execCommand("copy");
  field.remove();
  button.focus();
  copied(button, done ? "Copied" : "Could not copy: select the id and copy it");
}

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

// The approvals queue asks for its lists again every few seconds and swaps them in, keeping
// what the person was doing: the reasons typed, the focus (and the caret), the argument lists
// opened. A row with a typed reason that is no longer waiting (answered elsewhere, expired)
// stays, marked, with its buttons disabled, so the text is not lost without a word.
function pollApprovals() {
  var live = document.getElementById("approvals-live");
  if (!live || !live.dataset.liveUrl) {
    return;
  }
  var interval = Number(live.dataset.interval) || 5000;
  if (document.hidden) {
    window.setTimeout(pollApprovals, interval);
    return;
  }
  fetchHtml(live.dataset.liveUrl).then(
    function (html) {
      refreshApprovals(live, fragmentOf(html));
      window.setTimeout(pollApprovals, interval);
    },
    function () {
      window.setTimeout(pollApprovals, interval * 3);
    }
  );
}

function approvalRow(root, id) {
  return root.querySelector('li.approval[data-approval-id="' + CSS.escape(id) + '"]');
}

function markGone(row) {
  if (row.classList.contains("gone")) {
    return;
  }
  row.classList.add("gone");
  row.querySelectorAll("button").forEach(function (button) {
    button.disabled = true;
  });
  var note = document.createElement("p");
  note.className = "gone-note";
  note.textContent =
    "No longer waiting: it was answered elsewhere or expired. Your text is kept here until you reload.";
  row.querySelector(".approval-what").prepend(note);
}

function refreshApprovals(live, fresh) {
  var focused = live.contains(document.activeElement) ? document.activeElement : null;
  var focusRow = focused && focused.closest("li.approval");
  var controls = "textarea, button, a, summary";
  var focusIndex = focusRow ? Array.from(focusRow.querySelectorAll(controls)).indexOf(focused) : -1;
  var caret = focused && typeof focused.selectionStart === "number"
    ? [focused.selectionStart, focused.selectionEnd] : null;
  var before = live.querySelector("#pending");
  var list = fresh.querySelector("#pending ul.approvals");
  live.querySelectorAll("li.approval").forEach(function (old) {
    var reason = old.querySelector("textarea[name=reason]");
    var row = approvalRow(fresh, old.dataset.approvalId);
    if (row && !old.classList.contains("gone")) {
      row.querySelector("textarea[name=reason]").value = reason.value;
      var opened = old.querySelectorAll("details");
      row.querySelectorAll("details").forEach(function (details, index) {
        details.open = Boolean(opened[index] && opened[index].open);
      });
    } else if (reason.value.trim()) {
      markGone(old);
      if (!list) {
        list = document.createElement("ul");
        list.className = "approvals";
        fresh.querySelector("#pending").append(list);
      }
      list.append(old);
    }
  });
  live.replaceChildren(fresh);
  if (focusRow) {
    var row = focusRow.isConnected ? focusRow : approvalRow(live, focusRow.dataset.approvalId);
    var target = row && row.querySelectorAll(controls)[focusIndex];
    if (target) {
      target.focus();
      if (caret && typeof target.setSelectionRange === "function") {
        target.setSelectionRange(caret[0], caret[1]);
      }
    }
  }
  var after = live.querySelector("#pending");
  var status = document.getElementById("approvals-status");
  if (status && before && after && before.dataset.count !== after.dataset.count) {
    var count = Number(after.dataset.count);
    status.textContent = count === 1 ? "1 action is waiting" : count + " actions are waiting";
  }
  markScrollers();
}

// A box that scrolls (a wide table on a phone, a long list of agents) takes the keyboard
// focus, so it can be scrolled with the arrow keys.
function markScrollers() {
  var boxes = ".table-scroll, .tree-scroll, table.list, ol.source-lines, .checks, details pre";
  document.querySelectorAll(boxes).forEach(function (box) {
    if (box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1) {
      box.setAttribute("tabindex", "0");
    } else if (box.getAttribute("tabindex") === "0") {
      box.removeAttribute("tabindex");
    }
  });
}

document.addEventListener("DOMContentLoaded", function () {
  markScrollers();
  window.addEventListener("resize", markScrollers);
  window.setTimeout(pollRun, 3000);
  var approvals = document.getElementById("approvals-live");
  if (approvals) {
    window.setTimeout(pollApprovals, Number(approvals.dataset.interval) || 5000);
  }
});
