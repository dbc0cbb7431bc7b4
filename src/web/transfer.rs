//! History between boards in the web UI and API: `GET /api/export` (this board's ended runs,
//! suite runs and suite definitions as one history file, see `docs/history-file.md`),
//! `POST /api/import` (such a file as the request body; one transaction: all or nothing),
//! and the `/transfer` page (download link, file upload through `static/transfer.js`).

use super::auth::{Auth, AuthError};
use super::extract::ApiWrite;
use super::respond::html;
use super::respond::json_error;
use super::routes::{Routes, ADMIN, READ};
use super::AppState;
use crate::engine::report::version_string;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use futures_util::StreamExt;
use std::io::Write;

/// An upload being received: a file `import-<pid>-<n>.part` beside the database, removed
/// when dropped (also when the client goes away mid-upload).
/// Whether `name` is an import spool file (`import-PID-N.part`); its PID.
fn spool_pid(name: &str) -> Option<u32> {
    name.strip_prefix("import-")
        .and_then(|r| r.strip_suffix(".part"))
        .and_then(|r| r.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
}

/// Remove the import spool files (`import-PID-N.part` beside the database) a previous daemon
/// left when it stopped mid-import: how many, and their bytes. Called once at start, before
/// the store is opened (on a full disk they are part of what frees it).
pub(crate) fn remove_stale_spools(data_dir: &std::path::Path) -> (usize, u64) {
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir(data_dir) else {
        return (0, 0);
    };
    let mut n = 0;
    let mut bytes = 0u64;
    for e in rd.flatten() {
        let name = e.file_name();
        if spool_pid(&name.to_string_lossy()).is_none_or(|pid| pid == me) {
            continue;
        }
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        if std::fs::remove_file(e.path()).is_ok() {
            n += 1;
            bytes = bytes.saturating_add(len);
        }
    }
    (n, bytes)
}

struct Spool {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Spool {
    fn create(db: &std::path::Path) -> std::io::Result<Spool> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = db.parent().unwrap_or(std::path::Path::new("."));
        let me = std::process::id();
        // Uploads a previous process left (it stopped mid-import) are removed (the daemon
        // removes them at start too).
        remove_stale_spools(dir);
        let path = dir.join(format!("import-{me}-{n}.part"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Spool { path, file })
    }

    fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// The upload from its start (buffered).
    fn reopen(&self) -> std::io::Result<impl std::io::Read + '_> {
        use std::io::Seek;
        let mut f = &self.file;
        f.seek(std::io::SeekFrom::Start(0))?;
        Ok(std::io::BufReader::with_capacity(256 * 1024, f))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Register the routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/transfer", READ, page)
        .get("/api/export", READ, export)
        .post("/api/import", ADMIN, import);
}

#[derive(Template)]
#[template(path = "transfer.html")]
struct Page {
    nav: bool,
    csrf: String,
    version: String,
    board_id: String,
    board: String,
    max_mib: String,
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(
        StatusCode::OK,
        &Page {
            nav: true,
            csrf: auth.csrf().into(),
            version: version_string(),
            board_id: state.store.board_id().unwrap_or_default(),
            board: crate::runs::suites::run::board_label(),
            max_mib: format!("{:.0}", state.config.import_max_bytes as f64 / 1048576.0),
        },
    )
}

/// The history file, streamed (one row at a time from the store: memory stays bounded
/// whatever the history's size).
async fn export(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    let label = crate::runs::suites::run::board_label();
    let name = format!(
        "netperfd-history-{}-{}.json",
        label
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>(),
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    );
    let b = super::respond::download_head("application/json", &name);
    let st = state.clone();
    super::stream::streamed(b, "history export", move |w| {
        st.store
            .export_history_to(w, &label)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

async fn import(
    _: ApiWrite,
    state: web::Data<AppState>,
    mut body: web::Payload,
) -> Result<HttpResponse, AuthError> {
    let max = state.config.import_max_bytes;
    let too_big = || {
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the history file is larger than {max} bytes (import_max_bytes); nothing was imported"),
        )
    };
    // The body is spooled to a file beside the database (memory stays bounded whatever
    // its size) and imported from there as a stream once complete, so that the writer is not
    // held while a slow client uploads. A file over the limit is read to its end (up to 4 x
    // the limit, then the connection is dropped) but not kept, so that the client reads the
    // 413 instead of a broken pipe.
    let spool = match Spool::create(state.store.path()) {
        Ok(s) => s,
        Err(e) => {
            return Ok(json_error(
                StatusCode::INSUFFICIENT_STORAGE,
                format!("cannot store the upload: {e}; nothing was imported"),
            ))
        }
    };
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, spool.file());
    let mut total = 0usize;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(c) => {
                total = total.saturating_add(c.len());
                if total > max.saturating_mul(4) {
                    return Ok(too_big());
                }
                if total <= max {
                    if let Err(e) = out.write_all(&c) {
                        return Ok(json_error(
                            StatusCode::INSUFFICIENT_STORAGE,
                            format!("cannot store the upload: {e}; nothing was imported"),
                        ));
                    }
                }
            }
            Err(e) => {
                return Ok(json_error(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {e}"),
                ))
            }
        }
    }
    if total > max {
        return Ok(too_big());
    }
    if total == 0 {
        return Ok(json_error(
            StatusCode::BAD_REQUEST,
            "the request body is empty: send a history file (GET /api/export makes one)",
        ));
    }
    if let Err(e) = out.flush() {
        return Ok(json_error(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("cannot store the upload: {e}; nothing was imported"),
        ));
    }
    drop(out);
    let st = state.clone();
    let r = web::block(move || {
        let f = spool.reopen().map_err(|e| {
            crate::store::StoreError::Import(format!("cannot read the stored upload: {e}"))
        })?;
        st.store.import_history_from(f, max as u64)
    })
    .await;
    Ok(match r {
        Ok(Ok(sum)) => {
            tracing::info!(
                from = %sum.board_label,
                runs_added = sum.runs_added,
                runs_present = sum.runs_present,
                "history imported"
            );
            HttpResponse::Ok().json(sum)
        }
        Ok(Err(crate::store::StoreError::Import(e))) => json_error(
            StatusCode::BAD_REQUEST,
            format!("{e}; nothing was imported"),
        ),
        Ok(Err(e)) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{e}; nothing was imported"),
        ),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37 item 16: the daemon's start removes every import spool a dead process left
    /// (and only spool files); this process's own stay.
    #[test]
    fn stale_spools_are_removed_at_start() {
        let d = crate::scratch::dir("spools");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("import-999999-0.part"), vec![0u8; 5000]).unwrap();
        std::fs::write(d.join("import-999998-3.part"), vec![0u8; 1000]).unwrap();
        let mine = format!("import-{}-0.part", std::process::id());
        std::fs::write(d.join(&mine), b"x").unwrap();
        std::fs::write(d.join("netperfd.sqlite"), b"db").unwrap();
        std::fs::write(d.join("import-notes.part"), b"n").unwrap();
        assert_eq!(remove_stale_spools(&d), (2, 6000));
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        crate::model::order::sort(&mut left);
        let mut want = vec![
            "import-notes.part".to_string(),
            mine,
            "netperfd.sqlite".into(),
        ];
        crate::model::order::sort(&mut want);
        assert_eq!(left, want);
        let _ = std::fs::remove_dir_all(&d);
    }
}
