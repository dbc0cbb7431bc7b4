// netperfd: forms remember their last values per form in this browser (localStorage), so the
// peer host, port, duration… are there next time. Only forms marked data-remember="NAME";
// never passwords or tokens (type=password), hidden fields or the CSRF token. A page that
// shows a form error keeps what the board sent back (the values just submitted).
(function () {
  "use strict";
  var store;
  try { store = window.localStorage; } catch (e) { return; }
  if (!store) { return; }
  var hasError = document.getElementById("form-error") !== null;
  function fields(f) {
    return Array.prototype.filter.call(f.elements, function (e) {
      return e.name && e.name !== "csrf" && e.type !== "password" && e.type !== "hidden" &&
        e.type !== "submit" && e.tagName !== "BUTTON";
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("form[data-remember]"), function (f) {
    var key = "netperfd.form." + f.getAttribute("data-remember");
    if (!hasError) {
      var saved = null;
      try { saved = JSON.parse(store.getItem(key) || "null"); } catch (e) { saved = null; }
      if (saved && typeof saved === "object") {
        fields(f).forEach(function (e) {
          if (!Object.prototype.hasOwnProperty.call(saved, e.name)) { return; }
          var v = saved[e.name];
          if (e.type === "checkbox") {
            e.checked = v === true;
          } else if (e.tagName === "SELECT") {
            if (Array.prototype.some.call(e.options, function (o) { return o.value === v; })) { e.value = v; }
          } else if (typeof v === "string") {
            e.value = v;
          }
        });
      }
    }
    f.addEventListener("submit", function () {
      var v = {};
      fields(f).forEach(function (e) { v[e.name] = e.type === "checkbox" ? e.checked : e.value; });
      try { store.setItem(key, JSON.stringify(v)); } catch (e) { /* private mode: nothing kept */ }
    });
  });
})();
