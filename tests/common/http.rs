//! HTTP against the daemon from inside a namespace (or the root one): start it, take the
//! first-run setup code from its log, log in, keep the session cookie and CSRF token.
#![allow(dead_code)]

use super::{bin, in_ns, Lab};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a request waits for its whole answer.
const REQ_TIMEOUT: Duration = Duration::from_secs(20);

/// An HTTP response, reduced to what the tests look at.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub location: String,
    pub cookie: Option<String>,
    pub body: String,
}

impl Resp {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The run id of a redirect to `/runs/ID` (panics with the location when it is not one).
    pub fn run_id(&self) -> i64 {
        self.location
            .strip_prefix("/runs/")
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("not a run's location: {:?}", self.location))
    }
}

/// A client: base URL, namespace, session cookie and CSRF token (sent by [`Http::api`]).
#[derive(Clone)]
pub struct Http {
    pub ns: Option<String>,
    pub base: String,
    pub cookie: Option<String>,
    pub csrf: String,
}

fn do_req(
    base: String,
    cookie: Option<String>,
    method: &str,
    path: &str,
    hdrs: Vec<(String, String)>,
    body: Option<(String, String)>,
    timeout: Duration,
) -> Result<Resp, String> {
    let agent = ureq::AgentBuilder::new()
        .redirects(0)
        .timeout(timeout)
        .build();
    let mut r = agent.request(method, &format!("{base}{path}"));
    if let Some(c) = &cookie {
        r = r.set("Cookie", &format!("netperfd_session={c}"));
    }
    for (k, v) in &hdrs {
        r = r.set(k, v);
    }
    let res = match body {
        Some((ct, b)) => r.set("Content-Type", &ct).send_string(&b),
        None => r.call(),
    };
    let resp = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(format!("{method} {path}: {e}")),
    };
    Ok(Resp {
        status: resp.status(),
        location: resp.header("location").unwrap_or_default().to_string(),
        cookie: resp
            .all("set-cookie")
            .iter()
            .find(|c| c.starts_with("netperfd_session="))
            .map(|c| c.to_string()),
        body: resp.into_string().unwrap_or_default(),
    })
}

