//! Seed 003 with stock peers in network namespaces: curl and axel download payloads from the
//! board (exact byte counts, Range requests checked against the full body, axel's parallel
//! connections recorded as one run), the board downloads from nginx with N connections,
//! `nc` into the TCP sink and out of the TCP source with byte counts checked on both ends,
//! the one-click web form, and bad input that gets a clear error and changes nothing.

mod common;
use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const HTTP_PORT: u16 = 8088;
const SINK_PORT: u16 = 5009;
const SOURCE_PORT: u16 = 5019;

/// Start the daemon in the board namespace with the default service ports; returns the data
/// directory.
fn daemon(lab: &mut Lab) -> String {
    let data = lab.dir().join("data");
    let cfg = lab.dir().join("netperfd.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:8080\"\ndata_dir = \"{}\"\niperf3_ports = []\n",
            data.display()
        ),
    )
    .expect("config");
    let board = lab.board.clone();
    lab.spawn(
        &board,
        "daemon",
        bin(),
        &["daemon", "--config", cfg.to_str().expect("path")],
    );
    for p in [8080, HTTP_PORT, SINK_PORT, SOURCE_PORT] {
        lab.wait_port(&board, BOARD_IP, p);
    }
    data.display().to_string()
}

/// Runs in the history, newest first (through the CLI, as a user would read them).
fn runs(lab: &mut Lab, data: &str) -> Vec<Value> {
    let board = lab.board.clone();
    let (code, out, err) = lab.run(
        &board,
        "runs-list",
        bin(),
        &["runs", "--data", data, "--json", "list", "--limit", "500"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    match json(&out, "runs list") {
        Value::Array(a) => a,
        v => panic!("not a list: {v}"),
    }
}

fn show(lab: &mut Lab, data: &str, id: i64) -> Value {
    let board = lab.board.clone();
    let (code, out, err) = lab.run(
        &board,
        "runs-show",
        bin(),
        &["runs", "--data", data, "--json", "show", &id.to_string()],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    json(&out, "runs show")
}

/// Wait until `n` runs of `kind` have ended; returns them, oldest first.
fn ended(lab: &mut Lab, data: &str, kind: &str, n: usize, limit: Duration) -> Vec<Value> {
    let t = Instant::now();
    loop {
        let mut v: Vec<Value> = runs(lab, data)
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect();
        if v.len() >= n && v.iter().all(|r| r["status"] != "running") {
            v.reverse();
            return v;
        }
        assert!(t.elapsed() < limit, "{n} {kind} run(s) did not end: {v:#?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn sum_interval_bytes(run: &Value) -> u64 {
    run["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["bytes"].as_u64().unwrap_or(0))
        .sum()
}

/// Goodput must equal bytes × 8 / seconds of the run's own figures (within 1 %).
fn consistent(bps: f64, bytes: f64, secs: f64) {
    assert!(bps > 0.0 && secs > 0.0, "bps {bps} secs {secs}");
    let want = bytes * 8.0 / secs;
    assert!(
        (bps - want).abs() <= want * 0.01,
        "bitrate {bps} is not bytes*8/seconds = {want}"
    );
}

fn url(path: &str) -> String {
    format!("http://{BOARD_IP}:{HTTP_PORT}{path}")
}

#[test]
fn curl_and_axel_download_payloads_from_the_board() {
    let _one = serial();
    let mut lab = Lab::new();
    let data = daemon(&mut lab);
    let pc1 = lab.pc1.clone();
    let dir = lab.dir().display().to_string();
    let full = format!("{dir}/full.bin");

    // curl: the whole 100 MB payload, exactly.
    let (code, out, err) = lab.run(
        &pc1,
        "curl-full",
        "curl",
        &[
            "-sS",
            "-o",
            &full,
            "-w",
            "%{http_code} %{size_download}",
            &url("/payload/100M"),
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "200 100000000");
    let body = std::fs::read(&full).expect("downloaded body");
    assert_eq!(body.len(), 100_000_000);
    let r = ended(&mut lab, &data, "http-serve", 1, Duration::from_secs(20));
    let run = &r[0];
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["bytes"], 100_000_000);
    assert_eq!(run["summary"]["connections"], 1);
    assert_eq!(run["summary"]["size"], 100_000_000u64);
    assert_eq!(run["peer_host"], PC1_IP);
    assert_eq!(run["local_port"], HTTP_PORT);
    consistent(
        run["sender_bps"].as_f64().expect("bitrate"),
        100e6,
        run["summary"]["seconds"].as_f64().expect("seconds"),
    );
    let detail = show(&mut lab, &data, run["id"].as_i64().expect("id"));
    assert_eq!(
        sum_interval_bytes(&detail),
        100_000_000,
        "the intervals add up to the body"
    );

    // Range requests return exactly the requested bytes: compare with the full body. (Another
    // payload size, so these are a run of their own; the content depends on the offset only.)
    for (range, first, len) in [
        ("1000000-1999999", 1_000_000usize, 1_000_000usize),
        ("49999990-", 49_999_990, 10),
        ("-4096", 50_000_000 - 4096, 4096),
        ("1048570-1048585", 1_048_570, 16),
    ] {
        let part = format!("{dir}/part.bin");
        let (code, out, err) = lab.run(
            &pc1,
            "curl-range",
            "curl",
            &[
                "-sS",
                "-o",
                &part,
                "-H",
                &format!("Range: bytes={range}"),
                "-w",
                "%{http_code} %{size_download}",
                &url("/payload/50M"),
            ],
            Duration::from_secs(30),
        );
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.trim(), format!("206 {len}"), "range {range}");
        let got = std::fs::read(&part).expect("part");
        assert!(
            got == body[first..first + len],
            "range {range}: content differs from the full body"
        );
    }
    // 64-bit offsets: the last 10 bytes of a 10 GB payload are the block at that offset.
    let part = format!("{dir}/part10g.bin");
    let (code, out, err) = lab.run(
        &pc1,
        "curl-range-10g",
        "curl",
        &[
            "-sS",
            "-o",
            &part,
            "-r",
            "9999999990-",
            "-w",
            "%{http_code} %{size_download}",
            &url("/payload/10G"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "206 10");
    let at = (9_999_999_990u64 % 1_048_576) as usize;
    assert!(std::fs::read(&part).expect("part") == body[at..at + 10]);
    let n_before = runs(&mut lab, &data).len();
    // Bad input: clear errors, nothing recorded.
    for (path, range, status, text) in [
        (
            "/payload/50M",
            "bytes=60000000-",
            "416",
            "outside the 50000000 bytes",
        ),
        ("/payload/50M", "bytes=9-1", "400", "malformed Range header"),
        ("/payload/1X", "", "400", "invalid size '1X'"),
        ("/payload/101G", "", "400", "larger than the limit"),
        ("/payload/0", "", "400", "zero"),
        ("/nothing", "", "404", "use /payload/<size>"),
    ] {
        let mut args = vec!["-sS", "-w", "\n%{http_code}"];
        let h = format!("Range: {range}");
        if !range.is_empty() {
            args.extend(["-H", &h]);
        }
        let u = url(path);
        args.push(&u);
        let (code, out, err) = lab.run(&pc1, "curl-bad", "curl", &args, Duration::from_secs(20));
        assert_eq!(code, Some(0), "{err}");
        assert!(out.trim_end().ends_with(status), "{path} {range}: {out}");
        assert!(out.contains(text), "{path} {range}: {out}");
    }
    // HEAD: the size, no body, no run.
    let (_, out, _) = lab.run(
        &pc1,
        "curl-head",
        "curl",
        &["-sS", "-I", &url("/payload/10G")],
        Duration::from_secs(20),
    );
    assert!(out.contains("Content-Length: 10000000000"), "{out}");
    assert!(out.contains("Accept-Ranges: bytes"), "{out}");
    // A duration, not an event: that no run appears is checked after a while.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        runs(&mut lab, &data).len(),
        n_before,
        "bad requests and HEAD record nothing"
    );

    // axel -n 4: one run with 4 connections.
    let ax = format!("{dir}/axel.bin");
    let (code, _, err) = lab.run(
        &pc1,
        "axel",
        "axel",
        &["-q", "-n", "4", "-o", &ax, &url("/payload/100M")],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "axel: {err}");
    let got = std::fs::read(&ax).expect("axel output");
    assert!(got == body, "axel's file equals curl's");
    let r = ended(&mut lab, &data, "http-serve", 4, Duration::from_secs(20));
    let run = r.last().expect("axel run");
    assert_eq!(
        run["summary"]["user_agent"]
            .as_str()
            .map(|u| u.starts_with("Axel")),
        Some(true),
        "{run:#}"
    );
    assert_eq!(run["status"], "completed", "{run:#}");
    // -n 4; axel opens one more range request when it rebalances a slow connection's rest
    // (seen once in a full run: 5 requests, 198 kB fetched twice).
    let conns = run["summary"]["connections"].as_u64().unwrap_or(0);
    assert!((4..=8).contains(&conns), "{conns} connections: {run:#}");
    let bytes = run["bytes"].as_u64().expect("bytes");
    // axel may fetch a few KB twice when it rebalances the last ranges.
    assert!(
        (100_000_000..=100_000_000 + 4 * 1_048_576).contains(&bytes),
        "{bytes}"
    );
    consistent(
        run["sender_bps"].as_f64().expect("bitrate"),
        bytes as f64,
        run["summary"]["seconds"].as_f64().expect("seconds"),
    );
    let detail = show(&mut lab, &data, run["id"].as_i64().expect("id"));
    let ids: std::collections::BTreeSet<u64> = detail["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .filter(|i| i["bytes"].as_u64() > Some(0))
        .map(|i| i["stream_id"].as_u64().unwrap_or(0))
        .collect();
    assert!(ids.len() >= 4, "one stream per connection: {ids:?}");
    // The run page's "Command line (peer)" is a line Debian 12's axel 2.17 runs as given (it
    // cannot write to /dev/null), and it cleans up after itself.
    let line = detail["view"]["stock_command"]
        .as_str()
        .expect("stock command");
    assert_eq!(
        line,
        format!(
            "axel -n {conns} -q -o /tmp/netperfd-100M {u}; rm -f /tmp/netperfd-100M /tmp/netperfd-100M.st",
            u = url("/payload/100M")
        )
    );
    let (code, out, err) = lab.run(
        &pc1,
        "axel-line",
        "sh",
        &["-c", line],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{line}: {out}{err}");
    assert!(!std::path::Path::new("/tmp/netperfd-100M").exists());
    let r = ended(&mut lab, &data, "http-serve", 5, Duration::from_secs(20));
    assert_eq!(
        r.last().map(|x| x["status"].clone()),
        Some("completed".into())
    );
}

fn nginx(lab: &mut Lab) -> (String, u64) {
    let dir = lab.dir().display().to_string();
    let www = format!("{dir}/www");
    std::fs::create_dir_all(&www).expect("www");
    // 30 000 007 random bytes: not a multiple of the connection count.
    let size = 30_000_007u64;
    let mut f = std::fs::File::open("/dev/urandom").expect("urandom");
    let mut v = vec![0u8; size as usize];
    std::io::Read::read_exact(&mut f, &mut v).expect("random");
    std::fs::write(format!("{www}/test.dat"), &v).expect("file");
    let conf = format!(
        "daemon off;\nuser root;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/nginx-error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n access_log off;\n default_type application/octet-stream;\n\
         client_body_temp_path {dir}/ngx-body;\n proxy_temp_path {dir}/ngx-proxy;\n fastcgi_temp_path {dir}/ngx-fcgi;\n\
         uwsgi_temp_path {dir}/ngx-uwsgi;\n scgi_temp_path {dir}/ngx-scgi;\n\
         server {{\n  listen {PC1_IP}:8080;\n  root {www};\n  location = /old {{ return 301 /test.dat; }}\n  location = /broken {{ return 500; }}\n }}\n}}\n"
    );
    let cf = format!("{dir}/nginx.conf");
    std::fs::write(&cf, conf).expect("nginx conf");
    let pc1 = lab.pc1.clone();
    lab.spawn(&pc1, "nginx", "nginx", &["-c", &cf, "-p", &dir]);
    lab.wait_port(&pc1, PC1_IP, 8080);
    (format!("http://{PC1_IP}:8080"), size)
}

#[test]
fn board_downloads_from_nginx_with_four_connections() {
    let _one = serial();
    let mut lab = Lab::new();
    let (base, size) = nginx(&mut lab);
    let board = lab.board.clone();
    let data = lab.dir().join("data").display().to_string();

    let u = format!("{base}/test.dat");
    let (code, out, err) = lab.run(
        &board,
        "get",
        bin(),
        &["http-get", &u, "-n", "4", "--data", &data, "--json"],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let run = json(&out, "http-get --json");
    assert_eq!(run["kind"], "http-get");
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["bytes"].as_u64(), Some(size));
    assert_eq!(run["summary"]["size"].as_u64(), Some(size));
    assert_eq!(run["summary"]["connections"], 4);
    assert_eq!(run["summary"]["ranges"], true);
    assert_eq!(run["bind_dev"], Value::Null);
    assert_eq!(run["local_host"], BOARD_IP);
    let per = run["summary"]["per_connection"].as_array().expect("per");
    assert_eq!(per.len(), 4);
    let per_bytes: Vec<u64> = per
        .iter()
        .map(|c| c["bytes"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(per_bytes.iter().sum::<u64>(), size);
    assert!(
        per_bytes
            .iter()
            .all(|&b| b == size / 4 || b == size / 4 + 1),
        "even ranges: {per_bytes:?}"
    );
    consistent(
        run["receiver_bps"].as_f64().expect("goodput"),
        size as f64,
        run["summary"]["seconds"].as_f64().expect("seconds"),
    );
    let detail = show(&mut lab, &data, run["id"].as_i64().expect("id"));
    assert_eq!(sum_interval_bytes(&detail), size, "the intervals add up");

    // Bound to the board's port: same figures.
    let (code, out, err) = lab.run(
        &board,
        "get-dev",
        bin(),
        &[
            "http-get",
            &u,
            "-n",
            "3",
            "--bind-dev",
            "eth0",
            "--data",
            &data,
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let run = json(&out, "http-get --json");
    assert_eq!(run["bytes"].as_u64(), Some(size));
    assert_eq!(run["bind_dev"], "eth0");

    // https and bad values: refused before anything is recorded.
    let n = runs(&mut lab, &data).len();
    for (args, text) in [
        (vec!["https://192.0.2.2/test.dat"], "https is not supported"),
        (vec!["ftp://192.0.2.2/x"], "not an http:// URL"),
        (vec![u.as_str(), "-n", "0"], "connections must be 1..64"),
        (vec![u.as_str(), "-n", "65"], "connections must be 1..64"),
        (vec![u.as_str(), "--bind-dev", "a/b"], "not a port name"),
    ] {
        let mut a = vec!["http-get"];
        a.extend(args.iter().copied());
        a.extend(["--data", data.as_str()]);
        let (code, _, err) = lab.run(&board, "get-bad", bin(), &a, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{a:?}");
        assert!(err.contains(text), "{a:?}: {err}");
    }
    assert_eq!(
        runs(&mut lab, &data).len(),
        n,
        "refused downloads record nothing"
    );

    // Redirects, server errors, missing files, a port nobody listens on: a failed run with
    // the reason.
    for (path, text) in [
        (format!("{base}/old"), "301 Moved Permanently (redirect to"),
        (format!("{base}/broken"), "500 Internal Server Error"),
        (format!("{base}/missing.dat"), "404 Not Found"),
        (
            format!("http://{PC1_IP}:9/x"),
            "cannot connect to 192.0.2.2:9",
        ),
    ] {
        let (code, out, _) = lab.run(
            &board,
            "get-fail",
            bin(),
            &["http-get", &path, "--data", &data, "--json"],
            Duration::from_secs(30),
        );
        assert_eq!(code, Some(1), "{path}");
        let run = json(&out, "failed http-get");
        assert_eq!(run["status"], "failed", "{path}");
        let e = run["error"].as_str().unwrap_or("");
        assert!(e.contains(text), "{path}: {e}");
    }
}

#[test]
fn nc_into_the_sink_and_out_of_the_source() {
    let _one = serial();
    let mut lab = Lab::new();
    let data = daemon(&mut lab);
    let pc1 = lab.pc1.clone();

    // Three nc streams into the sink at once (the seed's three-window test).
    let mut idx = Vec::new();
    for i in 0..3 {
        let cmd = format!(
            "head -c {} /dev/zero | nc -N {BOARD_IP} {SINK_PORT}",
            20_000_000 + i
        );
        idx.push(lab.spawn(&pc1, &format!("nc-sink{i}"), "sh", &["-c", &cmd]));
    }
    for i in idx {
        assert_eq!(
            lab.wait(i, Duration::from_secs(60)),
            Some(0),
            "nc into the sink"
        );
    }
    // One run with a stream per nc and their sum (issue 22 item 11: it was 3 runs, no sum).
    let r = ended(&mut lab, &data, "tcp-sink", 1, Duration::from_secs(20));
    assert_eq!(r.len(), 1, "{r:#?}");
    let run = &r[0];
    let per = run["summary"]["per_connection"]
        .as_array()
        .unwrap_or_else(|| panic!("no per_connection: {run:#}"));
    let mut got: Vec<u64> = per
        .iter()
        .map(|x| x["bytes"].as_u64().unwrap_or(0))
        .collect();
    netperfd::model::order::sort(&mut got);
    assert_eq!(got, vec![20_000_000, 20_000_001, 20_000_002]);
    assert_eq!(run["summary"]["sum"]["streams"], 3, "{run:#}");
    assert_eq!(run["summary"]["sum"]["bytes"], 60_000_003, "{run:#}");
    assert_eq!(run["bytes"], 60_000_003, "{run:#}");
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["direction"], "receive");
    assert_eq!(run["peer_host"], PC1_IP);
    consistent(
        run["receiver_bps"].as_f64().expect("bitrate"),
        run["bytes"].as_f64().expect("bytes"),
        run["summary"]["seconds"].as_f64().expect("seconds"),
    );
    let d = show(&mut lab, &data, run["id"].as_i64().expect("id"));
    assert_eq!(Some(sum_interval_bytes(&d)), run["bytes"].as_u64());

    // Out of the source: the peer counts what it read; the board wrote at least that much
    // (the rest was in flight when the peer closed).
    let cmd = format!("nc -d {BOARD_IP} {SOURCE_PORT} | head -c 50000000 | wc -c");
    let (code, out, err) = lab.run(
        &pc1,
        "nc-source",
        "sh",
        &["-c", &cmd],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "50000000");
    let r = ended(&mut lab, &data, "tcp-source", 1, Duration::from_secs(20));
    let run = &r[0];
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["direction"], "send");
    let bytes = run["bytes"].as_u64().expect("bytes");
    assert!(
        (50_000_000..50_000_000 + 64 * 1_048_576).contains(&bytes),
        "source wrote {bytes}"
    );
    consistent(
        run["sender_bps"].as_f64().expect("bitrate"),
        bytes as f64,
        run["summary"]["seconds"].as_f64().expect("seconds"),
    );

    // A peer that connects and sends nothing is not recorded forever: the run stays
    // 'running' only while the connection lives; when it closes without a byte (a probe, a
    // health check) no run with a meaningless bitrate is kept.
    let i = lab.spawn(
        &pc1,
        "nc-idle",
        "nc",
        &["-d", BOARD_IP, &SINK_PORT.to_string()],
    );
    wait_until(Duration::from_secs(10), "a live tcp-sink run", || {
        runs(&mut lab, &data)
            .iter()
            .any(|r| r["kind"] == "tcp-sink" && r["status"] == "running")
    });
    let live: Vec<Value> = runs(&mut lab, &data)
        .into_iter()
        .filter(|r| r["kind"] == "tcp-sink" && r["status"] == "running")
        .collect();
    assert_eq!(live.len(), 1, "the idle connection is a live run");
    let idle_id = live[0]["id"].as_i64().expect("id");
    lab.kill(i);
    let t = Instant::now();
    loop {
        let sinks: Vec<Value> = runs(&mut lab, &data)
            .into_iter()
            .filter(|r| r["kind"] == "tcp-sink")
            .collect();
        if sinks.iter().all(|r| r["id"].as_i64() != Some(idle_id)) {
            assert_eq!(sinks.len(), 1, "{sinks:#?}");
            assert!(sinks.iter().all(|r| r["status"] == "completed"));
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the empty sink run {idle_id} is still kept: {sinks:#?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The one-click web form: log in, start a download from nginx, find it in history; bad
/// input gets the form back with the reason.
#[test]
fn web_form_starts_a_download() {
    let _one = serial();
    let mut lab = Lab::new();
    let (base, size) = nginx(&mut lab);
    let _ = daemon(&mut lab);
    let board = lab.board.clone();
    let dir = lab.dir().display().to_string();
    let jar = format!("{dir}/cookies");
    let (_, log) = lab.output("daemon");
    let i = log.find("setup code ").expect("setup code") + 11;
    let code: String = log[i..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let curl = |lab: &mut Lab, args: &[&str]| -> String {
        let mut a = vec![
            "-sS",
            "-b",
            &jar,
            "-c",
            &jar,
            "-w",
            "\n%{http_code} %{redirect_url}",
        ];
        a.extend_from_slice(args);
        let (c, out, err) = lab.run(&board, "curl-web", "curl", &a, Duration::from_secs(60));
        assert_eq!(c, Some(0), "{err}");
        out
    };
    let out = curl(
        &mut lab,
        &[
            "--data-urlencode",
            &format!("code={code}"),
            "--data-urlencode",
            "password=correct horse",
            "--data-urlencode",
            "confirm=correct horse",
            "http://127.0.0.1:8080/setup",
        ],
    );
    assert!(out.trim_end().contains("303"), "{out}");
    let page = curl(&mut lab, &["http://127.0.0.1:8080/traffic"]);
    assert!(
        page.contains(&format!(
            "axel -n 10 -q -o /tmp/netperfd-1G http://{BOARD_IP}:{HTTP_PORT}/payload/1G; rm -f /tmp/netperfd-1G /tmp/netperfd-1G.st"
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!("nc {BOARD_IP} {SINK_PORT} &#60; /dev/zero")),
        "{page}"
    );
    let j = page.find("name=\"csrf\" value=\"").expect("csrf") + 19;
    let csrf = page[j..j + 32].to_string();

    // The API: a session without the X-CSRF-Token header is refused, so is no login at all.
    let out = curl(
        &mut lab,
        &[
            "-H",
            "Content-Type: application/json",
            "-d",
            &format!("{{\"url\":\"{base}/test.dat\"}}"),
            "http://127.0.0.1:8080/api/http-get",
        ],
    );
    assert!(out.trim_end().ends_with("403"), "{out}");
    let (c, out, _) = lab.run(
        &board,
        "curl-anon",
        "curl",
        &[
            "-sS",
            "-w",
            "\n%{http_code}",
            "-d",
            &format!("{{\"url\":\"{base}/test.dat\"}}"),
            "http://127.0.0.1:8080/api/http-get",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(c, Some(0));
    assert!(out.trim_end().ends_with("401"), "{out}");
    // Without the CSRF token: refused.
    let out = curl(
        &mut lab,
        &[
            "--data-urlencode",
            &format!("url={base}/test.dat"),
            "http://127.0.0.1:8080/traffic/http-get",
        ],
    );
    assert!(out.trim_end().ends_with("403"), "{out}");
    // https: the form comes back with the reason.
    let out = curl(
        &mut lab,
        &[
            "--data-urlencode",
            &format!("csrf={csrf}"),
            "--data-urlencode",
            "url=https://192.0.2.2/test.dat",
            "http://127.0.0.1:8080/traffic/http-get",
        ],
    );
    assert!(out.contains("https is not supported"), "{out}");
    assert!(out.trim_end().ends_with("400"), "{out}");
    // The one click.
    let out = curl(
        &mut lab,
        &[
            "--data-urlencode",
            &format!("csrf={csrf}"),
            "--data-urlencode",
            &format!("url={base}/test.dat"),
            "--data-urlencode",
            "connections=4",
            "--data-urlencode",
            "bind=eth0",
            "http://127.0.0.1:8080/traffic/http-get",
        ],
    );
    let last = out.lines().last().unwrap_or("").to_string();
    assert!(last.starts_with("303 http://127.0.0.1:8080/runs/"), "{out}");
    let id = last.rsplit('/').next().unwrap_or("").to_string();
    let t = Instant::now();
    let v = loop {
        let out = curl(&mut lab, &[&format!("http://127.0.0.1:8080/api/runs/{id}")]);
        let body = out.rsplit_once('\n').map(|x| x.0).unwrap_or("");
        let v = json(body, "api run");
        if v["run"]["status"] != "running" {
            break v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "download still running"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(v["run"]["status"], "completed", "{v:#}");
    assert_eq!(v["run"]["kind"], "http-get");
    assert_eq!(v["run"]["bytes"].as_u64(), Some(size));
    assert_eq!(v["run"]["bind_dev"], "eth0");
    let page = curl(&mut lab, &[&format!("http://127.0.0.1:8080/runs/{id}")]);
    assert!(page.contains("Per connection"), "{page}");
    assert!(page.contains("netperfd http-get"), "{page}");
    let list = curl(&mut lab, &["http://127.0.0.1:8080/traffic"]);
    assert!(
        list.contains(&format!("href=\"/runs/{id}\"")),
        "the run is listed on the page"
    );

    // Stop: a slow download from the payload server and an nc into the sink, each stopped
    // from the board; both runs end as aborted by the user, the peers see the close.
    let pc1 = lab.pc1.clone();
    let dl = lab.spawn(
        &pc1,
        "curl-slow",
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            "--limit-rate",
            "5M",
            &url("/payload/1G"),
        ],
    );
    let nc = lab.spawn(
        &pc1,
        "nc-stop",
        "sh",
        &["-c", &format!("nc {BOARD_IP} {SINK_PORT} < /dev/zero")],
    );
    for kind in ["http-serve", "tcp-sink"] {
        let t = Instant::now();
        let rid = loop {
            let out = curl(&mut lab, &["http://127.0.0.1:8080/api/runs?status=running"]);
            let body = out.rsplit_once('\n').map(|x| x.0).unwrap_or("");
            let v = json(body, "running runs");
            if let Some(r) = v
                .as_array()
                .and_then(|a| a.iter().find(|r| r["kind"] == kind))
            {
                break r["id"].as_i64().expect("id");
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no running {kind} run"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        // The stop comes mid-run: a duration into it.
        std::thread::sleep(Duration::from_millis(1200));
        let out = curl(
            &mut lab,
            &[
                "-X",
                "POST",
                "-H",
                &format!("X-CSRF-Token: {csrf}"),
                &format!("http://127.0.0.1:8080/api/runs/{rid}/stop"),
            ],
        );
        assert!(out.trim_end().ends_with("202"), "{kind}: {out}");
        let t = Instant::now();
        let v = loop {
            let out = curl(
                &mut lab,
                &[&format!("http://127.0.0.1:8080/api/runs/{rid}")],
            );
            let body = out.rsplit_once('\n').map(|x| x.0).unwrap_or("");
            let v = json(body, "api run");
            if v["run"]["status"] != "running" {
                break v;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{kind} run not stopped"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(v["run"]["status"], "aborted", "{v:#}");
        assert_eq!(v["run"]["error"], "stopped by the user");
        assert!(v["run"]["bytes"].as_u64() > Some(0), "{v:#}");
    }
    assert!(
        lab.wait(dl, Duration::from_secs(20)).is_some(),
        "curl saw the close"
    );
    assert!(
        lab.wait(nc, Duration::from_secs(20)).is_some(),
        "nc saw the close"
    );
}

/// Hostile or broken peers on the unauthenticated ports: garbage, oversized heads, too many
/// connections, a download dropped half-way — clear answers, bounded resources, and the
/// services keep working.
#[test]
fn hostile_peers_do_not_wedge_the_services() {
    use std::io::{Read, Write};
    let _one = serial();
    let mut lab = Lab::new();
    let data = daemon(&mut lab);
    let pc1 = lab.pc1.clone();

    let answers = in_ns(&pc1, || {
        let ask = |bytes: Vec<u8>| -> String {
            let mut s = std::net::TcpStream::connect((BOARD_IP, HTTP_PORT)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10))).ok();
            let _ = s.write_all(&bytes);
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            String::from_utf8_lossy(&out).to_string()
        };
        let mut big = b"GET /payload/1M HTTP/1.1\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 20_000));
        vec![
            ask(b"\x00\x01\x02 garbage\r\n\r\n".to_vec()),
            ask(big),
            ask(b"POST /payload/1M HTTP/1.1\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello".to_vec()),
            ask(b"DELETE /payload/1M HTTP/1.1\r\nHost: b\r\n\r\n".to_vec()),
            ask(b"GET /payload/1M HTTP/3\r\n\r\n".to_vec()),
            // Issue 21: ambiguous heads are refused with the reason, never "first wins".
            ask(b"GET /payload/1K HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n".to_vec()),
            ask(b"GET /payload/1K HTTP/1.1\r\nHost: b\r\nX-A: one\r\n two\r\n\r\n".to_vec()),
            ask(b"GET /payload/1K HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec()),
            ask(b"GET /payload/1K HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec()),
            ask(b"GET /payload/1K HTTP/1.1\r\nHost: b\r\nX-A: a\rb\r\n\r\n".to_vec()),
            ask(b"GET /payload/1K HTTP/1.1\r\nHost: b\0x\r\n\r\n".to_vec()),
        ]
    });
    for (answer, reason) in answers[5..11].iter().zip([
        "more than one Content-Length header",
        "a header line continued on the next line (obs-fold) is not accepted",
        "missing Host header (required in HTTP/1.1)",
        "more than one Host header",
        "header 'x-a': control character (CR) in the value",
        "header 'host': control character (NUL) in the value",
    ]) {
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n")
                && answer.ends_with(&format!("\r\n\r\n{reason}\n")),
            "expected 400 '{reason}', got:\n{answer}"
        );
    }
    assert!(answers[0].starts_with("HTTP/1.1 400"), "{}", answers[0]);
    assert!(
        answers[1].starts_with("HTTP/1.1 400") && answers[1].contains("too large"),
        "{}",
        answers[1]
    );
    assert!(
        answers[2].starts_with("HTTP/1.1 400") && answers[2].contains("body"),
        "{}",
        answers[2]
    );
    assert!(
        answers[3].starts_with("HTTP/1.1 405") && answers[3].contains("Allow: GET, HEAD"),
        "{}",
        answers[3]
    );
    assert!(answers[4].starts_with("HTTP/1.1 400"), "{}", answers[4]);

    // 70 idle connections from one address: the first 8 (the per-address cap of connections
    // waiting for a request; 16 per address, 64 in all) are held, the rest get 503 at once.
    let refused = in_ns(&pc1, || {
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..70 {
            let s = std::net::TcpStream::connect((BOARD_IP, HTTP_PORT)).expect("connect");
            held.push(s);
        }
        // A margin, not an event: the server answers the connections over its cap (nothing
        // outside shows it has seen the last one).
        std::thread::sleep(Duration::from_millis(500));
        for s in &mut held {
            s.set_nonblocking(true).ok();
            let mut b = [0u8; 64];
            if let Ok(n) = s.read(&mut b) {
                if String::from_utf8_lossy(&b[..n]).starts_with("HTTP/1.1 503") {
                    refused += 1;
                }
            }
        }
        refused
    });
    assert_eq!(
        refused, 62,
        "connections over the per-address cap of 8 waiting ones are refused"
    );

    // A download dropped half-way: its run ends, marked aborted with the reason.
    let i = lab.spawn(
        &pc1,
        "curl-slow",
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            "--limit-rate",
            "2M",
            &url("/payload/1G"),
        ],
    );
    // Killed mid-download: once its run is live.
    wait_until(Duration::from_secs(10), "a live http-serve run", || {
        runs(&mut lab, &data)
            .iter()
            .any(|r| r["kind"] == "http-serve" && r["status"] == "running")
    });
    lab.kill(i);
    let r = ended(&mut lab, &data, "http-serve", 1, Duration::from_secs(40));
    assert_eq!(r[0]["status"], "aborted", "{:#}", r[0]);
    assert!(
        r[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("closed every request"),
        "{:#}",
        r[0]
    );

    // Everything still works.
    let (code, out, err) = lab.run(
        &pc1,
        "curl-after",
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
            &url("/payload/10M"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "200 10000000");
    let cmd = format!("head -c 1000000 /dev/zero | nc -N {BOARD_IP} {SINK_PORT}");
    let (code, _, err) = lab.run(
        &pc1,
        "nc-after",
        "sh",
        &["-c", &cmd],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let r = ended(&mut lab, &data, "tcp-sink", 1, Duration::from_secs(20));
    assert_eq!(r[0]["bytes"], 1_000_000);
}

/// Seed 003's "php built-in server" case: a server without byte ranges gets one connection
/// (and the run says so); a server that closes before the announced Content-Length gives a
/// failed run with the reason.
#[test]
fn servers_without_ranges_and_short_bodies() {
    let _one = serial();
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    let board = lab.board.clone();
    let dir = lab.dir().display().to_string();
    let data = format!("{dir}/data");
    let www = format!("{dir}/www");
    std::fs::create_dir_all(&www).expect("www");
    std::fs::write(format!("{www}/f.dat"), vec![7u8; 5_000_000]).expect("file");
    // Python's http.server: HEAD and GET with Content-Length, no Accept-Ranges.
    lab.spawn(
        &pc1,
        "pyhttp",
        "python3",
        &[
            "-m",
            "http.server",
            "8000",
            "--bind",
            PC1_IP,
            "--directory",
            &www,
        ],
    );
    lab.wait_port(&pc1, PC1_IP, 8000);
    let u = format!("http://{PC1_IP}:8000/f.dat");
    let (code, out, err) = lab.run(
        &board,
        "get-norange",
        bin(),
        &["http-get", &u, "-n", "4", "--data", &data, "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let run = json(&out, "http-get");
    assert_eq!(run["bytes"], 5_000_000);
    assert_eq!(run["summary"]["ranges"], false);
    assert_eq!(run["summary"]["connections"], 1);

    // A server that announces 1 000 000 bytes and sends 500 000.
    let script = format!(
        "import socket\n\
         s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{PC1_IP}', 8001)); s.listen(8)\n\
         while True:\n\
         \x20   c,_=s.accept(); r=c.recv(4096)\n\
         \x20   c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 1000000\\r\\nConnection: close\\r\\n\\r\\n')\n\
         \x20   if r.startswith(b'GET'): c.sendall(b'x'*500000)\n\
         \x20   c.close()\n"
    );
    lab.spawn(&pc1, "short", "python3", &["-c", &script]);
    lab.wait_port(&pc1, PC1_IP, 8001);
    let (code, out, _) = lab.run(
        &board,
        "get-short",
        bin(),
        &[
            "http-get",
            &format!("http://{PC1_IP}:8001/x"),
            "-n",
            "4",
            "--data",
            &data,
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1));
    let run = json(&out, "short http-get");
    assert_eq!(run["status"], "failed");
    let e = run["error"].as_str().unwrap_or("");
    assert!(
        e.contains("short body") && e.contains("500000 of 1000000"),
        "{e}"
    );
    assert_eq!(run["bytes"], 500_000, "the partial figures are kept");
}
