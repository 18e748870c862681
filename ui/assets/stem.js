// Stem dashboard: confirmation dialogs, JSON checks before an event or an
// update is sent, and the refresh of a page's live part. The pages work
// without it, except for the dialogs that confirm actions.
(function () {
  "use strict";

  // Dialogs: an action's button opens its dialog; Cancel closes it.
  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element)) return;
    var open = t.closest("button[data-action]");
    if (open) {
      var dlg = document.getElementById(open.getAttribute("data-dialog"));
      if (dlg && !dlg.open) {
        dlg.showModal();
      }
      return;
    }
    var cancel = t.closest("button[data-cancel]");
    if (cancel) {
      var d = cancel.closest("dialog");
      if (d) d.close();
    }
  });

  // An event's payload and an update's request (a textarea with
  // data-json, naming what it holds) must be JSON before the form is sent;
  // the schema is the server's to check.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement)) return;
    var payload = form.querySelector("textarea[data-json]");
    if (payload instanceof HTMLTextAreaElement) {
      var problem = jsonProblem(payload.getAttribute("data-json"), payload.value);
      var out = document.getElementById(payload.getAttribute("data-error") || "");
      if (problem) {
        ev.preventDefault();
        if (out) {
          out.textContent = problem;
          out.hidden = false;
        }
        payload.setAttribute("aria-invalid", "true");
        payload.focus();
        return;
      }
      if (out) {
        out.textContent = "";
        out.hidden = true;
      }
      payload.removeAttribute("aria-invalid");
    }
    var submit = form.querySelector("button[data-confirm]");
    if (submit) submit.disabled = true;
  });

  function jsonProblem(what, text) {
    if (text.trim() === "") return "The " + what + " is empty: give a JSON value (null for none).";
    try {
      JSON.parse(text);
      return "";
    } catch (e) {
      return "The " + what + " is not JSON: " + e.message;
    }
  }

  // The outcome of an action shows once: reloading the page does not
  // show it again.
  var url = new URL(location.href);
  if (url.searchParams.has("flash")) {
    url.searchParams.delete("flash");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }

  // Refresh: every data-refresh milliseconds, fetch this page again and
  // put its #live part in place of ours, unless the reader is busy with
  // the page (a dialog open, the filter being edited, text selected, the
  // tab hidden). A page without data-refresh (a finished run) stops.
  var every = Number(document.body.getAttribute("data-refresh"));
  if (!every || every < 250) return;
  var filters = document.getElementById("filters");
  var edited = false;
  if (filters) {
    filters.addEventListener("input", function () { edited = true; });
    filters.addEventListener("change", function () { edited = true; });
  }
  var last = "";
  var etag = "";

  function busy() {
    if (document.hidden || document.querySelector("dialog[open]")) return true;
    if (filters && (edited || filters.contains(document.activeElement))) return true;
    var sel = window.getSelection();
    var live = document.getElementById("live");
    return !!(sel && !sel.isCollapsed && live && live.contains(sel.anchorNode));
  }

  // detailsKey names a <details> by where it is, so one the reader opened
  // stays open when the part it is in is replaced.
  function detailsKey(d) {
    var step = d.closest(".step");
    var attempt = d.closest(".attempt");
    var scope = d.closest("li, section, td") || document.body;
    var all = scope.querySelectorAll("details");
    var i = Array.prototype.indexOf.call(all, d);
    return [step ? step.getAttribute("data-key") : "", attempt ? attempt.getAttribute("data-attempt") : "", scope.id || scope.className, i].join("\u0000");
  }

  function swap(doc) {
    var live = document.getElementById("live");
    var fresh = doc.getElementById("live");
    if (!live || !fresh) return;
    var html = fresh.innerHTML;
    if (html === last) return;
    last = html;
    var open = {};
    live.querySelectorAll("details[open]").forEach(function (d) { open[detailsKey(d)] = true; });
    var node = document.importNode(fresh, true);
    live.replaceWith(node);
    node.querySelectorAll("details").forEach(function (d) {
      if (open[detailsKey(d)]) d.open = true;
    });
    var main = document.querySelector("main[data-status]");
    var newMain = doc.querySelector("main[data-status]");
    if (main && newMain) main.setAttribute("data-status", newMain.getAttribute("data-status"));
    document.title = doc.title;
  }

  function tick() {
    if (busy()) {
      setTimeout(tick, every);
      return;
    }
    // An unchanged page answers 304 to the ETag of the one last put in
    // place, and is not parsed again.
    var headers = {};
    if (etag) headers["If-None-Match"] = etag;
    var tag = "";
    fetch(location.href, { credentials: "same-origin", cache: "no-store", headers: headers })
      .then(function (res) {
        if (res.status === 304) return null;
        if (!res.ok) throw new Error(String(res.status));
        tag = res.headers.get("ETag") || "";
        return res.text();
      })
      .then(function (text) {
        if (text === null || busy()) {
          setTimeout(tick, every);
          return;
        }
        var doc = new DOMParser().parseFromString(text, "text/html");
        swap(doc);
        etag = tag;
        if (doc.body.hasAttribute("data-refresh")) {
          setTimeout(tick, every);
        } else {
          document.body.removeAttribute("data-refresh");
        }
      })
      .catch(function () { setTimeout(tick, every * 2); });
  }

  var initial = document.getElementById("live");
  if (initial) last = initial.innerHTML;
  setTimeout(tick, every);
})();

