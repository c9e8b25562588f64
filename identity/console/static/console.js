// The console's script: copy buttons, and the change feed's live updates. Every page works without it;
// it is served by the service itself (no library, no build step) and runs under the console's
// Content-Security-Policy (no inline script, no style attribute): it writes text, never HTML.
"use strict";

(function () {
  function copyButtons() {
    document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
      var input = document.getElementById(button.dataset.copy);
      var said = document.querySelector('[data-copied-for="' + button.dataset.copy + '"]');
      button.hidden = false;
      button.addEventListener("click", function () {
        function done(copied) {
          said.textContent = copied ? "Copied to the clipboard." : "Could not copy: select the text and copy it.";
        }
        function selectAndCopy() {
          input.focus();
          input.select();
          try {
            done(document.execCommand("copy"));
          } catch (error) {
            done(false);
          }
        }
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(input.value).then(function () { done(true); }, selectAndCopy);
        } else {
          selectAndCopy();
        }
      });
    });
  }

  // The moment as the server writes it (pages.moment): 2026-11-21 09:30:00 UTC.
  function moment(at) {
    return at.slice(0, 19).replace("T", " ") + " UTC";
  }

  function shown(value) {
    return value === null || value === undefined ? "null" : String(value);
  }

  function cell(row, text, className) {
    var td = document.createElement("td");
    td.textContent = text;
    if (className) {
      td.className = className;
    }
    row.appendChild(td);
    return td;
  }

  function entryRow(entry, identityUrl) {
    var row = document.createElement("tr");
    cell(row, String(entry.seq));
    cell(row, moment(entry.at), "mono");
    cell(row, entry.kind);
    var identity = cell(row, "", "mono small");
    var link = document.createElement("a");
    link.href = identityUrl.replace("IDENTITY_ID", encodeURIComponent(entry.identity_id));
    link.textContent = entry.identity_id;
    identity.appendChild(link);
    cell(row, shown(entry.wallet), "mono");
    var fields = entry.fields || {};
    cell(row, Object.keys(fields).map(function (name) {
      return name + ": " + shown(fields[name].before) + " \u2192 " + shown(fields[name].after);
    }).join("; "));
    row.className = "fresh";
    return row;
  }

  // The latest entries stay on the page; older ones leave as new ones come.
  var KEPT_ROWS = 200;

  function liveChanges() {
    var table = document.getElementById("changes");
    if (!table || !window.EventSource) {
      return;
    }
    var body = table.tBodies[0];
    var state = document.getElementById("live-state");
    var source = new EventSource(table.dataset.stream);
    source.addEventListener("open", function () {
      state.textContent = state.dataset.liveText;
    });
    source.addEventListener("error", function () {
      state.textContent = source.readyState === EventSource.CLOSED
        ? "The live updates stopped (the session may have ended): reload the page."
        : state.dataset.lostText;
    });
    source.addEventListener("change", function (event) {
      var entry = JSON.parse(event.data);
      body.insertBefore(entryRow(entry, table.dataset.identityUrl), body.firstChild);
      while (body.rows.length > KEPT_ROWS) {
        body.deleteRow(-1);
      }
      var none = document.getElementById("no-changes");
      if (none) {
        none.remove();
      }
    });
  }

  copyButtons();
  liveChanges();
})();
