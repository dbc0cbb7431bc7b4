// Reload a page every 2 s (suite pages while their tests run).
window.setTimeout(function () { window.location.reload(); }, 2000);
