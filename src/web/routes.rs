//! Route registration with each route's access declared where it is registered: every
//! `configure` of `web/` registers its routes through [`Routes`] (`r.get(pattern, READ,
//! handler)`), which records (method, pattern, access) in the route table ([`table`]) and puts
//! the access on the route itself. The scope an API token needs is then a property of the
//! route actix actually matched — never of the request's spelling of the path (issue 37: the
//! scope used to be derived from the still percent-encoded `req.path()` while the router
//! matches the decoded one, so `/api/%64iag/logs` reached an admin handler with a read-only
//! token).
//!
//! Two places check it: a resource middleware refuses a bearer token below the route's scope
//! before any extractor or handler runs, and the [`Auth`](super::auth::Auth) extractor reads the
//! same route data (a handler reached without it — a route registered some other way — needs
//! [`Scope::Admin`]: fail closed). Not for: what a handler does with a request it accepted.

use super::auth::Scope;
use actix_web::dev::{Service, ServiceRequest};
use actix_web::http::Method;
use actix_web::{guard, web, FromRequest, Handler, Responder};
use futures_util::future::{ready, Either};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without credentials (login and setup pages, static files, `/api/health`).
    Public,
    /// A logged-in session, or an API token of at least this scope.
    Needs(Scope),
}

impl Access {
    /// The scope an API token needs here: [`Scope::Read`] on a public route (a token there is
    /// not needed, so any valid one does).
    pub fn scope(self) -> Scope {
        match self {
            Access::Public => Scope::Read,
            Access::Needs(s) => s,
        }
    }
}

/// No credentials needed.
pub const PUBLIC: Access = Access::Public;
/// Session, or any API token (reads).
pub const READ: Access = Access::Needs(Scope::Read);
/// Session, or a "run tests" or admin token (start and stop tests).
pub const RUN: Access = Access::Needs(Scope::Run);
/// Session, or an admin token (every other change, and the Diagnostics' reads).
pub const ADMIN: Access = Access::Needs(Scope::Admin);

/// One registered route: its method, its pattern as actix matches it, and its access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteDef {
    pub method: Method,
    pub pattern: &'static str,
    pub access: Access,
}

/// The registration helper every `configure` in `web/` uses: each route becomes its own actix
/// resource (pattern + method guard, as `ServiceConfig::route` makes it) carrying its
/// [`Access`], and is recorded in the table.
pub struct Routes<'a> {
    cfg: &'a mut web::ServiceConfig,
    table: Vec<RouteDef>,
    #[cfg(test)]
    probe: bool,
}

impl<'a> Routes<'a> {
    /// Register into `cfg`.
    pub fn new(cfg: &'a mut web::ServiceConfig) -> Routes<'a> {
        Routes {
            cfg,
            table: Vec::new(),
            #[cfg(test)]
            probe: false,
        }
    }

    /// The underlying configuration, for what is not a route (extractor settings).
    pub fn config(&mut self) -> &mut web::ServiceConfig {
        self.cfg
    }

    /// The routes registered so far, in registration order (actix's matching order).
    pub fn into_table(self) -> Vec<RouteDef> {
        self.table
    }

    /// `GET pattern`.
    pub fn get<F, Args>(&mut self, pattern: &'static str, access: Access, handler: F) -> &mut Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::GET, pattern, access, handler)
    }

    /// `POST pattern`.
    pub fn post<F, Args>(&mut self, pattern: &'static str, access: Access, handler: F) -> &mut Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::POST, pattern, access, handler)
    }

    /// `PUT pattern`.
    pub fn put<F, Args>(&mut self, pattern: &'static str, access: Access, handler: F) -> &mut Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::PUT, pattern, access, handler)
    }

    /// `DELETE pattern`.
    pub fn delete<F, Args>(
        &mut self,
        pattern: &'static str,
        access: Access,
        handler: F,
    ) -> &mut Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.add(Method::DELETE, pattern, access, handler)
    }

