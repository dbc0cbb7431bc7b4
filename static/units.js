// netperfd units for the pages' scripts, as the server formats them (model/units.rs): byte
// counts in powers of 1024 ("1.10 GBytes"), bitrates in powers of 1000 ("941 Mbits/sec"),
// four significant places like iperf3's unit_snprintf. No external code.
(function () {
  "use strict";
  function unit(v, bits) {
    var base = bits ? 1000 : 1024;
    var labels = bits ? ["bit", "Kbit", "Mbit", "Gbit", "Tbit"] : ["Byte", "KByte", "MByte", "GByte", "TByte"];
    var n = bits ? v * 8 : v, i = 0;
    if (!isFinite(n) || n < 0) { n = 0; }
    while (n >= base && i < 4) { n /= base; i++; }
    var s = n < 9.995 ? n.toFixed(2) : (n < 99.95 ? n.toFixed(1) : n.toFixed(0));
    return s + " " + labels[i] + "s";
  }
  window.netperfdUnits = {
    unit: unit,
    rate: function (bps) { return unit(bps / 8, true) + "/sec"; }
  };
})();