/* timeline */
// The run page's timeline (ui/timeline.go) while its execution goes on.
// The server draws what goes on up to the axis's horizon, past now, and
// writes since when, so that the page stays the same page between the
// run's changes (its refresh swaps nothing); this script places the line
// of now, ends those bars at it, and counts how long each has taken so
// far, every second and as soon as the live part is swapped. Without it,
// the bars reach the horizon and the page says since when.
(function () {
  "use strict";
  var run = document.getElementById("run");
  if (!run) return;

  function parse(iso) {
    var t = Date.parse(iso || "");
    return isNaN(t) ? null : t;
  }

  // took writes a duration as the server does: 850ms, 1.25s, 3m20s, 2h5m.
  function took(ms) {
    if (!(ms > 0)) return "0s";
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return Math.round(ms / 10) / 100 + "s";
    if (ms < 3600000) {
      var s = Math.round(ms / 1000), r = s % 60;
      return Math.floor(s / 60) + "m" + (r ? r + "s" : "");
    }
    var m = Math.round(ms / 60000), rm = m % 60;
    return Math.floor(m / 60) + "h" + (rm ? rm + "m" : "");
  }

  // place ends the open bars of one axis (an svg with data-start and
  // data-end) at now, and puts its line of now there.
  function place(axis, now) {
    var start = parse(axis.getAttribute("data-start"));
    var end = parse(axis.getAttribute("data-end"));
    if (start === null || end === null || end <= start) return;
    var p = Math.min(Math.max((now - start) / (end - start) * 100, 0), 100);
    axis.querySelectorAll("line.tl-now").forEach(function (l) {
      l.setAttribute("x1", p.toFixed(2) + "%");
      l.setAttribute("x2", p.toFixed(2) + "%");
      l.classList.add("on");
    });
    axis.querySelectorAll("svg.open[data-since]").forEach(function (bar) {
      var x = parseFloat(bar.getAttribute("x"));
      if (!isNaN(x)) bar.setAttribute("width", Math.max(p - x, 0.35).toFixed(2) + "%");
    });
  }

  function tick() {
    var tl = document.getElementById("timeline");
    var now = Date.now();
    if (tl && tl.getAttribute("data-live") === "true") {
      tl.querySelectorAll("svg[data-start][data-end]").forEach(function (axis) { place(axis, now); });
    }
    document.querySelectorAll("#run .tl-since[data-since], #run .took[data-since]").forEach(function (el) {
      var since = parse(el.getAttribute("data-since"));
      if (since === null) return;
      var text = took(now - since) + " so far";
      if (el.classList.contains("tl-since")) text = " · " + text;
      if (el.textContent !== text) el.textContent = text;
    });
  }

  tick();
  setInterval(tick, 1000);
  // The page's refresh replaces its live part, a child of main#run.
  new MutationObserver(tick).observe(run, { childList: true });
})();
/* timeline end */