    fn add<F, Args>(
        &mut self,
        method: Method,
        pattern: &'static str,
        access: Access,
        handler: F,
    ) -> &mut Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.table.push(RouteDef {
            method: method.clone(),
            pattern,
            access,
        });
        let route = web::method(method.clone());
        #[cfg(test)]
        let route = if self.probe {
            let _ = handler;
            route.to(probe::reached)
        } else {
            route.to(handler)
        };
        #[cfg(not(test))]
        let route = route.to(handler);
        let res = web::resource(pattern)
            .guard(guard::Method(method))
            .app_data(access);
        #[cfg(test)]
        let res = if self.probe {
            res.app_data(probe::Pattern(pattern))
        } else {
            res
        };
        let res = res.route(route);
        match access {
            Access::Public => {
                self.cfg.service(res);
            }
            Access::Needs(need) => {
                self.cfg
                    .service(res.wrap_fn(move |req: ServiceRequest, srv| {
                        match super::auth::scope_refusal(req.request(), need) {
                            Some(e) => Either::Left(ready(Ok(req.error_response(e)))),
                            None => Either::Right(srv.call(req)),
                        }
                    }));
            }
        }
        self
    }
}

/// The route table: every route [`super::configure`] registers, in matching order.
pub fn table() -> Vec<RouteDef> {
    let mut out = Vec::new();
    let _ = actix_web::App::new().configure(|cfg| {
        let mut r = Routes::new(cfg);
        super::register(&mut r);
        out = r.into_table();
    });
    out
}

#[cfg(test)]
pub(crate) mod probe {
    //! The same routes (patterns, guards, access, middleware, order) with every handler
    //! replaced by one that answers which route it is: the route walk's way to see which
    //! handler a request reached, without running what the real one does (board changes).

    use super::super::auth::Auth;
    use actix_web::{HttpRequest, HttpResponse};

    /// Answers 200 "METHOD pattern" (the [`Auth`] extractor runs first, as in the real
    /// handlers, which take it; public routes have none of their own but must not fail here).
    pub(crate) async fn reached(req: HttpRequest) -> HttpResponse {
        use actix_web::FromRequest;
        let public = matches!(req.app_data::<super::Access>(), Some(super::Access::Public));
        if !public {
            if let Err(e) = Auth::extract(&req).await {
                return actix_web::ResponseError::error_response(&e);
            }
        }
        // The pattern of the resource that matched: its access data says which route it is.
        HttpResponse::Ok().body(format!(
            "{} {}",
            req.method(),
            req.app_data::<Pattern>().map(|p| p.0).unwrap_or("?")
        ))
    }

