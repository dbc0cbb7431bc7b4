// netperfd Ports page: live rates and counters (1 Hz, from /api/ports), the leases and the
// default route's port (every 3 s, /api/ports?leases=1) and the countdown of a
// change waiting for confirmation. Works without it too (plain forms). No external code.
(function () {
  "use strict";
  // A change that takes this browser's address away: come back when its fate is known.
  var back = document.querySelector("[data-return-in]");
  if (back) {
    setTimeout(function () { window.location.replace("/ports"); },
      Number(back.getAttribute("data-return-in")) * 1000);
  }
  var table = document.getElementById("ports");
  if (!table) { return; }

  var size = window.netperfdUnits.size, rate = window.netperfdUnits.rate;
  function pps(v) { return v >= 10000 ? (v / 1000).toFixed(1) + " kpps" : Math.round(v) + " pps"; }
  function set(tr, field, text) {
    var td = tr.querySelector('[data-field="' + field + '"]');
    if (td && td.textContent !== text) { td.textContent = text; }
  }

  function group(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  // The Queue cell: each qdisc's words and counters as the server wrote them (qdisc_view).
  function queue(tr, view) {
    var td = tr.querySelector('[data-field="qdisc"]');
    if (!td) { return; }
    var text = view.map(function (q) { return q.what + "|" + q.stats; }).join("\n");
    if (td.getAttribute("data-text") === text) { return; }
    td.setAttribute("data-text", text);
    td.textContent = "";
    if (!view.length) {
      var none = document.createElement("span");
      none.className = "hint";
      none.textContent = "—";
      td.appendChild(none);
    }
    view.forEach(function (q) {
      var d = document.createElement("div"), b = document.createElement("strong");
      b.textContent = q.what;
      d.appendChild(b);
      if (q.stats) {
        var h = document.createElement("div");
        h.className = "hint";
        h.textContent = q.stats;
        d.appendChild(h);
      }
      td.appendChild(d);
    });
  }

  // The lease cards, the table's DHCP summary and the "default route via" marks, from the
  // same rows the server renders the page with (lease_rows): every 3rd second.
  function leaseSummary(rows) {
    var t = "By DHCP" + (rows.length ? "" : ": no lease yet");
    rows.forEach(function (r) { if (r[0] !== "Address") { t += " · " + r[0] + " " + r[1]; } });
    return t;
  }
  function leaseCard(box, rows) {
    var key = JSON.stringify(rows);
    if (box.getAttribute("data-rows") === key) { return; }
    box.setAttribute("data-rows", key);
    box.textContent = "";
    if (!rows.length) {
      var p = document.createElement("p");
      p.className = "hint";
      p.textContent = "No lease yet: the client is asking.";
      box.appendChild(p);
      return;
    }
    var dl = document.createElement("dl");
    dl.className = "facts lease";
    rows.forEach(function (r) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = r[0];
      dd.textContent = r[1];
      dd.setAttribute("data-lease", r[0]);
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    box.appendChild(dl);
  }
  function addressing(p, tr) {
    if (p.lease_rows === undefined) { return; }
    var cardRoute = document.querySelector('[data-default-route="' + p.name + '"]');
    if (cardRoute) {
      var want = p.default_route ? "The board's " + p.default_route + " leaves through " + p.name + "." : "";
      if (cardRoute.textContent !== want) {
        cardRoute.textContent = "";
        if (want) {
          var b = document.createElement("strong");
          b.textContent = "The board's " + p.default_route;
          cardRoute.appendChild(b);
          cardRoute.appendChild(document.createTextNode(" leaves through " + p.name + "."));
        }
      }
    }
    set(tr, "default_route", p.default_route || "");
    if (!p.dhcp) { return; }
    set(tr, "lease", leaseSummary(p.lease_rows));
    var box = document.querySelector('[data-lease-port="' + p.name + '"]');
    if (box) { leaseCard(box, p.lease_rows); }
  }

  var ticks = 0;
  function refresh() {
    var leases = ticks++ % 3 === 0;
    fetch(leases ? "/api/ports?leases=1" : "/api/ports", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (ports) {
        if (!ports) { return; }
        ports.forEach(function (p) {
          var tr = table.querySelector('tr[data-port="' + p.name + '"]');
          if (!tr) { return; }
          var r = p.rates || { rx_bits_per_second: 0, tx_bits_per_second: 0, rx_packets_per_second: 0, tx_packets_per_second: 0 };
          var c = p.counters;
          set(tr, "rx_rate", rate(r.rx_bits_per_second));
          set(tr, "tx_rate", rate(r.tx_bits_per_second));
          set(tr, "rx_pps", pps(r.rx_packets_per_second));
          set(tr, "tx_pps", pps(r.tx_packets_per_second));
          set(tr, "rx_total", size(c.rx_bytes));
          set(tr, "tx_total", size(c.tx_bytes));
          set(tr, "errors", c.rx_errors + " / " + c.tx_errors);
          set(tr, "dropped", group(c.rx_dropped) + " / " + group(c.tx_dropped + (p.qdisc_drops || 0)));
          queue(tr, p.qdisc_view || []);
          set(tr, "overruns", String(c.rx_overruns));
          set(tr, "fifo", c.rx_fifo + " / " + c.tx_fifo);
          addressing(p, tr);
        });
      })
      .catch(function () { /* the board may be unreachable for a moment after a change */ });
  }
  refresh();
  setInterval(refresh, 1000);

  var pending = document.getElementById("pending");
  var countdown = document.getElementById("countdown");
  if (pending && countdown) {
    // Count from the seconds left when the page was made: the browser's clock may differ
    // from the board's.
    var deadline = Date.now() + Number(pending.getAttribute("data-left")) * 1000;
    var tick = function () {
      var left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
      countdown.textContent = String(left);
      if (left === 0) {
        clearInterval(timer);
        // The change has been rolled back: show the board as it is now.
        setTimeout(function () { window.location.replace("/ports"); }, 1500);
      }
    };
    var timer = setInterval(tick, 250);
    tick();
  }
})();
