//! What the Ports page says after each outcome of a board change (issue 12), end to end:
//! * in headless Chromium, an address added on eth1 and left unconfirmed: the page counts
//!   down, reloads itself after the roll-back and says "Rolled back at HH:MM:SS — not
//!   confirmed within 3 s: …" (the time within a few seconds of the board's clock);
//! * confirmed ("Confirmed at HH:MM:SS"), and applied unchecked ("Applied unchecked at …");
//! * "Apply anyway" on the address the browser uses (a PC in pc1 removes 192.0.2.1 from
//!   eth0): the answer names the time the old configuration comes back and says the page
//!   returns then (and carries the reload delay); after the window the address is back and
//!   the page says it was rolled back.

mod common;
use common::browser::{chromedriver, Browser};
use common::http::*;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8095;
const WD_PORT: u16 = 9522;

/// Seconds of the day (UTC) of "HH:MM:SS" found right after `after` in `text`.
fn clock_after(text: &str, after: &str) -> Option<i64> {
    let i = text.find(after)? + after.len();
    let t = text.get(i..i + 8)?;
    let mut p = t.split(':').map(|x| x.parse::<i64>().ok());
    Some(p.next()?? * 3600 + p.next()?? * 60 + p.next()??)
}

fn now_of_day() -> i64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    s % 86_400
}

/// |a - b| in seconds of the day, across midnight.
fn near(a: i64, b: i64, slack: i64) -> bool {
    let d = (a - b).rem_euclid(86_400);
    d <= slack || 86_400 - d <= slack
}

/// The text of the element `id` in `html` (tags inside dropped), if present.
fn text_of(html: &str, id: &str) -> Option<String> {
    let i = html.find(&format!("id=\"{id}\""))?;
    let start = i + html[i..].find('>')? + 1;
    let end = start + html[start..].find("</p>")?;
    Some(
        html[start..end]
            .replace("&#x27;", "'")
            .replace("&quot;", "\""),
    )
}

