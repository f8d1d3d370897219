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
  document.addEventListener("DOMContentLoaded", function () {
    fillToken();
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
