//! The web UI's static files under `/static/`: scripts, style sheets and the vendored uPlot
//! chart library, gzip-compressed at build time (`build.rs`).
//!
//! A client that accepts gzip (`Accept-Encoding: gzip`, as every browser sends) gets the
//! compressed bytes with `Content-Encoding: gzip`: 35 KB on the wire for the 84 KB of files. Any
//! other client (`curl` without `--compressed`, a script) gets the plain file, inflated on
//! the spot, so nobody is handed bytes they did not ask for. Both answers carry
//! `Vary: Accept-Encoding`. Carrying the files compressed also keeps 50 KB out of the binary
//! (docs/build-settings.md).

use super::routes::{Routes, PUBLIC};
use actix_web::http::header::{self, AcceptEncoding, Encoding, Header, Preference, Quality};
use actix_web::{web, HttpRequest, HttpResponse};

/// One file under `/static/`.
struct Asset {
    /// Path below `/static/`, e.g. `vendor/uPlot.min.css`.
    name: &'static str,
    content_type: &'static str,
    /// Browsers may keep it for an hour (`Cache-Control: max-age=3600`).
    cached: bool,
    /// The file, gzip-compressed (RFC 1952) by `build.rs`.
    gz: &'static [u8],
}

const JS: &str = "application/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

macro_rules! asset {
    ($name:literal, $ct:expr, $cached:expr) => {
        Asset {
            name: $name,
            content_type: $ct,
            cached: $cached,
            gz: include_bytes!(concat!(env!("OUT_DIR"), "/static/", $name, ".gz")),
        }
    };
}

/// Every static file the pages use (`build.rs` gzips every `.js` and `.css` of `static/`).
const ASSETS: &[Asset] = &[
    asset!("style.css", CSS, true),
    asset!("app.js", JS, true),
    asset!("units.js", JS, false),
    asset!("forms.js", JS, false),
    asset!("refresh.js", JS, false),
    asset!("board.js", JS, true),
    asset!("charts.js", JS, true),
    asset!("transfer.js", JS, false),
    asset!("vendor/uPlot.iife.min.js", JS, true),
    asset!("vendor/uPlot.min.css", CSS, true),
];

/// Register `GET /static/{file}`.
pub(super) fn configure(r: &mut Routes) {
    r.get("/static/{file:.+}", PUBLIC, serve);
}

async fn serve(req: HttpRequest, file: web::Path<String>) -> HttpResponse {
    // The requested name is not echoed back: it is whatever the client put in the URL.
    let Some(a) = ASSETS.iter().find(|a| a.name == file.as_str()) else {
        return HttpResponse::NotFound()
            .content_type("text/plain; charset=utf-8")
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .body("no such static file");
    };
    let mut r = HttpResponse::Ok();
    r.content_type(a.content_type)
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::VARY, "Accept-Encoding"));
    if a.cached {
        r.insert_header((header::CACHE_CONTROL, "max-age=3600"));
    }
    if accepts_gzip(&req) {
        return r
            .insert_header((header::CONTENT_ENCODING, "gzip"))
            .body(a.gz);
    }
    match gunzip(a.gz) {
        Some(plain) => r.body(plain),
        None => HttpResponse::InternalServerError().body("a static file is damaged"),
    }
}

/// Whether the request's `Accept-Encoding` admits gzip (RFC 9110 §12.5.3): `gzip` or `*` with
/// a quality above 0, and `gzip` not refused with `q=0`. No header, an empty one or one that
/// cannot be read: no.
fn accepts_gzip(req: &HttpRequest) -> bool {
    let Ok(ae) = AcceptEncoding::parse(req) else {
        return false;
    };
    let gzip = Preference::Specific(Encoding::gzip());
    let mut any = false;
    for q in &ae.0 {
        if q.item == gzip {
            return q.quality > Quality::ZERO;
        }
        any |= q.item == Preference::Any && q.quality > Quality::ZERO;
    }
    any
}

