//! First start without a shell: the one-time setup code where someone at the board sees it.
//!
//! * the daemon's log line names the board's real addresses (each non-loopback address when
//!   the web UI listens on 0.0.0.0 or ::);
//! * a snippet for the login prompt: agetty shows every `*.issue` file in `/run/issue.d/`
//!   above `login:` (config key `setup_issue_file`; removed once a password is set);
//! * one line on the kernel console through `/dev/kmsg` (config key `setup_kmsg`; best effort:
//!   the systemd unit's `ProtectKernelLogs=yes` refuses it, the login prompt still has it).
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
    out.sort_by_key(|a| a.is_ipv6());
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

/// The setup page's URL on each reachable address: `http://192.0.2.1:8080/setup`.
fn setup_urls(cfg: &Config) -> Vec<String> {
    reachable_addresses(cfg.listen.ip())
        .into_iter()
        .map(|a| {
            if cfg.listen.port() == 80 {
                format!("http://{}/setup", url_host(a))
            } else {
                format!("http://{}:{}/setup", url_host(a), cfg.listen.port())
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

/// Tell the setup code: the log line (WARN) with the board's real addresses, the login
/// prompt's snippet and the kernel console line. Failures of the last two are logged, never
/// fatal.
pub fn announce(cfg: &Config, code: &str) {
    let urls = setup_urls(cfg);
    tracing::warn!(
        "no admin password yet: open {} and enter the one-time setup code {code}",
        urls.join(" or ")
    );
    if let Some(path) = issue_path(cfg) {
        // agetty prints issue files as they are, expanding only \-escapes: keep it plain.
        let text = format!(
            "netperfd: no admin password yet. Open {} and enter the setup code {code}\n\n",
            urls.join(" or ")
        );
        let res = path
            .parent()
            .map(std::fs::create_dir_all)
            .unwrap_or(Ok(()))
            .and_then(|_| std::fs::write(path, text));
        if let Err(e) = res {
            tracing::warn!(
                "cannot write the setup code to {}: {e} (the login prompt will not show it)",
                path.display()
            );
        }
    }
    if cfg.setup_kmsg {
        // <4> = KERN_WARNING: shown on the console with the default loglevel.
        let line = format!(
            "<4>netperfd: setup code {code}, open {}\n",
            urls.first().map(String::as_str).unwrap_or("/setup")
        );
        let res = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = res {
            tracing::info!("setup code not written to the kernel console (/dev/kmsg: {e})");
        }
    }
}

/// The password is set: take the code off the login prompt (removed; emptied when the
/// directory does not let us remove it).
pub fn withdraw(cfg: &Config) {
    let Some(path) = issue_path(cfg) else { return };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => {
            if let Err(e) = std::fs::write(path, "") {
                tracing::warn!("cannot remove the setup code from {}: {e}", path.display());
            }
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
