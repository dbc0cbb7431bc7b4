//! CPU frequency governor per core, read from and written to sysfs
//! (`/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor`), as seed 002 sets `performance`
//! before testing. The sysfs root can be moved (environment variable `NETPERFD_SYSFS_ROOT`,
//! e.g. to a directory a test made), because many machines have no cpufreq at all.
//! Not for: CPU usage (see the monitor) or anything network-related.

use super::error::BoardError;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Environment variable that replaces `/sys` for the governor files.
pub const SYSFS_ENV: &str = "NETPERFD_SYSFS_ROOT";

/// The sysfs root in use: `$NETPERFD_SYSFS_ROOT` or `/sys`.
pub fn sysfs_root() -> PathBuf {
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
    v.sort_by_key(|(n, _)| *n);
    v
}

/// Every core that has cpufreq, in CPU order (empty when the kernel has no cpufreq).
pub fn read() -> Vec<Core> {
    read_at(&sysfs_root())
}

/// [`read`] under another sysfs root.
pub fn read_at(root: &Path) -> Vec<Core> {
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
pub fn set(governor: &str) -> Result<Vec<Core>, BoardError> {
    set_at(&sysfs_root(), governor)
}

/// [`set`] under another sysfs root.
pub fn set_at(root: &Path, governor: &str) -> Result<Vec<Core>, BoardError> {
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
        std::fs::write(d.join("scaling_governor"), format!("{g}\n")).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                BoardError::ReadOnly(format!(
                    "cannot set the governor of cpu{cpu}: permission denied (writing cpufreq needs root)"
                ))
            } else {
                BoardError::System(format!("cannot set the governor of cpu{cpu}: {e}"))
            }
        })?;
    }
    Ok(read_at(root))
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
        assert_eq!(read_at(&d)[0].governor, "schedutil", "nothing changed");
        let after = set_at(&d, "performance").unwrap();
        assert!(after.iter().all(|c| c.governor == "performance"));
        let _ = std::fs::remove_dir_all(&d);
        assert!(set_at(&d, "performance")
            .unwrap_err()
            .to_string()
            .contains("no CPU frequency scaling"));
    }
}