    /// The pattern a probe resource was registered with (resource data).
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Pattern(pub &'static str);

    /// Every route, each answering [`reached`].
    pub(crate) fn configure(cfg: &mut actix_web::web::ServiceConfig) {
        let mut r = super::Routes::new(cfg);
        r.probe = true;
        super::super::register(&mut r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::secrets::sha256_hex;
    use crate::web::auth::{AuthError, CAPTURE_NEEDS_ADMIN};
    use crate::web::AppState;
    use actix_web::{dev::ServiceResponse, test as at, App};
    use std::collections::{BTreeSet, HashMap};
    use std::sync::Arc;

    /// The three API tokens of the walk, one per scope.
    const TOKENS: [(Scope, &str); 3] = [
        (Scope::Read, "read-token-0123456789abcdef"),
        (Scope::Run, "run-token-0123456789abcdef"),
        (Scope::Admin, "admin-token-0123456789abcdef"),
    ];
    const SESSION: &str = "session-cookie-0123456789abcdef";
    const CSRF: &str = "csrf-0123456789";

    /// A real store with the three tokens and one admin session, and the app state over it.
    fn state() -> actix_web::web::Data<AppState> {
        let d = crate::scratch::dir("routes");
        let store = Arc::new(crate::store::Store::open_dir(&d).expect("store"));
        for (s, t) in TOKENS {
            store
                .create_token(s.as_str(), &sha256_hex(t), s.as_str())
                .expect("token");
        }
        store
            .create_session(&sha256_hex(SESSION), CSRF, 3_600_000)
            .expect("session");
        let runs = crate::runs::context::RunContext::new(store.clone());
        let config = crate::config::Config {
            data_dir: d,
            ..Default::default()
        };
        actix_web::web::Data::new(AppState::new(store, runs, config))
    }

    /// The scope rule before routes declared it (`Scope::needed` on the path, removed in
    /// issue 37): the table must keep what each route needed for its plain path.
    fn old_rule(method: &Method, path: &str) -> Scope {
        if path == "/diag" || path.starts_with("/diag/") || path.starts_with("/api/diag/") {
            return Scope::Admin;
        }
        if method == Method::GET || method == Method::HEAD {
            return Scope::Read;
        }
        if method != Method::POST {
            return Scope::Admin;
        }
        let seg: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        let run = matches!(
            seg.as_slice(),
            ["", "api", "runs"]
                | ["", "api", "runs", "latency" | "multi" | "rfc2544"]
                | ["", "api", "suites", "udp-ladder"]
                | ["", "api", "http-get" | "monitor" | "forward"]
                | ["", "api", "runs" | "suites" | "monitor", _, "stop"]
                | ["", "api", "suite-defs", _, "run"]
        );
        if run {
            Scope::Run
        } else {
            Scope::Admin
        }
    }

    /// A path the pattern matches: each `{name}` (or `{name:regex}`) filled in.
    fn concrete(pattern: &str) -> String {
        let mut out = String::new();
        let mut rest = pattern;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let j = rest[i..].find('}').expect("closing brace") + i;
            let name = rest[i + 1..j].split(':').next().unwrap_or("");
            out.push_str(match name {
                "id" => "1",
                "key" => "k1",
                "port" => "eth0",
                "addr" => "10.0.0.1",
                "prefix" => "24",
                "file" => "app.js",
                other => panic!("no value for {{{other}}} in {pattern}"),
            });
            rest = &rest[j + 1..];
        }
        out.push_str(rest);
        out
    }

    fn enc(c: u8, upper: bool) -> String {
        if upper {
            format!("%{c:02X}")
        } else {
            format!("%{c:02x}")
        }
    }

    /// Other spellings of `path`: each character as `%xx` (lower- and upper-case hex), each
    /// segment and the whole path encoded, `//`, `/./`, `/x/../` and `%2F` at each slash, a
    /// trailing `/` and `/.`.
    fn spellings(path: &str) -> BTreeSet<String> {
        let mut v = BTreeSet::new();
        v.insert(path.to_string());
        let b = path.as_bytes();
        for (i, &c) in b.iter().enumerate() {
            if c != b'/' {
                for up in [false, true] {
                    v.insert(format!("{}{}{}", &path[..i], enc(c, up), &path[i + 1..]));
                }
            }
        }
        let segs: Vec<&str> = path.split('/').collect();
        for up in [false, true] {
            let all: Vec<String> = segs
                .iter()
                .map(|s| s.bytes().map(|c| enc(c, up)).collect())
                .collect();
            v.insert(all.join("/"));
            for i in 1..segs.len() {
                let mut one: Vec<String> = segs.iter().map(|s| s.to_string()).collect();
                one[i] = all[i].clone();
                v.insert(one.join("/"));
            }
        }
        for (i, _) in path.match_indices('/') {
            let (a, z) = (&path[..i], &path[i + 1..]);
            v.insert(format!("{a}//{z}"));
            v.insert(format!("{a}/./{z}"));
            v.insert(format!("{a}/x/../{z}"));
            if i > 0 {
                v.insert(format!("{a}%2F{z}"));
                v.insert(format!("{a}%2f{z}"));
            }
        }
        v.insert(format!("{path}/"));
        v.insert(format!("{path}/."));
        v
    }

    /// `method uri` with `Authorization: Bearer token` to `app`: status and body.
    macro_rules! call {
        ($app:expr, $method:expr, $uri:expr, $token:expr) => {{
            let req = at::TestRequest::default()
                .method($method.clone())
                .uri($uri)
                .insert_header(("Authorization", format!("Bearer {}", $token)))
                .to_request();
            let r = at::call_service($app, req).await;
            let status = r.status().as_u16();
            let body = at::read_body(r).await;
            (status, String::from_utf8_lossy(&body).into_owned())
        }};
    }

    fn scope_error(have: Scope, need: Scope) -> String {
        serde_json::json!({ "error": AuthError::Scope { have, need }.to_string() }).to_string()
    }

    #[test]
    fn the_table_keeps_each_routes_scope_and_names_the_public_routes() {
        let t = table();
        assert_eq!(t.len(), 137, "routes registered");
        let mut seen = BTreeSet::new();
        for r in &t {
            assert!(
                seen.insert((r.method.to_string(), r.pattern)),
                "{} {} registered twice",
                r.method,
                r.pattern
            );
            if r.access != PUBLIC {
                assert_eq!(
                    r.access.scope(),
                    old_rule(&r.method, &concrete(r.pattern)),
                    "{} {}",
                    r.method,
                    r.pattern
                );
            }
        }
        let public: Vec<String> = t
            .iter()
            .filter(|r| r.access == PUBLIC)
            .map(|r| format!("{} {}", r.method, r.pattern))
            .collect();
        assert_eq!(
            public,
            [
                "GET /login",
                "POST /login",
                "GET /setup",
                "POST /setup",
                "GET /api/health",
                "GET /static/{file:.+}"
            ]
        );
        let n = |a: Access| t.iter().filter(|r| r.access == a).count();
        assert_eq!((n(READ), n(RUN), n(ADMIN)), (46, 12, 73));
        // "/diag": 4 letters as %xx (their hex has no a–f: one case), the segment encoded,
        // "//", "/./", "/x/../", a trailing "/" and "/.", and the path itself.
        assert_eq!(spellings("/diag").len(), 11, "{:?}", spellings("/diag"));
        let logs = spellings("/api/diag/logs");
        for v in [
            "/api/diag/%6cogs",
            "/api/diag/%6Cogs",
            "/api%2Fdiag/logs",
            "/%61pi/diag/logs",
        ] {
            assert!(logs.contains(v), "{v}");
        }
    }

    /// Every registered route × every token scope × every spelling of its path, through the
    /// real app (`web::configure`, a real store with three tokens) and through the same
    /// routes with probe handlers (which say which route a request reached): a token below
    /// a route's scope gets 403 with the scope message or 404 (no route), never a handler
    /// above its scope; a token with the scope reaches its route.
    #[actix_web::test]
    async fn no_spelling_of_a_path_takes_a_token_past_its_routes_scope() {
        let st = state();
        let real = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let probe =
            at::init_service(App::new().app_data(st.clone()).configure(probe::configure)).await;
        let t = table();
        let need: HashMap<String, Scope> = t
            .iter()
            .map(|r| (format!("{} {}", r.method, r.pattern), r.access.scope()))
            .collect();
        let (mut probed, mut refused_real, mut reached) = (0usize, 0usize, 0usize);
        for r in t.iter().filter(|r| r.access != PUBLIC) {
            let path = concrete(r.pattern);
            let me = format!("{} {}", r.method, r.pattern);
            for v in spellings(&path) {
                if v.parse::<actix_web::http::Uri>().is_err() {
                    continue;
                }
                for (have, tok) in TOKENS {
                    let (status, body) = call!(&probe, &r.method, &v, tok);
                    probed += 1;
                    let what = format!("{me} as {} {v} with a {} token", r.method, have.as_str());
                    match status {
                        200 => {
                            let at = need.get(&body).copied();
                            assert!(at.is_some_and(|n| have >= n), "{what} reached {body}");
                            if v == path {
                                assert_eq!(body, me, "{what}");
                            }
                            reached += 1;
                            continue;
                        }
                        403 => assert!(
                            [Scope::Run, Scope::Admin]
                                .iter()
                                .any(|n| have < *n && body == scope_error(have, *n)),
                            "{what}: {body}"
                        ),
                        404 => assert_ne!(v, path, "{what}"),
                        s => panic!("{what}: {s} {body}"),
                    }
                    if v == path {
                        assert!(have < r.access.scope(), "{what} refused: {body}");
                        assert_eq!(body, scope_error(have, r.access.scope()), "{what}");
                    }
                    // Refused by the probe app: the real app refuses the same way (its
                    // handlers never run for it).
                    let got = call!(&real, &r.method, &v, tok);
                    assert_eq!(got, (status, body), "real app: {what}");
                    refused_real += 1;
                }
            }
        }
        eprintln!(
            "{probed} probe requests, {reached} reached, {refused_real} refused by the real app"
        );
        assert!(
            probed > 12_000 && refused_real > 7_000,
            "{probed} {refused_real}"
        );
    }

    #[actix_web::test]
    async fn the_spellings_of_the_review_are_refused_to_a_read_token() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let read = TOKENS[0].1;
        for uri in [
            "/api/%64iag/logs",
            "/api/di%61g/logs.txt",
            "/%61pi/diag/journal.txt",
            "/%64iag",
            "/api/diag/%72outes",
            "/api/diag/capture/1/%70cap",
        ] {
            let got = call!(&app, &Method::GET, uri, read);
            assert_eq!(
                got,
                (403, scope_error(Scope::Read, Scope::Admin)),
                "GET {uri}"
            );
        }
        // The admin token still reads them, spelled either way.
        let (s, body) = call!(&app, &Method::GET, "/api/%64iag/logs", TOKENS[2].1);
        assert_eq!(s, 200, "{body}");
        assert!(body.starts_with("{\"lines\":"), "{body}");
    }

    /// Issue 40: an API route spelled with escapes (`/%61pi/runs`) answers with the API's JSON
    /// errors, as `/api/runs` does: 401 without credentials (it was the login redirect, chosen
    /// by the raw path), 403 for a read token on an admin route, 400 for a bad path segment.
    /// A page still redirects to the login.
    #[actix_web::test]
    async fn an_escaped_api_path_gets_the_apis_json_errors() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let anonymous = |uri: &'static str| at::TestRequest::get().uri(uri).to_request();
        let want_401 = serde_json::json!({
            "error": "authentication required: log in or send 'Authorization: Bearer <token>'"
        })
        .to_string();
        for uri in ["/api/runs", "/%61pi/runs", "/%61%70%69/runs"] {
            let r = at::call_service(&app, anonymous(uri)).await;
            assert_eq!(r.status(), 401, "{uri}");
            assert_eq!(
                r.headers().get("content-type").map(|v| v.as_bytes()),
                Some(&b"application/json"[..]),
                "{uri}"
            );
            assert_eq!(at::read_body(r).await, want_401, "{uri}");
        }
        let r = at::call_service(&app, anonymous("/runs")).await;
        assert_eq!(r.status(), 303);
        assert_eq!(
            r.headers().get("location").map(|v| v.as_bytes()),
            Some(&b"/setup"[..])
        );
        let read = TOKENS[0].1;
        for uri in ["/api/runs/1", "/%61pi/runs/1"] {
            let got = call!(&app, &Method::DELETE, uri, read);
            assert_eq!(got, (403, scope_error(Scope::Read, Scope::Admin)), "{uri}");
        }
        let plain = call!(&app, &Method::GET, "/api/runs/many", read);
        assert_eq!(plain.0, 400);
        assert!(
            plain.1.starts_with("{\"error\":\"invalid path: "),
            "{}",
            plain.1
        );
        let escaped = call!(&app, &Method::GET, "/%61pi/runs/many", read);
        assert_eq!(escaped, plain);
    }

