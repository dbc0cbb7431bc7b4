//! Headless Chromium through chromedriver (WebDriver over HTTP), both running inside a lab
//! namespace, for tests that look at the pages as a user does: window size, clicks, typed
//! text, scripts that measure the layout, screenshots.

use super::http::Http;
use super::Lab;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Start chromedriver on `127.0.0.1:wd_port` in namespace `ns` (process name `chromedriver`).
pub fn chromedriver(lab: &mut Lab, ns: &str, wd_port: u16) {
    let port = format!("--port={wd_port}");
    lab.spawn(ns, "chromedriver", "chromedriver", &[&port]);
    lab.wait_port(ns, "127.0.0.1", wd_port);
}

/// One browser session (its own window size and profile) against the daemon at `base`.
pub struct Browser {
    http: Http,
    session: String,
    base: String,
}

impl Browser {
    /// A new headless session of `width` × `height` CSS pixels (below 500 px wide: a phone,
    /// emulated); `profile` is a fresh directory.
    pub fn open(
        ns: &str,
        wd_port: u16,
        base: &str,
        width: u32,
        height: u32,
        profile: &Path,
    ) -> Browser {
        let wd = Http::new(Some(ns), &format!("http://127.0.0.1:{wd_port}"));
        let mut opts = json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--hide-scrollbars",
                     format!("--window-size={},{}", width.max(500), height),
                     format!("--user-data-dir={}", profile.display())]});
        if width < 500 {
            // Headless Chromium's window is at least 500 px wide: a phone's viewport is emulated
            // (its CSS pixels, a touch screen, the page's meta viewport honoured).
            opts["mobileEmulation"] =
                json!({"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1.0}});
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": opts}}});
        // Chromium's start is the slowest step of a browser test: on a loaded CI machine it
        // took over 20 s (the page requests' limit) once; chromedriver itself waits 60 s.
        let r = wd
            .try_req_within(
                "POST",
                "/session",
                vec![],
                Some(("application/json".into(), caps.to_string())),
                Duration::from_secs(90),
            )
            .unwrap_or_else(|e| panic!("chromedriver new session: {e}"));
        assert_eq!(r.status, 200, "chromedriver: {}", r.body);
        let v: Value = serde_json::from_str(&r.body).expect("json");
        Browser {
            http: wd,
            session: v["value"]["sessionId"]
                .as_str()
                .expect("session")
                .to_string(),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// Send one WebDriver command; panics (with the driver's answer) unless it succeeded.
    pub fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let (status, v) = self.try_cmd(method, path, body);
        assert_eq!(status, 200, "webdriver {method} {path}: {v}");
        v["value"].clone()
    }

    /// One WebDriver command: (HTTP status, whole answer).
    pub fn try_cmd(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let url = format!("/session/{}{path}", self.session);
        let r = if method == "GET" {
            self.http.req(method, &url, vec![], None)
        } else {
            self.http.json(method, &url, vec![], &body)
        };
        (
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::Null),
        )
    }

    /// The element id of the first match of `css`; panics when there is none.
    /// Waits (bounded, 10 s) for the element to exist: after a click that loads a page, or
    /// while a page reloads itself, the element can be briefly missing.
    pub fn find(&self, css: &str) -> String {
        let t = Instant::now();
        let v = loop {
            let (status, v) = self.try_cmd(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            );
            if status == 200 {
                break v["value"].clone();
            }
            assert!(
                status == 404 && t.elapsed() < Duration::from_secs(10),
                "webdriver POST /element {css}: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(|x| x.as_str())
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_string()
    }

    /// Whether the first match of `css` is displayed (WebDriver's notion: rendered, not hidden).
    pub fn displayed(&self, css: &str) -> bool {
        let e = self.find(css);
        self.cmd("GET", &format!("/element/{e}/displayed"), Value::Null) == json!(true)
    }

    /// Replace the text of an input.
    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.cmd("POST", &format!("/element/{e}/clear"), json!({}));
        self.cmd(
            "POST",
            &format!("/element/{e}/value"),
            json!({"text": text}),
        );
    }

    /// Click like a user: fails when the element is hidden, covered or off-screen.
    /// Retries (bounded, 10 s) when the page was replaced between finding and clicking
    /// (a stale or vanished element).
    pub fn click(&self, css: &str) {
        let t = Instant::now();
        loop {
            let e = self.find(css);
            let (status, v) = self.try_cmd("POST", &format!("/element/{e}/click"), json!({}));
            if status == 200 {
                return;
            }
            assert!(
                status == 404 && t.elapsed() < Duration::from_secs(10),
                "webdriver click {css}: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Run a script (its `return` value).
    pub fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }

    /// Open `path` on the daemon.
    pub fn go(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        self.cmd("POST", "/url", json!({"url": url}));
    }

    /// The current page's path and query.
    pub fn path(&self) -> String {
        self.js("return location.pathname + location.search;")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Wait (bounded) until the page's path is `want`.
    pub fn wait_path(&self, want: &str) {
        let t = Instant::now();
        loop {
            let p = self.path();
            if p == want {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "page is {p}, want {want}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait (bounded, 10 s) until the element with `id` exists and its text starts with
    /// `prefix`; returns that text. For form posts that come back to the same path, where
    /// the path alone cannot tell the old page from the new one.
    pub fn wait_text(&self, id: &str, prefix: &str) -> String {
        let t = Instant::now();
        let script =
            format!("const e = document.getElementById('{id}'); return e ? e.textContent : null;");
        loop {
            let v = self.js(&script);
            let s = v.as_str().unwrap_or_default();
            if s.starts_with(prefix) {
                return s.to_string();
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "#{id} says {s:?}, want it to start with {prefix:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Log in with the admin password.
    pub fn log_in(&self, password: &str) {
        self.go("/login");
        self.type_into("input[name=password]", password);
        self.click("button[type=submit]");
        self.wait_path("/");
    }

    /// Save a PNG of the viewport as `dir/name.png` (checked to be a real PNG).
    pub fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        use base64::Engine;
        let shot = self.cmd("GET", "/screenshot", Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .expect("base64 PNG");
        assert_eq!(&png[1..4], b"PNG", "{name}: not a PNG");
        let f = dir.join(format!("{name}.png"));
        std::fs::write(&f, &png).expect("write screenshot");
        f
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let url = format!("/session/{}", self.session);
        let _ = self.http.try_req("DELETE", &url, vec![], None);
    }
}