fn addrs(ns: &str, dev: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-n", ns, "-j", "addr", "show", "dev", dev])
        .output()
        .expect("ip addr");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v[0]["addr_info"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["scope"] == "global")
                .map(|x| format!("{}/{}", x["local"].as_str().unwrap_or(""), x["prefixlen"]))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_board_change_outcome_is_said_on_the_ports_page() {
    let mut lab = Lab::with_pc2();
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    set_up(&lab, &mut http);
    let r = http.api(
        "PUT",
        "/api/board/settings",
        &json!({"confirm_window_secs": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    chromedriver(&mut lab, &board, WD_PORT);
    let b = Browser::open(
        &board,
        WD_PORT,
        &format!("http://127.0.0.1:{WEB_PORT}"),
        390,
        844,
        &lab.dir().join("profile"),
    );
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("ui-screens"))
        .expect("target dir");
    let _ = std::fs::create_dir_all(&shots);
    b.log_in("correct horse");

    // Unconfirmed: counted down, rolled back, the page comes back and says when and why.
    b.go("/ports");
    b.type_into(
        "#edit-eth1 input[name=address]:not([type=hidden])",
        "203.0.113.7/24",
    );
    b.click("#edit-eth1 form:has(input[name=address]:not([type=hidden])) button[value=apply]");
    b.wait_text("countdown", "");
    assert!(b.displayed("#countdown"), "no countdown");
    assert_eq!(addrs(&board, "eth1"), ["198.51.100.1/24", "203.0.113.7/24"]);
    let t = Instant::now();
    let notice = loop {
        let n = b.js(
            "const e = document.getElementById('outcome-notice'); return e ? e.textContent : null;",
        );
        if let Some(s) = n.as_str() {
            break s.to_string();
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no notice after the roll-back"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    b.screenshot(&shots, "390-ports-rolled-back");
    eprintln!("after the window: {notice}");
    assert!(notice.starts_with("Rolled back at "), "{notice}");
    assert!(
        notice.contains("UTC — not confirmed within 3 s: ") && notice.contains("203.0.113.7/24"),
        "{notice}"
    );
    let at = clock_after(&notice, "Rolled back at ").expect("a time");
    assert!(
        near(at, now_of_day(), 10),
        "rolled back at {at} s of the day, now {}",
        now_of_day()
    );
    assert_eq!(addrs(&board, "eth1"), ["198.51.100.1/24"], "rolled back");
    assert!(
        !b.js("return document.getElementById('pending') !== null;")
            .as_bool()
            .unwrap_or(true),
        "the confirm card is gone"
    );

    // Confirmed.
    b.type_into(
        "#edit-eth1 input[name=address]:not([type=hidden])",
        "203.0.113.8/24",
    );
    b.click("#edit-eth1 form:has(input[name=address]:not([type=hidden])) button[value=apply]");
    b.wait_text("countdown", "");
    b.click("#confirm");
    let n = b.wait_text("notice", "Confirmed at ");
    assert!(n.contains("203.0.113.8/24"), "{n}");
    let at = clock_after(&n, "Confirmed at ").expect("a time");
    assert!(near(at, now_of_day(), 10));
    // A plain visit later says the same from the board's log.
    b.go("/ports");
    let n = b.wait_text("outcome-notice", "Confirmed at ");
    assert!(n.contains("203.0.113.8/24"), "{n}");

    // Applied unchecked.
    b.type_into(
        "#edit-eth1 input[name=address]:not([type=hidden])",
        "203.0.113.9/24",
    );
    b.click("#edit-eth1 form:has(input[name=address]:not([type=hidden])) button[value=unchecked]");
    // The form posts back to /ports, the path we are on: wait for the new page's notice.
    let n = b.wait_text("outcome-notice", "Applied unchecked at ");
    assert!(n.contains("203.0.113.9/24"), "{n}");
    assert_eq!(
        addrs(&board, "eth1"),
        ["198.51.100.1/24", "203.0.113.8/24", "203.0.113.9/24"]
    );
    drop(b);

    // "Apply anyway" on the address a PC's browser uses: the daemon listens on every address
    // (a second daemon would clash, so the PC talks to this one through a 0.0.0.0 listener:
    // restart it).
    drop(http);
    let pc1 = lab.pc1.clone();
    let data = lab.dir().join("data");
    let data = data.to_str().expect("path").to_string();
    // The first daemon is index 0 in the lab.
    lab.kill(0);
    let listen = format!("0.0.0.0:{WEB_PORT}");
    lab.spawn(
        &board,
        "daemon2",
        bin(),
        &[
            "daemon",
            "--listen",
            &listen,
            "--data",
            &data,
            "--plain-http",
        ],
    );
    lab.wait_port(&board, BOARD_IP, WEB_PORT);
    let mut pc = Http::new(Some(&pc1), &format!("http://{BOARD_IP}:{WEB_PORT}"));
    let r = pc.form("/login", &[("password", "correct horse")]);
    assert_eq!(r.status, 303, "{}", r.body);
    pc.take_cookie(&r);
    pc.fetch_csrf();
    let r = pc.form(
        "/ports/change",
        &[
            ("csrf", &pc.csrf),
            ("op", "del_address"),
            ("port", "eth0"),
            ("address", "192.0.2.1/24"),
            ("mode", "force"),
        ],
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let n = text_of(&r.body, "notice").expect("a notice");
    eprintln!("apply anyway: {n}");
    assert!(
        n.contains("Unless it is confirmed there within 3 s, the old configuration comes back at "),
        "{n}"
    );
    assert!(n.contains("this page returns by itself then"), "{n}");
    let back = clock_after(&n, "comes back at ").expect("a time");
    assert!(
        near(back, now_of_day() + 3, 3),
        "back at {back}, now {}",
        now_of_day()
    );
    assert!(
        r.body.contains("data-return-in=\"7\""),
        "reload 3 s after the roll-back"
    );
    wait_until_gone(&board);
    let t = Instant::now();
    while addrs(&board, "eth0") != ["192.0.2.1/24"] {
        assert!(t.elapsed() < Duration::from_secs(15), "eth0 not restored");
        std::thread::sleep(Duration::from_millis(200));
    }
    let page = pc.get("/ports").body;
    let n = text_of(&page, "outcome-notice").expect("outcome notice");
    assert!(
        n.starts_with("Rolled back at ") && n.contains("not confirmed within 3 s"),
        "{n}"
    );
}

/// Wait (bounded) until 192.0.2.1 has left eth0 (the deferred change was applied).
fn wait_until_gone(board: &str) {
    let t = Instant::now();
    while addrs(board, "eth0").contains(&"192.0.2.1/24".to_string()) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the change was not applied"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The NIC facts panel of the Ports page (issue 24) for the board's veth ports, at phone and
/// desk width: the driver, speed/duplex as sysfs gives them, rings and offloads as the
/// driver answers; no firmware and no IRQ (veth has neither), and nothing wider than the
/// window. Screenshots: `target/ui-screens/<width>-ports-nic-facts.png`.
#[test]
fn the_ports_page_shows_each_ports_nic_facts() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (web, wd) = (WEB_PORT + 40, WD_PORT + 40);
    let (_, mut http) = daemon(&mut lab, &board, web, &[]);
    set_up(&lab, &mut http);
    chromedriver(&mut lab, &board, wd);
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("ui-screens"))
        .expect("target dir");
    let _ = std::fs::create_dir_all(&shots);
    let sys = |f: &str| {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &board, "cat"])
            .arg(format!("/sys/class/net/eth0/{f}"))
            .output()
            .expect("cat");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let speed = format!("{} Mb/s {}", sys("speed"), sys("duplex"));
    for (w, h) in [(390, 844), (1400, 1000)] {
        let b = Browser::open(
            &board,
            wd,
            &format!("http://127.0.0.1:{web}"),
            w,
            h,
            &lab.dir().join(format!("facts-{w}")),
        );
        b.log_in("correct horse");
        b.go("/ports");
        let m = b.js("const facts = {};
             document.querySelectorAll('#nic-facts .nic[data-port=eth0] dd').forEach(d => {
               facts[d.dataset.fact] = d.textContent; });
             const p = document.querySelector('#nic-facts').getBoundingClientRect();
             return {facts: facts, sw: document.documentElement.scrollWidth, iw: window.innerWidth,
                     right: Math.round(p.right)};");
        b.screenshot(&shots, &format!("{w}-ports-nic-facts"));
        eprintln!("{w} px: {m}");
        let f = &m["facts"];
        assert_eq!(f["Driver"], "veth", "{m}");
        assert_eq!(f["Speed / duplex"], speed.as_str(), "{m}");
        assert!(f.get("Firmware").is_none(), "{m}");
        assert!(f.get("IRQ → CPU").is_none(), "{m}");
        let off = f["Offloads"].as_str().unwrap_or_default();
        assert!(
            off.starts_with("on: rx-checksum, tx-checksum, scatter-gather, tso, gso"),
            "{m}"
        );
        assert!(
            m["sw"].as_i64() <= m["iw"].as_i64() && m["right"].as_i64() <= m["iw"].as_i64(),
            "{w} px: the panel is wider than the window: {m}"
        );
    }
}
