//! The read-only notice: when the daemon came up unable to write its history (a full data
//! partition; see `cmd::daemon`), every page says so at the top — what is full, what takes the
//! space and what can be deleted — until a write succeeds again (the daemon tries every
//! [`RETRY`]). Process-wide, like the log ring: one daemon, one data directory.

use crate::model::display;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How often the daemon tries the start-up writes again while read-only.
pub(crate) const RETRY: Duration = Duration::from_secs(10);

struct ReadOnly {
    data_dir: PathBuf,
    db: PathBuf,
    /// The store's error, e.g. "database or disk is full".
    reason: String,
}

static READ_ONLY: Mutex<Option<ReadOnly>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<ReadOnly>> {
    READ_ONLY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Say on every page that the history in `db` (under `data_dir`) cannot be written, and why.
pub(crate) fn set_read_only(data_dir: &Path, db: &Path, reason: &str) {
    *lock() = Some(ReadOnly {
        data_dir: data_dir.to_path_buf(),
        db: db.to_path_buf(),
        reason: reason.chars().take(300).collect(),
    });
}

/// The store can write again: the notice goes.
pub(crate) fn clear() {
    *lock() = None;
}

/// Whether the daemon is read-only now.
#[cfg(test)]
pub(crate) fn is_read_only() -> bool {
    lock().is_some()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// The notice every page shows while read-only (plain text, one paragraph), else `None`.
pub(crate) fn notice() -> Option<String> {
    let (data_dir, db, reason) = {
        let g = lock();
        let r = g.as_ref()?;
        (r.data_dir.clone(), r.db.clone(), r.reason.clone())
    };
    let mut s = String::from("Read-only: netperfd cannot write its history");
    s.push_str(&format!(" ({reason})"));
    match crate::board::diag::storage(&data_dir) {
        Ok(st) => s.push_str(&format!(
            ". The data partition holding {} is full: {} free of {}.",
            data_dir.display(),
            display::size(st.available_bytes as f64),
            display::size(st.total_bytes as f64)
        )),
        Err(_) => s.push_str(&format!(" in {}.", data_dir.display())),
    }
    let mut db_bytes = file_len(&db);
    for ext in ["-wal", "-shm"] {
        let mut p = db.clone().into_os_string();
        p.push(ext);
        db_bytes = db_bytes.saturating_add(file_len(Path::new(&p)));
    }
    s.push_str(&format!(
        " The history database takes {}",
        display::size(db_bytes as f64)
    ));
    let (n, cap_bytes) = super::diag::kept_capture_bytes();
    s.push_str(&format!(
        ", {n} packet capture(s) {}",
        display::size(cap_bytes as f64)
    ));
    // The largest other files at the top of the data directory (what else can go).
    let mut others: Vec<(String, u64)> = std::fs::read_dir(&data_dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| {
                    let n = e.file_name();
                    !n.to_string_lossy().starts_with("netperfd.sqlite")
                })
                .map(|e| {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    (
                        e.file_name().to_string_lossy().chars().take(60).collect(),
                        len,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    crate::model::order::sort_by_key(&mut others, |o| std::cmp::Reverse(o.1));
    others.truncate(3);
    if !others.is_empty() {
        let list: Vec<String> = others
            .iter()
            .map(|(n, b)| format!("{n} {}", display::size(*b as f64)))
            .collect();
        s.push_str(&format!("; other files there: {}", list.join(", ")));
    }
    s.push_str(
        ". Nothing new is stored until there is room: no runs, logins, settings or tokens. \
         Delete packet captures (Diagnostics, or DELETE /api/diag/capture/ID with an admin token) \
         or other files on that partition (old runs can be deleted on History once there is \
         room again); netperfd tries again every 10 s and this notice goes by itself.",
    );
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_says_what_is_full_and_what_can_go() {
        let dir = std::env::temp_dir().join(format!("npd-storage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("netperfd.sqlite"), vec![0u8; 3000]).unwrap();
        std::fs::write(dir.join("big.log"), vec![0u8; 5000]).unwrap();
        assert!(notice().is_none() || is_read_only());
        set_read_only(
            &dir,
            &dir.join("netperfd.sqlite"),
            "database or disk is full",
        );
        let n = notice().unwrap();
        clear();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            n.starts_with(
                "Read-only: netperfd cannot write its history (database or disk is full)"
            ),
            "{n}"
        );
        assert!(n.contains("The history database takes 0.003 MB"), "{n}");
        assert!(n.contains("other files there: big.log 0.005 MB"), "{n}");
        assert!(n.contains("Delete packet captures (Diagnostics"), "{n}");
        assert!(notice().is_none());
    }
}