    /// Issue 40: the API writes' prologue (`extract::ApiWrite`) answers as the handlers did: a
    /// session without the CSRF header 403 before its body is read, a body that does not parse
    /// 400 with serde's reason, a route without a body never reads one.
    #[actix_web::test]
    async fn api_writes_check_csrf_then_parse_the_body() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let cookie = actix_web::cookie::Cookie::new(crate::web::auth::SESSION_COOKIE, SESSION);
        let post = |uri: &str, csrf: bool, body: &'static str| {
            let mut r = at::TestRequest::post()
                .uri(uri)
                .cookie(cookie.clone())
                .insert_header(("content-type", "application/json"))
                .set_payload(body);
            if csrf {
                r = r.insert_header(("X-CSRF-Token", CSRF));
            }
            r.to_request()
        };
        let answer = |r: ServiceResponse| async move {
            let s = r.status().as_u16();
            (
                s,
                String::from_utf8_lossy(&at::read_body(r).await).into_owned(),
            )
        };
        let csrf = serde_json::json!({"error": "missing or invalid CSRF token"}).to_string();
        let got = answer(at::call_service(&app, post("/api/schedules", false, "{")).await).await;
        assert_eq!(got, (403, csrf.clone()));
        let got = answer(at::call_service(&app, post("/api/schedules", true, "{")).await).await;
        let want = serde_json::json!({
            "error": "invalid request body: EOF while parsing an object at line 1 column 1"
        });
        assert_eq!(got, (400, want.to_string()));
        // The board's own shape: its kind beside the error.
        let got = answer(at::call_service(&app, post("/api/board/changes", true, "[")).await).await;
        assert_eq!(got.0, 400, "{}", got.1);
        let v: serde_json::Value = serde_json::from_str(&got.1).expect("json");
        assert_eq!(v["kind"], "invalid", "{v}");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("invalid request body: ")),
            "{v}"
        );
        // No body: stop answers from the run registry.
        let got = answer(at::call_service(&app, post("/api/runs/999/stop", false, "")).await).await;
        assert_eq!(got, (403, csrf));
        let got = answer(at::call_service(&app, post("/api/runs/999/stop", true, "")).await).await;
        let want = serde_json::json!({"error": "only a running test started from this board can be stopped"});
        assert_eq!(got, (409, want.to_string()));
    }

    /// A logged-in session is not a token: it reaches admin routes (any spelling) and its
    /// writes still need the CSRF token.
    #[actix_web::test]
    async fn a_session_still_reaches_admin_routes() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let cookie = actix_web::cookie::Cookie::new(crate::web::auth::SESSION_COOKIE, SESSION);
        for uri in ["/api/diag/logs", "/api/%64iag/logs"] {
            let req = at::TestRequest::get()
                .uri(uri)
                .cookie(cookie.clone())
                .to_request();
            let r = at::call_service(&app, req).await;
            assert_eq!(r.status(), 200, "{uri}");
        }
        let pin = |csrf: Option<&str>| {
            let mut r = at::TestRequest::post()
                .uri("/api/runs/999/pin")
                .cookie(cookie.clone())
                .set_json(serde_json::json!({"pinned": true}));
            if let Some(c) = csrf {
                r = r.insert_header(("X-CSRF-Token", c));
            }
            r.to_request()
        };
        let r = at::call_service(&app, pin(Some(CSRF))).await;
        assert_eq!(r.status(), 404);
        assert_eq!(
            at::read_body(r).await,
            serde_json::json!({"error": "no run 999"}).to_string()
        );
        let r = at::call_service(&app, pin(None)).await;
        assert_eq!(r.status(), 403);
    }

    /// Blocker 2: a run-tests token asking `POST /api/runs` for a capture gets 403 and why;
    /// an admin token and a session get past that check (to the test's own validation here).
    #[actix_web::test]
    async fn a_run_token_cannot_start_a_capture_with_a_run() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let body = serde_json::json!({"host": "", "capture": {"port": "lo", "seconds": 1}});
        let post = |tok: Option<&str>| {
            let mut r = at::TestRequest::post().uri("/api/runs").set_json(&body);
            r = match tok {
                Some(t) => r.insert_header(("Authorization", format!("Bearer {t}"))),
                None => r
                    .cookie(actix_web::cookie::Cookie::new(
                        crate::web::auth::SESSION_COOKIE,
                        SESSION,
                    ))
                    .insert_header(("X-CSRF-Token", CSRF)),
            };
            r.to_request()
        };
        let answer = |r: ServiceResponse| async move {
            let s = r.status().as_u16();
            let b: serde_json::Value =
                serde_json::from_slice(&at::read_body(r).await).expect("json");
            (s, b["error"].as_str().unwrap_or("").to_string())
        };
        let run = answer(at::call_service(&app, post(Some(TOKENS[1].1))).await).await;
        assert_eq!(run, (403, CAPTURE_NEEDS_ADMIN.to_string()));
        let admin = answer(at::call_service(&app, post(Some(TOKENS[2].1))).await).await;
        let session = answer(at::call_service(&app, post(None)).await).await;
        assert_eq!(
            admin,
            (400, "peer '' is not a host name or IP address".to_string())
        );
        assert_eq!(admin, session);
        assert!(!admin.1.contains("capture"), "{admin:?}");
        // Without a capture the run token gets the same answer as the admin.
        let mut plain = body.clone();
        plain.as_object_mut().map(|m| m.remove("capture"));
        let req = at::TestRequest::post()
            .uri("/api/runs")
            .set_json(&plain)
            .insert_header(("Authorization", format!("Bearer {}", TOKENS[1].1)))
            .to_request();
        assert_eq!(answer(at::call_service(&app, req).await).await, admin);
    }

    /// Issue 37 (18b): an admin token's retention PUT is refused with a sentence about
    /// retention (it named managing tokens and the password).
    #[actix_web::test]
    async fn a_tokens_retention_put_says_why_without_naming_tokens() {
        let st = state();
        let app = at::init_service(
            App::new()
                .app_data(st.clone())
                .configure(crate::web::configure),
        )
        .await;
        let req = at::TestRequest::put()
            .uri("/api/settings/retention")
            .insert_header(("Authorization", format!("Bearer {}", TOKENS[2].1)))
            .set_json(serde_json::json!({"max_runs": 100, "max_bytes": 1u64 << 20}))
            .to_request();
        let r = at::call_service(&app, req).await;
        assert_eq!(r.status(), 403);
        let body = String::from_utf8_lossy(&at::read_body(r).await).into_owned();
        assert_eq!(
            body,
            serde_json::json!({"error": "history retention is set by a logged-in admin only (lowering it deletes runs at once): log in"})
                .to_string()
        );
        assert!(!body.contains("token"), "{body}");
    }
}
