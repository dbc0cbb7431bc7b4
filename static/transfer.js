// The History transfer page: send the chosen file to POST /api/import (with the session's
// CSRF token) and show what was added, or the error (nothing is imported then).
(function () {
  var form = document.getElementById('import-form');
  if (!form) return;
  var csrf = document.getElementById('transfer').getAttribute('data-csrf');
  var out = document.getElementById('import-result');
  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var f = document.getElementById('import-file').files[0];
    if (!f) return;
    out.className = '';
    out.textContent = 'Importing ' + f.name + ' …';
    fetch('/api/import', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
      body: f,
      credentials: 'same-origin'
    }).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, j: j }; });
    }).then(function (x) {
      if (x.ok) {
        out.className = 'ok';
        out.textContent = 'Imported from ' + (x.j.board_label || x.j.board_id) + ': ' +
          x.j.runs_added + ' runs added (' + x.j.runs_present + ' already here), ' +
          x.j.suites_added + ' suite runs added (' + x.j.suites_present + ' already here), ' +
          x.j.defs_added + ' suite definitions added.';
      } else {
        out.className = 'error';
        out.textContent = 'Import refused: ' + (x.j.error || 'unknown error');
      }
    }).catch(function (e) {
      out.className = 'error';
      out.textContent = 'Import failed: ' + e;
    });
  });
})();