/// The file inside a gzip member as `build.rs` writes it: a 10-byte header without optional
/// fields, the DEFLATE data (RFC 1951), then CRC-32 and length. `None` if it is not that.
fn gunzip(gz: &[u8]) -> Option<Vec<u8>> {
    if gz.len() < 18 || gz[..4] != [0x1f, 0x8b, 8, 0] {
        return None;
    }
    let (body, trailer) = gz[10..].split_at(gz.len() - 18);
    let size = u32::from_le_bytes(trailer[4..8].try_into().ok()?) as usize;
    let plain = miniz_oxide::inflate::decompress_to_vec_with_limit(body, size).ok()?;
    (plain.len() == size).then_some(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn source(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("static")
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn every_file_inflates_to_its_source() {
        for a in ASSETS {
            let plain = gunzip(a.gz).unwrap_or_else(|| panic!("{}: not a gzip member", a.name));
            assert_eq!(plain, source(a.name), "{}", a.name);
            assert!(
                a.gz.len() < plain.len(),
                "{}: gzip did not shrink it",
                a.name
            );
        }
        let all: usize = ASSETS.iter().map(|a| source(a.name).len()).sum();
        let gz: usize = ASSETS.iter().map(|a| a.gz.len()).sum();
        assert!(gz * 2 < all, "{gz} B compressed of {all} B");
    }

    #[test]
    fn every_file_in_static_is_served() {
        let mut on_disk = Vec::new();
        for dir in ["", "vendor/"] {
            let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("static")
                .join(dir);
            for e in std::fs::read_dir(&d).expect("static/") {
                let n = e.expect("entry").file_name().to_string_lossy().to_string();
                if n.ends_with(".js") || n.ends_with(".css") {
                    on_disk.push(format!("{dir}{n}"));
                }
            }
        }
        crate::model::order::sort(&mut on_disk);
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        crate::model::order::sort(&mut served);
        assert_eq!(served, on_disk);
    }

    #[test]
    fn a_damaged_member_is_refused() {
        let gz = ASSETS[0].gz;
        assert!(gunzip(&gz[..gz.len() - 1]).is_none());
        let mut bad = gz.to_vec();
        let n = bad.len();
        bad[n - 4] ^= 1; // the length
        assert!(gunzip(&bad).is_none());
        assert!(gunzip(b"plain text, not gzip").is_none());
    }

    #[actix_web::test]
    async fn the_route_serves_known_files_and_nothing_else() {
        use actix_web::{test, App};
        let app = test::init_service(
            App::new().configure(|cfg| configure(&mut super::super::routes::Routes::new(cfg))),
        )
        .await;
        let get = |uri: &str, ae: Option<&str>| {
            let mut r = test::TestRequest::get().uri(uri);
            if let Some(v) = ae {
                r = r.insert_header(("Accept-Encoding", v));
            }
            r.to_request()
        };
        let r = test::call_service(&app, get("/static/vendor/uPlot.min.css", Some("gzip"))).await;
        assert_eq!(r.status(), 200);
        let h = |r: &actix_web::dev::ServiceResponse, n: &str| {
            r.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        assert_eq!(h(&r, "content-encoding").as_deref(), Some("gzip"));
        assert_eq!(h(&r, "content-type").as_deref(), Some(CSS));
        assert_eq!(h(&r, "x-content-type-options").as_deref(), Some("nosniff"));
        let body = test::read_body(r).await;
        assert_eq!(gunzip(&body), Some(source("vendor/uPlot.min.css")));
        let r = test::call_service(&app, get("/static/app.js", None)).await;
        assert_eq!(
            (h(&r, "content-encoding"), h(&r, "vary").as_deref()),
            (None, Some("Accept-Encoding"))
        );
        assert_eq!(test::read_body(r).await, source("app.js"));
        for bad in [
            "/static/nope.js",
            "/static/%3Cscript%3Ex%3C%2Fscript%3E.js",
            "/static/vendor/README",
        ] {
            let r = test::call_service(&app, get(bad, Some("gzip"))).await;
            assert_eq!(r.status(), 404, "{bad}");
            assert_eq!(h(&r, "x-content-type-options").as_deref(), Some("nosniff"));
            assert_eq!(test::read_body(r).await, "no such static file", "{bad}");
        }
    }

    #[test]
    fn gzip_only_for_clients_that_accept_it() {
        let with = |v: &str| {
            accepts_gzip(
                &TestRequest::default()
                    .insert_header(("Accept-Encoding", v))
                    .to_http_request(),
            )
        };
        assert!(with("gzip, deflate, br"));
        assert!(with("br;q=1.0, gzip;q=0.8"));
        assert!(with("*"));
        assert!(!with("gzip;q=0"));
        assert!(!with("gzip;q=0, *"));
        assert!(!with("identity"));
        assert!(!with("br, deflate"));
        assert!(!with(""));
        assert!(!accepts_gzip(&TestRequest::default().to_http_request()));
    }
}
