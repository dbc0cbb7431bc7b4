//! CPU frequency governor per core, read from and written to sysfs
//! (`/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor`), as seed 002 sets `performance`
//! before testing. The sysfs root can be moved (environment variable `NETPERFD_SYSFS_ROOT`,
//! e.g. to a directory a test made), because many machines have no cpufreq at all.
//! Not for: CPU usage (see the monitor) or anything network-related.

use super::error::BoardError;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Environment variable that replaces `/sys` for the governor files.
pub(crate) const SYSFS_ENV: &str = "NETPERFD_SYSFS_ROOT";

/// The sysfs root in use: `$NETPERFD_SYSFS_ROOT` or `/sys`.
pub(crate) fn sysfs_root() -> PathBuf {
    std::env::var_os(SYSFS_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"))
}

/// One core's frequency scaling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Core {
    /// CPU number (the N of cpuN).
    pub cpu: u32,
    /// Current governor, e.g. `performance`, `schedutil`, `ondemand`.
    pub governor: String,
    /// Governors the driver offers.
    pub available: Vec<String>,
    /// Current frequency in kHz (scaling_cur_freq), when readable.
    pub cur_khz: Option<u64>,
    /// Highest frequency in kHz (scaling_max_freq), when readable.
    pub max_khz: Option<u64>,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cpu_dirs(root: &Path) -> Vec<(u32, PathBuf)> {
    let base = root.join("devices/system/cpu");
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(&base)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let n: u32 = name.strip_prefix("cpu")?.parse().ok()?;
                    Some((n, e.path().join("cpufreq")))
                })
                .filter(|(_, p)| p.join("scaling_governor").exists())
                .collect()
        })
        .unwrap_or_default();
    crate::model::order::sort_by_key(&mut v, |(n, _)| *n);
    v
}

/// Every core that has cpufreq, in CPU order (empty when the kernel has no cpufreq).
pub(crate) fn read() -> Vec<Core> {
    read_at(&sysfs_root())
}

/// [`read`] under another sysfs root.
pub(crate) fn read_at(root: &Path) -> Vec<Core> {
    cpu_dirs(root)
        .into_iter()
        .filter_map(|(cpu, d)| {
            Some(Core {
                cpu,
                governor: read_trim(&d.join("scaling_governor"))?,
                available: read_trim(&d.join("scaling_available_governors"))
                    .map(|s| s.split_whitespace().map(String::from).collect())
                    .unwrap_or_default(),
                cur_khz: read_trim(&d.join("scaling_cur_freq")).and_then(|s| s.parse().ok()),
                max_khz: read_trim(&d.join("scaling_max_freq")).and_then(|s| s.parse().ok()),
            })
        })
        .collect()
}

/// Set `governor` on every core; validated first against each core's available governors,
/// so a bad name changes nothing. Returns the cores as they are afterwards.
pub(crate) fn set(governor: &str) -> Result<Vec<Core>, BoardError> {
    set_at(&sysfs_root(), governor)
}

/// [`set`] under another sysfs root.
pub(crate) fn set_at(root: &Path, governor: &str) -> Result<Vec<Core>, BoardError> {
    let g = governor.trim();
    let cores = read_at(root);
    if cores.is_empty() {
        return Err(BoardError::Invalid(
            "this board has no CPU frequency scaling (no cpufreq in sysfs)".into(),
        ));
    }
    if g.is_empty() || !g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(BoardError::Invalid(format!("'{g}' is not a governor name")));
    }
    for c in &cores {
        if !c.available.is_empty() && !c.available.iter().any(|a| a == g) {
            return Err(BoardError::Invalid(format!(
                "governor '{g}' is not available on cpu{} (available: {})",
                c.cpu,
                c.available.join(", ")
            )));
        }
    }
    for (cpu, d) in cpu_dirs(root) {
        let f = d.join("scaling_governor");
        std::fs::write(&f, format!("{g}\n")).map_err(|e| match write_denied(&f, &e) {
            Some(why) => {
                BoardError::ReadOnly(format!("cannot set the governor of cpu{cpu}: {why}"))
            }
            None => BoardError::System(format!("cannot set the governor of cpu{cpu}: {e}")),
        })?;
    }
    Ok(read_at(root))
}

/// The tmpfiles.d entry the Yocto recipe and the Buildroot package install (from
/// `systemd/netperfd-tmpfiles.conf`); it gives group `netperfd` write access to every
/// core's `scaling_governor` at boot, and again at each start of the unit (its
/// `ExecStartPre=`), for a cpufreq driver that loads after systemd-tmpfiles-setup.
pub(crate) const TMPFILES_CONF: &str = "/usr/lib/tmpfiles.d/netperfd.conf";

