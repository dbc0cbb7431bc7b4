// Reload a page every 2 s (suite pages while their tests run, an RFC 2544 run while it searches).
window.setTimeout(function () { window.location.reload(); }, 2000);
