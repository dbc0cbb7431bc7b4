// netperfd units for the pages' scripts, exactly as the server formats them
// (src/model/display.rs; docs/units.md §5): bitrates always in decimal Mbit/s ("941.5 Mbit/s"),
// sizes always in decimal MB ("100.0 MB"), one scale for every value so a column never mixes
// "1000 Mbit/s" and "1.00 Gbit/s"; 1 decimal from 10 up, 2 from 1, 3 below; thousands grouped
// with a comma ("1,957.3 Mbit/s"). No external code.
(function () {
  "use strict";
  function scaled(v) {
    if (!isFinite(v) || v < 0) { v = 0; }
    return v >= 9.995 ? group(v.toFixed(1)) : (v >= 0.9995 ? v.toFixed(2) : v.toFixed(3));
  }
  // "12345.6" → "12,345.6" (thousands grouped with a comma, as the server writes them).
  function group(s) {
    var p = s.split(".");
    return p[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (p.length > 1 ? "." + p[1] : "");
  }
  window.netperfdUnits = {
    /** Bytes → "100.0 MB". */
    size: function (bytes) { return scaled(bytes / 1e6) + " MB"; },
    /** Bits/s → "941.5 Mbit/s". */
    rate: function (bps) { return scaled(bps / 1e6) + " Mbit/s"; }
  };
})();