/// The user-facing reason when writing `file` failed with `e` for lack of access (EACCES,
/// EPERM or a read-only file system); `None` for other errors.
fn write_denied(file: &Path, e: &std::io::Error) -> Option<String> {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => Some(format!(
            "{} is not writable by netperfd ({e}); cpufreq files belong to root, and the image \
             must give group netperfd write access (the shipped {TMPFILES_CONF} does at boot \
             and at each start of netperfd.service: a cpufreq driver loaded later needs a \
             restart of netperfd), so the governor is read-only here",
            file.display()
        )),
        std::io::ErrorKind::ReadOnlyFilesystem => Some(format!(
            "{} is on a read-only file system ({e}), so the governor is read-only here",
            file.display()
        )),
        _ => None,
    }
}

/// Why this process cannot change the governor, or `None` when it can (or there is no
/// cpufreq). Opens the first core's `scaling_governor` for writing without writing to it
/// (sysfs acts only on a write), so nothing changes.
pub(crate) fn read_only_reason() -> Option<String> {
    read_only_reason_at(&sysfs_root())
}

/// [`read_only_reason`] under another sysfs root.
pub(crate) fn read_only_reason_at(root: &Path) -> Option<String> {
    let (_, d) = cpu_dirs(root).into_iter().next()?;
    let f = d.join("scaling_governor");
    match std::fs::OpenOptions::new().write(true).open(&f) {
        Ok(_) => None,
        Err(e) => write_denied(&f, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(cores: u32) -> PathBuf {
        let d = crate::scratch::dir("gov");
        for c in 0..cores {
            let f = d.join(format!("devices/system/cpu/cpu{c}/cpufreq"));
            std::fs::create_dir_all(&f).unwrap();
            std::fs::write(f.join("scaling_governor"), "schedutil\n").unwrap();
            std::fs::write(
                f.join("scaling_available_governors"),
                "performance schedutil powersave \n",
            )
            .unwrap();
            std::fs::write(f.join("scaling_cur_freq"), "1200000\n").unwrap();
        }
        std::fs::create_dir_all(d.join("devices/system/cpu/cpufreq")).unwrap();
        d
    }

    #[test]
    fn reads_and_sets_per_core() {
        let d = fake(2);
        let c = read_at(&d);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].cpu, 1);
        assert_eq!(c[0].governor, "schedutil");
        assert_eq!(
            c[0].available,
            vec!["performance", "schedutil", "powersave"]
        );
        assert_eq!(c[0].cur_khz, Some(1_200_000));
        let e = set_at(&d, "turbo").unwrap_err();
        assert!(e.to_string().contains("governor 'turbo' is not available on cpu0 (available: performance, schedutil, powersave)"), "{e}");
        assert!(set_at(&d, "../x").is_err());
        assert_eq!(read_only_reason_at(&d), None);
        assert_eq!(read_at(&d)[0].governor, "schedutil", "nothing changed");
        let after = set_at(&d, "performance").unwrap();
        assert!(after.iter().all(|c| c.governor == "performance"));
        let _ = std::fs::remove_dir_all(&d);
        assert!(set_at(&d, "performance")
            .unwrap_err()
            .to_string()
            .contains("no CPU frequency scaling"));
    }

    #[test]
    fn unwritable_governor_says_why() {
        use std::os::unix::fs::PermissionsExt;
        // Own scratch directory (fake() names by pid + ms, which a parallel test may share).
        let d = std::env::temp_dir().join(format!("netperfd-gov-ro-{}", std::process::id()));
        let c0 = d.join("devices/system/cpu/cpu0/cpufreq");
        std::fs::create_dir_all(&c0).unwrap();
        let f = c0.join("scaling_governor");
        std::fs::write(&f, "schedutil\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
        // root bypasses file modes: only check the message when the write is really refused.
        if std::fs::OpenOptions::new().write(true).open(&f).is_ok() {
            let e = std::io::Error::from_raw_os_error(13);
            let why = write_denied(&f, &e).unwrap();
            assert!(
                why.contains("not writable by netperfd (Permission denied (os error 13))"),
                "{why}"
            );
            assert!(why.contains("/usr/lib/tmpfiles.d/netperfd.conf"), "{why}");
            assert!(write_denied(&f, &std::io::Error::from_raw_os_error(5)).is_none());
        } else {
            let why = read_only_reason_at(&d).unwrap();
            assert!(why.contains("group netperfd write access"), "{why}");
            let e = set_at(&d, "performance").unwrap_err();
            assert_eq!(e.http_status(), 403);
            assert!(
                e.to_string()
                    .starts_with("cannot set the governor of cpu0: "),
                "{e}"
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
