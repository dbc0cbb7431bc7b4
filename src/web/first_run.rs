//! First start without a shell: the one-time setup code where someone at the board sees it.
//!
//! * the daemon's log line names the board's real addresses (each non-loopback address when
//!   the web UI listens on 0.0.0.0 or ::);
//! * a snippet for the login prompt, written to `setup_issue_file` (the shipped config:
//!   `/run/netperfd/setup.issue`, in the unit's RuntimeDirectory). The images link
//!   `/etc/issue.d/netperfd.issue` to it: agetty of every util-linux since 2.35 reads
//!   `/etc/issue.d/` when `/etc/issue` exists, while `/run/issue.d/` is only read without an
//!   `/etc/issue` before util-linux 2.41 (and in addition to `/etc/issue.d/` from 2.41 on, so
//!   writing both would show the line twice). Removed once a password is set.
//! * the snippet and the log line are renewed whenever the board's addresses change (a DHCP
//!   lease after start, a cable plugged in): [`keep_current`] follows the kernel's netlink
//!   notices. The snippet carries two agetty escapes that print nothing (`\4{…}`, `\6{…}`
//!   for a port that cannot exist) but make agetty itself watch address changes and show the
//!   prompt again with the renewed text (agetty re-reads it 1 s after the notice on a serial
//!   console).
//!
//! The code is accepted with a dash, a space or nothing between its halves, in any case
//! ([`same_code`]).

use crate::config::Config;
use std::net::IpAddr;