/// Percent-encode a form value.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Http {
    /// A client for `base` (e.g. "http://127.0.0.1:8080") from namespace `ns`.
    pub fn new(ns: Option<&str>, base: &str) -> Http {
        Http {
            ns: ns.map(str::to_string),
            base: base.to_string(),
            cookie: None,
            csrf: String::new(),
        }
    }

    /// One request exactly as given (no CSRF header added); panics when there is no answer.
    pub fn req(
        &self,
        method: &str,
        path: &str,
        hdrs: Vec<(String, String)>,
        body: Option<(String, String)>,
    ) -> Resp {
        self.try_req(method, path, hdrs, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Http::req`], with a connection error as `Err` (the daemon may be down).
    pub fn try_req(
        &self,
        method: &str,
        path: &str,
        hdrs: Vec<(String, String)>,
        body: Option<(String, String)>,
    ) -> Result<Resp, String> {
        self.try_req_within(method, path, hdrs, body, REQ_TIMEOUT)
    }

    /// Like [`Http::try_req`], waiting up to `timeout` for the whole answer (a WebDriver new
    /// session starts a browser: a loaded machine takes longer than for a page).
    pub fn try_req_within(
        &self,
        method: &str,
        path: &str,
        hdrs: Vec<(String, String)>,
        body: Option<(String, String)>,
        timeout: Duration,
    ) -> Result<Resp, String> {
        let (base, cookie, m, p) = (
            self.base.clone(),
            self.cookie.clone(),
            method.to_string(),
            path.to_string(),
        );
        match &self.ns {
            Some(ns) => in_ns(ns, move || {
                do_req(base, cookie, &m, &p, hdrs, body, timeout)
            }),
            None => do_req(base, cookie, &m, &p, hdrs, body, timeout),
        }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.req("GET", path, vec![], None)
    }

    /// GET that must answer 200 with JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    }

    /// POST a form with exactly these fields (a page form needs its `csrf` field).
    pub fn form(&self, path: &str, fields: &[(&str, &str)]) -> Resp {
        let enc: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        self.req(
            "POST",
            path,
            vec![],
            Some(("application/x-www-form-urlencoded".into(), enc.join("&"))),
        )
    }

    /// A JSON request with exactly these headers.
    pub fn json(&self, method: &str, path: &str, hdrs: Vec<(String, String)>, v: &Value) -> Resp {
        self.req(
            method,
            path,
            hdrs,
            Some(("application/json".into(), v.to_string())),
        )
    }

    /// An API call with a JSON body and the session's CSRF token (`X-CSRF-Token`).
    pub fn api(&self, method: &str, path: &str, v: &Value) -> Resp {
        let h = vec![("X-CSRF-Token".to_string(), self.csrf.clone())];
        self.json(method, path, h, v)
    }

    /// An API call without a body, with the session's CSRF token.
    pub fn call(&self, method: &str, path: &str) -> Resp {
        let h = vec![("X-CSRF-Token".to_string(), self.csrf.clone())];
        self.req(method, path, h, None)
    }

    /// Take the session cookie a response set (it must be HttpOnly and SameSite=Strict).
    pub fn take_cookie(&mut self, r: &Resp) {
        let c = r.cookie.as_ref().expect("a session cookie");
        assert!(c.contains("HttpOnly"), "{c}");
        assert!(c.contains("SameSite=Strict"), "{c}");
        let v = c
            .trim_start_matches("netperfd_session=")
            .split(';')
            .next()
            .unwrap_or_default();
        self.cookie = Some(v.to_string());
    }

    /// The session's CSRF token, read from a page's form.
    pub fn page_csrf(&self) -> String {
        let page = self.get("/settings").body;
        let i = page.find("name=\"csrf\" value=\"").expect("csrf field") + 19;
        page[i..i + 32].to_string()
    }

    /// Read the CSRF token and keep it for [`Http::api`].
    pub fn fetch_csrf(&mut self) {
        self.csrf = self.page_csrf();
    }
}

/// The first-run setup code the daemon logged.
pub fn setup_code(log: &str) -> String {
    let i = log.find("setup code ").expect("setup code in the log") + 11;
    log[i..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

/// Start `netperfd daemon` (process name "daemon") in `ns` on 127.0.0.1:`port` with its data
/// in the lab's directory; returns (process index, client).
pub fn daemon(lab: &mut Lab, ns: &str, port: u16, extra: &[&str]) -> (usize, Http) {
    let data = lab.dir().join("data");
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec![
        "daemon",
        "--listen",
        &listen,
        "--data",
        data.to_str().unwrap_or("data"),
    ];
    args.extend_from_slice(extra);
    let i = lab.spawn(ns, "daemon", bin(), &args);
    lab.wait_port(ns, "127.0.0.1", port);
    (i, Http::new(Some(ns), &format!("http://{listen}")))
}

/// First login: the setup code from the "daemon" log, password "correct horse"; keeps the
/// session cookie and the CSRF token.
pub fn set_up(lab: &Lab, http: &mut Http) {
    let (_, log) = lab.output("daemon");
    let code = setup_code(&log);
    let r = http.form(
        "/setup",
        &[
            ("code", &code),
            ("password", "correct horse"),
            ("confirm", "correct horse"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    http.take_cookie(&r);
    http.fetch_csrf();
}

/// Poll `/api/runs/{id}` until the run is no longer running; returns the last answer.
pub fn wait_run(http: &Http, id: i64, limit: Duration) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/runs/{id}"));
        if v["run"]["status"] != "running" {
            return v;
        }
        assert!(t.elapsed() < limit, "run {id} still running");
        std::thread::sleep(Duration::from_millis(200));
    }
}
