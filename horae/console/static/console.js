// The console's own script: no eval, no inline handlers (the page's CSP allows scripts from
// /console/static only). A login link's token arrives in the URL fragment, which no server and
// no log sees; it fills the form and leaves the address bar.
(function () {
  "use strict";
  function fillToken() {
    var token = document.getElementById("token");
    if (token && location.hash.indexOf("#token=") === 0) {
      token.value = decodeURIComponent(location.hash.slice(7));
      history.replaceState(null, "", location.pathname + location.search);
    }
  }
  window.addEventListener("hashchange", fillToken);
  // The cron builder of the create and edit forms: a preset or the five fields write the Cron
  // field and send it an input event, so the form's own preview (the API's dry-run) follows.
  function cronBuilder() {
    var box = document.getElementById("cron-builder");
    var expr = document.getElementById("expr");
    if (!box || !expr) {
      return;
    }
    function byId(id) {
      return document.getElementById(id);
    }
    var preset = byId("b-preset");
    var parts = ["b-minute", "b-hour", "b-dom", "b-month", "b-dow"].map(byId);
    var kind = byId("kind");
    function show() {
      var groups = box.querySelectorAll("[data-for]");
      for (var i = 0; i < groups.length; i++) {
        groups[i].hidden = groups[i].getAttribute("data-for").split(" ").indexOf(preset.value) < 0;
      }
    }
    function number(id, fallback) {
      var n = parseInt(byId(id).value, 10);
      return isNaN(n) ? fallback : n;
    }
    function fromPreset() {
      var time = (byId("b-time").value || "09:00").split(":");
      var hour = String(parseInt(time[0], 10) || 0);
      var minute = String(parseInt(time[1], 10) || 0);
      switch (preset.value) {
        case "minutes":
          var n = number("b-every", 1);
          return [n <= 1 ? "*" : "*/" + n, "*", "*", "*", "*"];
        case "hourly":
          return [String(number("b-at-minute", 0)), "*", "*", "*", "*"];
        case "daily":
          return [minute, hour, "*", "*", "*"];
        case "weekdays":
          return [minute, hour, "*", "*", "1-5"];
        case "weekly":
          return [minute, hour, "*", "*", byId("b-weekday").value];
        case "monthly":
          return [minute, hour, String(number("b-monthday", 1)), "*", "*"];
      }
      return null;
    }
    function write(fields) {
      expr.value = fields.join(" ");
      if (kind && kind.value !== "cron") {
        kind.value = "cron";
      }
      expr.dispatchEvent(new Event("input", { bubbles: true }));
    }
    function fill() {
      var now = expr.value.trim().split(/\s+/);
      for (var i = 0; i < parts.length; i++) {
        parts[i].value = now.length === 5 ? now[i] : "";
      }
    }
    function changed(event) {
      if (parts.indexOf(event.target) >= 0) {
        preset.value = "custom";
        show();
        write(parts.map(function (p) { return p.value.trim() || "*"; }));
        return;
      }
      show();
      var fields = fromPreset();
      if (fields) {
        for (var i = 0; i < parts.length; i++) {
          parts[i].value = fields[i];
        }
        write(fields);
      }
    }
    box.addEventListener("input", changed);
    box.addEventListener("change", changed);
    expr.addEventListener("input", function (event) {
      if (event.isTrusted) {  // typed: the fields follow the expression, the preset is custom
        preset.value = "custom";
        show();
        fill();
      }
    });
    fill();
    show();
    box.hidden = false;
  }
  document.addEventListener("DOMContentLoaded", function () {
    fillToken();
    cronBuilder();
    var zoneButton = document.getElementById("use-browser-zone");
    var zone = document.getElementById("zone");
    if (zoneButton && zone) {
      zoneButton.addEventListener("click", function () {
        zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
        zone.dispatchEvent(new Event("change", { bubbles: true }));
      });
    }
  });
})();