/// The addresses a PC can reach the board's service on, when it listens on `bind`: `bind`
/// itself, or — for 0.0.0.0 / :: — every address of every up, non-loopback port (IPv4 first;
/// IPv6 link-local left out, it needs a zone). Falls back to loopback when there is none.
pub(crate) fn reachable_addresses(bind: IpAddr) -> Vec<IpAddr> {
    if !bind.is_unspecified() {
        return vec![bind];
    }
    let mut out: Vec<IpAddr> = crate::board::ports()
        .into_iter()
        .filter(|p| p.up && !p.loopback)
        .flat_map(|p| p.addresses)
        .filter(|a| match (a, bind) {
            (IpAddr::V6(v6), IpAddr::V6(_)) => (v6.segments()[0] & 0xffc0) != 0xfe80,
            (IpAddr::V6(_), IpAddr::V4(_)) => false,
            _ => true,
        })
        .collect();
    crate::model::order::sort_by_key(&mut out, |a| a.is_ipv6());
    out.dedup();
    if out.is_empty() {
        out.push(if bind.is_ipv4() {
            IpAddr::from([127, 0, 0, 1])
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    out
}

/// `host` or `[v6]` for a URL.
pub(crate) fn url_host(a: IpAddr) -> String {
    match a {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The setup page's URL on each reachable address: `https://192.0.2.1/setup`,
/// `http://127.0.0.1:8080/setup` (the scheme's own port left out).
fn setup_urls(cfg: &Config) -> Vec<String> {
    let (scheme, default_port) = if cfg.tls_in_force() {
        ("https", 443)
    } else {
        ("http", 80)
    };
    reachable_addresses(cfg.listen.ip())
        .into_iter()
        .map(|a| {
            if cfg.listen.port() == default_port {
                format!("{scheme}://{}/setup", url_host(a))
            } else {
                format!("{scheme}://{}:{}/setup", url_host(a), cfg.listen.port())
            }
        })
        .collect()
}

/// Whether `given` is `code` as a user may type it: any case, the halves joined by a dash,
/// a space or nothing (surrounding white space ignored). Compared in constant time.
pub(crate) fn same_code(given: &str, code: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .flat_map(char::to_uppercase)
            .collect()
    };
    let (g, c) = (norm(given), norm(code));
    !c.is_empty() && crate::model::secrets::ct_eq(&g, &c)
}

/// agetty escapes that print nothing (no port has this 16+ character name) and make agetty
/// listen for IPv4/IPv6 address changes and re-read the issue files on each.
const AGETTY_WATCH_ADDRESSES: &str = "\\4{netperfd-no-such-port}\\6{netperfd-no-such-port}";

/// The login prompt's snippet for `urls` and `code`, with the certificate's line when HTTPS
/// is in force (`certificate SHA-256 AB:CD:…`, on its own line). agetty prints issue files as
/// they are, expanding only `\`-escapes: plain text, and the escapes of
/// [`AGETTY_WATCH_ADDRESSES`].
fn issue_text(urls: &[String], code: &str, tls: &super::tls::Shown) -> String {
    let cert = tls
        .line()
        .map(|l| format!("\nnetperfd: the page's {l}"))
        .unwrap_or_default();
    format!(
        "netperfd: no admin password yet. Open {} and enter the setup code {code}{cert}{AGETTY_WATCH_ADDRESSES}\n\n",
        urls.join(" or ")
    )
}

/// The log line: the URLs, the code, and the certificate's fingerprint when HTTPS is in force.
fn log_text(lead: &str, urls: &[String], code: &str, tls: &super::tls::Shown) -> String {
    let cert = tls.line().map(|l| format!(" ({l})")).unwrap_or_default();
    format!(
        "{lead}: open {}{cert} and enter the one-time setup code {code}",
        urls.join(" or ")
    )
}

/// Write the login prompt's snippet (failures are logged, never fatal).
fn write_issue(cfg: &Config, urls: &[String], code: &str, tls: &super::tls::Shown) {
    let Some(path) = issue_path(cfg) else { return };
    let res = path
        .parent()
        .map(std::fs::create_dir_all)
        .unwrap_or(Ok(()))
        .and_then(|_| std::fs::write(path, issue_text(urls, code, tls)));
    if let Err(e) = res {
        tracing::warn!(
            "cannot write the setup code to {}: {e} (the login prompt will not show it)",
            path.display()
        );
    }
}

/// Tell the setup code: the log line (WARN) with the board's real addresses (and the
/// certificate's fingerprint, `tls`) and the login prompt's snippet. A failure to write the
/// snippet is logged, never fatal.
pub(crate) fn announce(cfg: &Config, code: &str, tls: &super::tls::Shown) {
    let urls = setup_urls(cfg);
    tracing::warn!("{}", log_text("no admin password yet", &urls, code, tls));
    write_issue(cfg, &urls, code, tls);
}

/// Keep the setup URLs current until the setup is done: whenever the board's addresses
/// change (the kernel's netlink notices, [`crate::board::links::port_changes`]; checked at
/// least every second as well, so a netlink failure only slows it down), log the new line
/// and rewrite the login prompt's snippet. Runs on the current tokio runtime; ends once
/// `state` has no setup code.
pub(crate) fn keep_current(state: actix_web::web::Data<super::AppState>) {
    let mut changes = match crate::board::links::port_changes() {
        Ok(rx) => Some(rx),
        Err(e) => {
            tracing::info!("{e}; the setup URL is checked every second instead");
            None
        }
    };
    crate::engine::task::spawn(async move {
        let mut shown = setup_urls(&state.config);
        loop {
            let tick = std::time::Duration::from_secs(1);
            match changes.as_mut() {
                Some(rx) => {
                    if let Ok(Err(_)) = tokio::time::timeout(tick, rx.changed()).await {
                        changes = None; // the netlink listener ended: poll
                    }
                }
                None => tokio::time::sleep(tick).await,
            }
            let urls = setup_urls(&state.config);
            // Under the lock, so the setup page's withdraw() cannot run between the check
            // and the write (it takes the code first, then removes the snippet).
            let Ok(guard) = state.setup_code.lock() else {
                return;
            };
            let Some(code) = guard.as_deref() else { return };
            if urls != shown {
                tracing::warn!(
                    "{}",
                    log_text("the board's addresses changed", &urls, code, &state.tls)
                );
                write_issue(&state.config, &urls, code, &state.tls);
                shown = urls;
            }
        }
    });
}

/// agetty's trigger file (util-linux `agetty --reload`): every running agetty that saw it
/// at its start reprints its issue files and prompt when the file's times change.
pub(crate) const AGETTY_RELOAD: &str = "/run/agetty.reload";

/// The password is set: take the code off the login prompt (removed; emptied when the
/// directory does not let us remove it), then ask the running gettys to reprint the prompt
/// so the spent code leaves the screen now, not at the next address change.
pub(crate) fn withdraw(cfg: &Config) {
    let Some(path) = issue_path(cfg) else { return };
    let present = match std::fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => {
            if let Err(e) = std::fs::write(path, "") {
                tracing::warn!("cannot remove the setup code from {}: {e}", path.display());
            }
            true
        }
    };
    if present {
        reload_gettys(std::path::Path::new(AGETTY_RELOAD));
    }
}

/// Touch `trigger` as `agetty --reload` does (open for writing, set its times to now); never
/// creates it (agetty watches it only when it existed at agetty's start; tmpfiles.d makes it
/// at boot). False when it is missing or not ours to write (the code still left the issue
/// file; the prompt then changes at the next address change or key press).
pub(crate) fn reload_gettys(trigger: &std::path::Path) -> bool {
    use nix::sys::time::TimeSpec;
    // UTIME_NOW for both times, as futimens(fd, NULL): a file we may only write (group
    // netperfd, owner root) takes that; an explicit time needs its owner (EPERM in the
    // boot test with `set_modified`).
    let touched = std::fs::OpenOptions::new()
        .write(true)
        .open(trigger)
        .and_then(|f| {
            nix::sys::stat::futimens(&f, &TimeSpec::UTIME_NOW, &TimeSpec::UTIME_NOW)
                .map_err(std::io::Error::from)
        });
    match touched {
        Ok(()) => true,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::info!(
                    "cannot touch {} to reprint the login prompt: {e}",
                    trigger.display()
                );
            }
            false
        }
    }
}

fn issue_path(cfg: &Config) -> Option<&std::path::Path> {
    Some(cfg.setup_issue_file.as_path()).filter(|p| !p.as_os_str().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_touches_an_existing_trigger_and_never_makes_one() {
        let dir = tempfile::tempdir().unwrap();
        let trigger = dir.path().join("agetty.reload");
        std::fs::write(&trigger, "").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options()
            .write(true)
            .open(&trigger)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(reload_gettys(&trigger));
        let m = std::fs::metadata(&trigger).unwrap().modified().unwrap();
        assert!(m.duration_since(old).unwrap() > std::time::Duration::from_secs(1_000_000_000));
        let missing = dir.path().join("none");
        assert!(!reload_gettys(&missing));
        assert!(
            !missing.exists(),
            "agetty watches only a file it saw at its start"
        );
    }

    #[test]
    fn the_certificate_line_goes_with_the_setup_code() {
        let urls = vec!["https://192.0.2.1/setup".to_string()];
        let fp = "AB:CD:EF".to_string();
        let tls = super::super::tls::Shown {
            fingerprint: Some(fp),
            ..Default::default()
        };
        let t = issue_text(&urls, "27A5A-4539F", &tls);
        assert!(t.starts_with(
            "netperfd: no admin password yet. Open https://192.0.2.1/setup and enter the setup code 27A5A-4539F\nnetperfd: the page's certificate SHA-256 AB:CD:EF\\4{"
        ), "{t}");
        assert!(t.ends_with("\n\n"));
        let plain = issue_text(&urls, "27A5A-4539F", &Default::default());
        assert!(!plain.contains("certificate"));
        assert_eq!(
            log_text("no admin password yet", &urls, "X", &tls),
            "no admin password yet: open https://192.0.2.1/setup (certificate SHA-256 AB:CD:EF) and enter the one-time setup code X"
        );
        let mut cfg = Config {
            listen: "192.0.2.1:443".parse().unwrap(),
            ..Config::default()
        };
        assert_eq!(setup_urls(&cfg), urls);
        cfg.listen = "192.0.2.1:8443".parse().unwrap();
        assert_eq!(setup_urls(&cfg), vec!["https://192.0.2.1:8443/setup"]);
        cfg.plain_http = true;
        assert_eq!(setup_urls(&cfg), vec!["http://192.0.2.1:8443/setup"]);
        cfg.listen = "127.0.0.1:8080".parse().unwrap();
        cfg.plain_http = false;
        assert_eq!(setup_urls(&cfg), vec!["http://127.0.0.1:8080/setup"]);
    }

    #[test]
    fn the_code_is_accepted_with_a_dash_a_space_or_nothing_in_any_case() {
        let code = "27A5A-4539F";
        for ok in [
            "27A5A-4539F",
            "27a5a 4539f",
            "27a5a4539F",
            " 27A5A - 4539F ",
        ] {
            assert!(same_code(ok, code), "{ok:?}");
        }
        for bad in ["27A5A-4539E", "27A5A", "", "27A5A-4539F0", "27A5A_4539F"] {
            assert!(!same_code(bad, code), "{bad:?}");
        }
        assert!(!same_code("", ""), "no code, nothing matches");
    }

    #[test]
    fn a_specific_listen_address_is_named_as_it_is() {
        let a: IpAddr = "192.0.2.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        assert_eq!(reachable_addresses(a), vec![a]);
        let any = IpAddr::from([0, 0, 0, 0]);
        let all = reachable_addresses(any);
        assert!(!all.is_empty());
        assert!(
            all.iter().all(|x| x.is_ipv4() && !x.is_unspecified()),
            "{all:?}"
        );
        assert_eq!(
            url_host("2001:db8::1".parse().unwrap_or(any)),
            "[2001:db8::1]"
        );
    }
}
