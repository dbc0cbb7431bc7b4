//! Forwarding with NAT between two ports, as seed 000 sets it up by hand: `ip_forward`,
//! MASQUERADE on the egress port, FORWARD accept ingress→egress plus RELATED,ESTABLISHED
//! back. Two backends, chosen by what the image has:
//! * nftables: one table of our own, `inet netperfd`, replaced as a whole in one `nft -f -`
//!   transaction (the ruleset goes on stdin), read back with `nft -j list table`;
//! * iptables: our own chains `NETPERFD-FWD` (filter) and `NETPERFD-POST` (nat), jumped to
//!   from FORWARD and POSTROUTING, changed atomically with `iptables-restore --noflush` (and
//!   `ip6tables-restore` for IPv6), read back with `iptables-save`.
//!
//! Rules netperfd did not create are never touched. Every program runs through
//! `std::process::Command` with an argument list, never a shell, in this process's network
//! namespace. Not for: deciding when to change or undo (see `apply`).

use super::error::BoardError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::process::{Command, Stdio};

/// Name of our nftables table (family `inet`).
pub(crate) const NFT_TABLE: &str = "netperfd";
/// Our iptables chain in the filter table, jumped to from FORWARD.
pub(crate) const IPT_FWD_CHAIN: &str = "NETPERFD-FWD";
/// Our iptables chain in the nat table, jumped to from POSTROUTING.
pub(crate) const IPT_NAT_CHAIN: &str = "NETPERFD-POST";

/// Forwarding from one port to another: packets entering `ingress` may leave through
/// `egress` (and their replies come back); with `nat`, they leave with the egress port's
/// address (MASQUERADE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
pub struct Forward {
    /// Port the traffic comes in on (the seed's inner LAN side).
    #[serde(rename = "in")]
    pub ingress: String,
    /// Port the traffic leaves through (where MASQUERADE applies).
    #[serde(rename = "out")]
    pub egress: String,
    /// Masquerade on the egress port.
    #[serde(default)]
    pub nat: bool,
    /// Forward IPv6 too (sets net.ipv6.conf.all.forwarding, which makes the board ignore
    /// router advertisements on its ports).
    #[serde(default)]
    pub ipv6: bool,
}

impl std::fmt::Display for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} → {}", self.ingress, self.egress)?;
        if self.nat {
            f.write_str(" with NAT")?;
        }
        if self.ipv6 {
            f.write_str(" (IPv4 and IPv6)")?;
        }
        Ok(())
    }
}

/// Whether a port name can go into a firewall rule verbatim (letters, digits, `.`, `_`, `-`,
/// `@`); others are refused rather than quoted.
pub(crate) fn rule_safe_name(name: &str) -> bool {
    crate::model::names::valid_ifname(name)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
}

/// A firewall backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `nft`, table `inet netperfd`.
    Nftables,
    /// `iptables-restore`, chains NETPERFD-FWD / NETPERFD-POST.
    Iptables,
}

impl Backend {
    /// `nftables` or `iptables`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Nftables => "nftables",
            Backend::Iptables => "iptables",
        }
    }
}

/// Which backend to use: a fixed one, or whichever the image has (nftables first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// nftables when `nft` runs, else iptables when `iptables-restore` runs.
    Auto,
    /// Only this one.
    Fixed(Backend),
}

impl BackendChoice {
    /// Parse `auto`, `nftables` (or `nft`) or `iptables`.
    pub fn parse(s: &str) -> Result<BackendChoice, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(BackendChoice::Auto),
            "nftables" | "nft" => Ok(BackendChoice::Fixed(Backend::Nftables)),
            "iptables" => Ok(BackendChoice::Fixed(Backend::Iptables)),
            o => Err(format!(
                "firewall backend must be auto, nftables or iptables, got '{o}'"
            )),
        }
    }

    /// `auto`, `nftables` or `iptables`.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Fixed(b) => b.name(),
        }
    }
}

fn runs(prog: &str, arg: &str) -> bool {
    runs_args(prog, &[arg])
}

fn runs_args(prog: &str, args: &[&str]) -> bool {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Pick the backend the image has for `choice`; an error says what is missing. `auto` takes
/// nftables when the kernel answers `nft list tables`, else iptables when installed, else
/// nftables when at least `nft` is installed.
pub(crate) fn detect(choice: BackendChoice) -> Result<Backend, BoardError> {
    let nft = || runs("nft", "--version");
    let nft_works = || runs_args("nft", &["list", "tables"]);
    let ipt = || runs("iptables-restore", "--version") && runs("iptables-save", "--version");
    match choice {
        BackendChoice::Fixed(Backend::Nftables) if nft() => Ok(Backend::Nftables),
        BackendChoice::Fixed(Backend::Nftables) => Err(BoardError::System(
            "the nftables backend was chosen but 'nft' is not installed".into(),
        )),
        BackendChoice::Fixed(Backend::Iptables) if ipt() => Ok(Backend::Iptables),
        BackendChoice::Fixed(Backend::Iptables) => Err(BoardError::System(
            "the iptables backend was chosen but 'iptables-restore'/'iptables-save' are not installed".into(),
        )),
        BackendChoice::Auto if nft_works() => Ok(Backend::Nftables),
        BackendChoice::Auto if ipt() => Ok(Backend::Iptables),
        BackendChoice::Auto if nft() => Ok(Backend::Nftables),
        BackendChoice::Auto => Err(BoardError::System(
            "forwarding needs nftables ('nft') or iptables ('iptables-restore'); the image has neither".into(),
        )),
    }
}

/// Run a program with arguments (no shell), optionally feeding `stdin`; returns stdout.
fn run(prog: &str, args: &[&str], stdin: Option<&str>) -> Result<String, BoardError> {
    let mut c = Command::new(prog);
    if let Some(lock) = xtables_lockfile_for_children() {
        c.env(XTABLES_LOCKFILE_ENV, lock);
    }
    c.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| BoardError::System(format!("cannot run {prog}: {e}")))?;
    if let Some(text) = stdin {
        if let Some(mut w) = child.stdin.take() {
            w.write_all(text.as_bytes())
                .map_err(|e| BoardError::System(format!("cannot write to {prog}: {e}")))?;
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| BoardError::System(format!("{prog} failed: {e}")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(classify_failure(prog, args, &err, &out.status.to_string()))
}

/// Environment variable with which iptables (legacy, 1.8.5 and later) takes its lock file
/// instead of `/run/xtables.lock`; iptables-nft and nft take no lock file.
pub(crate) const XTABLES_LOCKFILE_ENV: &str = "XTABLES_LOCKFILE";

/// The lock file path to hand to our iptables children: `$RUNTIME_DIRECTORY/xtables.lock`
/// (the first directory systemd's `RuntimeDirectory=` gives) when `XTABLES_LOCKFILE` is not
/// set already (then children inherit it); `None` otherwise, which leaves iptables'
/// default. As the unprivileged `netperfd` user, iptables-legacy cannot open root's
/// `/run/xtables.lock` and fails every change with "Permission denied".
pub(crate) fn xtables_lockfile_for_children() -> Option<std::path::PathBuf> {
    lockfile_from(
        std::env::var_os(XTABLES_LOCKFILE_ENV),
        std::env::var_os("RUNTIME_DIRECTORY"),
    )
}

fn lockfile_from(
    lockfile: Option<std::ffi::OsString>,
    runtime_dir: Option<std::ffi::OsString>,
) -> Option<std::path::PathBuf> {
    if lockfile.is_some_and(|v| !v.is_empty()) {
        return None;
    }
    let dirs = runtime_dir?;
    let first = dirs.to_str()?.split(':').next()?.trim();
    if first.is_empty() {
        return None;
    }
    Some(std::path::Path::new(first).join("xtables.lock"))
}

/// Turn a failed program run into the error the user sees, keeping the program's own words:
/// * iptables' "Permission denied (you must be root)" and "Operation not permitted" (netlink
///   EPERM, nft) mean the process lacks CAP_NET_ADMIN → [`BoardError::ReadOnly`] (HTTP 403);
/// * a lock file iptables cannot open ("can't open lock file …: Permission denied") is an
///   image/unit configuration fault, not a missing privilege → [`BoardError::System`]
///   (HTTP 500) with a hint at `XTABLES_LOCKFILE`;
/// * anything else (other "Permission denied" included) → [`BoardError::System`].
///
/// `status` is the exit status as text (`exit status: 4`), shown when the program printed
/// nothing.
pub(crate) fn classify_failure(
    prog: &str,
    args: &[&str],
    stderr: &str,
    status: &str,
) -> BoardError {
    let what = format!("{prog} {}", args.join(" "));
    let what = what.trim_end();
    let text = if stderr.is_empty() {
        status.to_string()
    } else {
        stderr.to_string()
    };
    let lower = stderr.to_ascii_lowercase();
    if lower.contains("lock file") {
        return BoardError::System(format!(
            "{what} failed: {text} (iptables-legacy cannot open its lock file as user netperfd: \
             set {XTABLES_LOCKFILE_ENV} to a file in netperfd's runtime directory, as the shipped \
             netperfd.service does)"
        ));
    }
    if lower.contains("you must be root") || lower.contains("operation not permitted") {
        return BoardError::ReadOnly(format!(
            "{what} failed: {text} (netperfd needs the CAP_NET_ADMIN capability)"
        ));
    }
    BoardError::System(format!("{what} failed: {text}"))
}

fn comment_fwd(f: &Forward) -> String {
    let mut c = format!("netperfd fwd {} {}", f.ingress, f.egress);
    if f.nat {
        c.push_str(" nat");
    }
    if f.ipv6 {
        c.push_str(" ipv6");
    }
    c
}

/// Decode the comment of our forward rule.
fn parse_fwd_comment(c: &str) -> Option<Forward> {
    let mut it = c.strip_prefix("netperfd fwd ")?.split_whitespace();
    let ingress = it.next()?.to_string();
    let egress = it.next()?.to_string();
    let rest: Vec<&str> = it.collect();
    Some(Forward {
        ingress,
        egress,
        nat: rest.contains(&"nat"),
        ipv6: rest.contains(&"ipv6"),
    })
}

/// Egress ports that masquerade for IPv4 and for IPv6.
fn nat_ports(forwards: &[Forward], v6: bool) -> Vec<&str> {
    let mut v: Vec<&str> = forwards
        .iter()
        .filter(|f| f.nat && (!v6 || f.ipv6))
        .map(|f| f.egress.as_str())
        .collect();
    crate::model::order::sort(&mut v);
    v.dedup();
    v
}

/// The nftables transaction that makes `inet netperfd` hold exactly `forwards` (none: the
/// table is deleted). Creating then deleting the table first makes the whole replacement one
/// atomic transaction whether or not the table existed.
pub(crate) fn render_nft(forwards: &[Forward]) -> String {
    let mut s = format!("table inet {NFT_TABLE} {{}}\ndelete table inet {NFT_TABLE}\n");
    if forwards.is_empty() {
        return s;
    }
    s.push_str(&format!("table inet {NFT_TABLE} {{\n"));
    s.push_str("\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n");
    for f in forwards {
        let proto = if f.ipv6 { "" } else { " meta nfproto ipv4" };
        s.push_str(&format!(
            "\t\tiifname \"{}\" oifname \"{}\"{proto} accept comment \"{}\"\n",
            f.ingress,
            f.egress,
            comment_fwd(f)
        ));
        s.push_str(&format!(
            "\t\tiifname \"{}\" oifname \"{}\"{proto} ct state related,established accept comment \"netperfd ret {} {}\"\n",
            f.egress, f.ingress, f.ingress, f.egress
        ));
    }
    s.push_str("\t}\n");
    let v4 = nat_ports(forwards, false);
    if !v4.is_empty() {
        s.push_str(
            "\tchain postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n",
        );
        let v6 = nat_ports(forwards, true);
        for p in v4 {
            let proto = if v6.contains(&p) {
                ""
            } else {
                " meta nfproto ipv4"
            };
            s.push_str(&format!(
                "\t\toifname \"{p}\"{proto} masquerade comment \"netperfd nat {p}\"\n"
            ));
        }
        s.push_str("\t}\n");
    }
    s.push_str("}\n");
    s
}

/// Forwards found in the JSON of `nft -j list table inet netperfd`.
pub(crate) fn parse_nft_json(json: &str) -> Result<Vec<Forward>, BoardError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| BoardError::System(format!("nft printed invalid JSON: {e}")))?;
    let mut out = Vec::new();
    for item in v["nftables"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let r = &item["rule"];
        if r["table"] == NFT_TABLE && r["chain"] == "forward" {
            if let Some(f) = r["comment"].as_str().and_then(parse_fwd_comment) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

fn ipt_tools(v6: bool) -> (&'static str, &'static str) {
    if v6 {
        ("ip6tables-save", "ip6tables-restore")
    } else {
        ("iptables-save", "iptables-restore")
    }
}

/// What `iptables-save` shows of ours in one family.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct IptState {
    /// NETPERFD-FWD exists.
    pub fwd_chain: bool,
    /// NETPERFD-POST exists.
    pub nat_chain: bool,
    /// How many `-j NETPERFD-FWD` rules FORWARD has.
    pub fwd_jumps: usize,
    /// How many `-j NETPERFD-POST` rules POSTROUTING has.
    pub nat_jumps: usize,
    /// Our forwards (decoded from the rule comments).
    pub forwards: Vec<Forward>,
}

/// Parse `iptables-save` output (filter and nat tables).
pub(crate) fn parse_iptables_save(text: &str) -> IptState {
    let mut st = IptState::default();
    let mut table = "";
    for line in text.lines() {
        let l = line.trim();
        if let Some(t) = l.strip_prefix('*') {
            table = if t == "filter" {
                "filter"
            } else if t == "nat" {
                "nat"
            } else {
                ""
            };
            continue;
        }
        match table {
            "filter" => {
                if l.starts_with(&format!(":{IPT_FWD_CHAIN} ")) {
                    st.fwd_chain = true;
                } else if l == format!("-A FORWARD -j {IPT_FWD_CHAIN}") {
                    st.fwd_jumps += 1;
                } else if l.starts_with(&format!("-A {IPT_FWD_CHAIN} ")) {
                    if let Some(i) = l.find("--comment \"") {
                        let rest = &l[i + 11..];
                        if let Some(f) = rest.split('"').next().and_then(parse_fwd_comment) {
                            st.forwards.push(f);
                        }
                    }
                }
            }
            "nat" => {
                if l.starts_with(&format!(":{IPT_NAT_CHAIN} ")) {
                    st.nat_chain = true;
                } else if l == format!("-A POSTROUTING -j {IPT_NAT_CHAIN}") {
                    st.nat_jumps += 1;
                }
            }
            _ => {}
        }
    }
    st
}

/// The `iptables-restore --noflush` input that makes our chains hold exactly `forwards`
/// (IPv4 ones, or with `v6` the IPv6 ones), given what is there now. None when there is
/// nothing to do (no forwards and nothing of ours left).
pub(crate) fn render_iptables(forwards: &[Forward], v6: bool, now: &IptState) -> Option<String> {
    let fw: Vec<&Forward> = forwards.iter().filter(|f| !v6 || f.ipv6).collect();
    let mut s = String::new();
    if fw.is_empty() {
        if !now.fwd_chain && !now.nat_chain && now.fwd_jumps == 0 && now.nat_jumps == 0 {
            return None;
        }
        s.push_str("*filter\n");
        remove_chain(
            &mut s,
            now.fwd_chain,
            now.fwd_jumps,
            "FORWARD",
            IPT_FWD_CHAIN,
        );
        s.push_str("COMMIT\n*nat\n");
        remove_chain(
            &mut s,
            now.nat_chain,
            now.nat_jumps,
            "POSTROUTING",
            IPT_NAT_CHAIN,
        );
        s.push_str("COMMIT\n");
        return Some(s);
    }
    // Declaring a chain under --noflush creates it, or empties it when it exists.
    s.push_str(&format!("*filter\n:{IPT_FWD_CHAIN} - [0:0]\n"));
    if now.fwd_jumps == 0 {
        s.push_str(&format!("-I FORWARD 1 -j {IPT_FWD_CHAIN}\n"));
    }
    for f in &fw {
        s.push_str(&format!(
            "-A {IPT_FWD_CHAIN} -i {} -o {} -m comment --comment \"{}\" -j ACCEPT\n",
            f.ingress,
            f.egress,
            comment_fwd(f)
        ));
        s.push_str(&format!(
            "-A {IPT_FWD_CHAIN} -i {} -o {} -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment \"netperfd ret {} {}\" -j ACCEPT\n",
            f.egress, f.ingress, f.ingress, f.egress
        ));
    }
    s.push_str("COMMIT\n*nat\n");
    let owned: Vec<Forward> = fw.iter().map(|f| (*f).clone()).collect();
    let nat = nat_ports(&owned, v6);
    if nat.is_empty() {
        remove_chain(
            &mut s,
            now.nat_chain,
            now.nat_jumps,
            "POSTROUTING",
            IPT_NAT_CHAIN,
        );
    } else {
        s.push_str(&format!(":{IPT_NAT_CHAIN} - [0:0]\n"));
        if now.nat_jumps == 0 {
            s.push_str(&format!("-I POSTROUTING 1 -j {IPT_NAT_CHAIN}\n"));
        }
        for p in nat {
            s.push_str(&format!(
                "-A {IPT_NAT_CHAIN} -o {p} -m comment --comment \"netperfd nat {p}\" -j MASQUERADE\n"
            ));
        }
    }
    s.push_str("COMMIT\n");
    Some(s)
}

/// Restore lines that remove our chain `chain` and its `jumps` jumps from `from`: declaring
/// the chain first empties it (under --noflush), so it can then be deleted.
fn remove_chain(s: &mut String, exists: bool, jumps: usize, from: &str, chain: &str) {
    if exists {
        s.push_str(&format!(":{chain} - [0:0]\n"));
    }
    for _ in 0..jumps {
        s.push_str(&format!("-D {from} -j {chain}\n"));
    }
    if exists {
        s.push_str(&format!("-X {chain}\n"));
    }
}

fn iptables_state(v6: bool) -> Result<Option<IptState>, BoardError> {
    let (save, _) = ipt_tools(v6);
    if v6 && !runs(save, "--version") {
        return Ok(None);
    }
    let filter = run(save, &["-t", "filter"], None)?;
    let nat = run(save, &["-t", "nat"], None).unwrap_or_default();
    Ok(Some(parse_iptables_save(&format!("{filter}\n{nat}"))))
}

/// The forwards our rules implement right now, read from the firewall.
pub(crate) fn read(backend: Backend) -> Result<Vec<Forward>, BoardError> {
    match backend {
        Backend::Nftables => {
            match run("nft", &["-j", "list", "table", "inet", NFT_TABLE], None) {
                Ok(j) => parse_nft_json(&j),
                // No table of ours: nothing enabled.
                Err(BoardError::System(e)) if e.contains("No such file or directory") => {
                    Ok(Vec::new())
                }
                Err(e) => Err(e),
            }
        }
        Backend::Iptables => {
            let v4 = iptables_state(false)?.unwrap_or_default();
            let v6 = iptables_state(true)?.unwrap_or_default();
            Ok(v4
                .forwards
                .into_iter()
                .map(|mut f| {
                    f.ipv6 = f.ipv6
                        && v6
                            .forwards
                            .iter()
                            .any(|g| g.ingress == f.ingress && g.egress == f.egress);
                    f
                })
                .collect())
        }
    }
}

/// Make our rules implement exactly `forwards` with `backend` (an empty list removes every
/// rule, chain and table of ours). Our rules of the other backend, if any are left from an
/// earlier choice, are removed too.
pub(crate) fn write(backend: Backend, forwards: &[Forward]) -> Result<(), BoardError> {
    for f in forwards {
        for p in [&f.ingress, &f.egress] {
            if !rule_safe_name(p) {
                return Err(BoardError::Invalid(format!(
                    "port name '{p}' cannot be used in a firewall rule"
                )));
            }
        }
    }
    match backend {
        Backend::Nftables => {
            run("nft", &["-f", "-"], Some(&render_nft(forwards)))?;
            remove_iptables_leftovers();
        }
        Backend::Iptables => {
            for v6 in [false, true] {
                let Some(now) = iptables_state(v6)? else {
                    if v6 && forwards.iter().any(|f| f.ipv6) {
                        return Err(BoardError::System(
                            "IPv6 forwarding needs ip6tables-restore, which the image lacks".into(),
                        ));
                    }
                    continue;
                };
                if let Some(text) = render_iptables(forwards, v6, &now) {
                    let (_, restore) = ipt_tools(v6);
                    run(restore, &["--noflush", "--wait=5"], Some(&text))?;
                }
            }
            if runs("nft", "--version") {
                let _ = run("nft", &["-f", "-"], Some(&render_nft(&[])));
            }
        }
    }
    Ok(())
}

fn remove_iptables_leftovers() {
    for v6 in [false, true] {
        let (save, restore) = ipt_tools(v6);
        if !runs(save, "--version") {
            continue;
        }
        if let Ok(Some(now)) = iptables_state(v6) {
            if let Some(text) = render_iptables(&[], v6, &now) {
                if let Err(e) = run(restore, &["--noflush", "--wait=5"], Some(&text)) {
                    tracing::warn!("cannot remove old netperfd iptables chains: {e}");
                }
            }
        }
    }
}

/// The forwarding switches of the kernel (this network namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysctls {
    /// net.ipv4.ip_forward.
    pub ipv4: bool,
    /// net.ipv6.conf.all.forwarding.
    pub ipv6: bool,
}

const IPV4_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
const IPV6_FORWARD: &str = "/proc/sys/net/ipv6/conf/all/forwarding";

fn read_flag(path: &str) -> Option<bool> {
    std::fs::read_to_string(path).ok().map(|s| s.trim() != "0")
}

/// Read net.ipv4.ip_forward and net.ipv6.conf.all.forwarding (false when unreadable).
pub(crate) fn read_sysctls() -> Sysctls {
    Sysctls {
        ipv4: read_flag(IPV4_FORWARD).unwrap_or(false),
        ipv6: read_flag(IPV6_FORWARD).unwrap_or(false),
    }
}

/// Set both switches (each only when it differs, so an image without IPv6 is fine as long as
/// IPv6 forwarding is not asked for).
pub(crate) fn write_sysctls(s: Sysctls) -> Result<(), BoardError> {
    for (path, want, name) in [
        (IPV4_FORWARD, s.ipv4, "net.ipv4.ip_forward"),
        (IPV6_FORWARD, s.ipv6, "net.ipv6.conf.all.forwarding"),
    ] {
        if read_flag(path) == Some(want) || (read_flag(path).is_none() && !want) {
            continue;
        }
        std::fs::write(path, if want { "1\n" } else { "0\n" }).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                BoardError::ReadOnly(format!(
                    "cannot set {name}: permission denied (netperfd needs CAP_NET_ADMIN and a writable /proc/sys)"
                ))
            } else {
                BoardError::System(format!("cannot set {name}: {e}"))
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fwd(i: &str, o: &str, nat: bool, ipv6: bool) -> Forward {
        Forward {
            ingress: i.into(),
            egress: o.into(),
            nat,
            ipv6,
        }
    }

    #[test]
    fn nft_ruleset_is_one_replacing_transaction() {
        let r = render_nft(&[fwd("eth0", "eth1", true, false)]);
        let lines: Vec<&str> = r.lines().map(str::trim).collect();
        assert_eq!(lines[0], "table inet netperfd {}");
        assert_eq!(lines[1], "delete table inet netperfd");
        assert!(r.contains("iifname \"eth0\" oifname \"eth1\" meta nfproto ipv4 accept comment \"netperfd fwd eth0 eth1 nat\""), "{r}");
        assert!(r.contains("iifname \"eth1\" oifname \"eth0\" meta nfproto ipv4 ct state related,established accept"), "{r}");
        assert!(
            r.contains("oifname \"eth1\" meta nfproto ipv4 masquerade"),
            "{r}"
        );
        assert!(r.contains("type nat hook postrouting priority 100"));
        // Without NAT there is no nat chain; with IPv6 no nfproto restriction.
        let r = render_nft(&[fwd("eth0", "eth1", false, true)]);
        assert!(!r.contains("masquerade") && !r.contains("postrouting"));
        assert!(!r.contains("nfproto"));
        // Nothing to forward: only the delete.
        assert_eq!(
            render_nft(&[]),
            "table inet netperfd {}\ndelete table inet netperfd\n"
        );
    }

    #[test]
    fn nft_json_round_trip() {
        let j = r#"{"nftables":[{"metainfo":{"version":"1.0.6"}},
            {"table":{"family":"inet","name":"netperfd","handle":4}},
            {"rule":{"family":"inet","table":"netperfd","chain":"forward","handle":3,"comment":"netperfd fwd eth0 eth1 nat","expr":[]}},
            {"rule":{"family":"inet","table":"netperfd","chain":"forward","handle":4,"comment":"netperfd ret eth0 eth1","expr":[]}},
            {"rule":{"family":"inet","table":"netperfd","chain":"forward","handle":5,"comment":"netperfd fwd eth2 eth1 ipv6","expr":[]}},
            {"rule":{"family":"inet","table":"netperfd","chain":"postrouting","handle":6,"comment":"netperfd nat eth1","expr":[]}}]}"#;
        assert_eq!(
            parse_nft_json(j).unwrap(),
            vec![
                fwd("eth0", "eth1", true, false),
                fwd("eth2", "eth1", false, true)
            ]
        );
        assert!(parse_nft_json("not json").is_err());
    }

    #[test]
    fn iptables_restore_input_adds_jumps_once_and_cleans_up() {
        let empty = IptState::default();
        let t = render_iptables(&[fwd("eth0", "eth1", true, false)], false, &empty).unwrap();
        assert!(
            t.contains(":NETPERFD-FWD - [0:0]\n-I FORWARD 1 -j NETPERFD-FWD\n"),
            "{t}"
        );
        assert!(t.contains("-A NETPERFD-FWD -i eth0 -o eth1 -m comment --comment \"netperfd fwd eth0 eth1 nat\" -j ACCEPT"), "{t}");
        assert!(
            t.contains(
                "-A NETPERFD-FWD -i eth1 -o eth0 -m conntrack --ctstate RELATED,ESTABLISHED"
            ),
            "{t}"
        );
        assert!(t.contains("-I POSTROUTING 1 -j NETPERFD-POST\n"), "{t}");
        assert!(
            t.contains(
                "-A NETPERFD-POST -o eth1 -m comment --comment \"netperfd nat eth1\" -j MASQUERADE"
            ),
            "{t}"
        );
        assert_eq!(t.matches("COMMIT").count(), 2);

        let saved = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:NETPERFD-FWD - [0:0]\n-A FORWARD -j NETPERFD-FWD\n-A FORWARD -i eth9 -j DROP\n-A NETPERFD-FWD -i eth0 -o eth1 -m comment --comment \"netperfd fwd eth0 eth1 nat\" -j ACCEPT\nCOMMIT\n*nat\n:POSTROUTING ACCEPT [0:0]\n:NETPERFD-POST - [0:0]\n-A POSTROUTING -j NETPERFD-POST\nCOMMIT\n";
        let st = parse_iptables_save(saved);
        assert_eq!(
            st,
            IptState {
                fwd_chain: true,
                nat_chain: true,
                fwd_jumps: 1,
                nat_jumps: 1,
                forwards: vec![fwd("eth0", "eth1", true, false)],
            }
        );
        // Present jumps are not added again.
        let t = render_iptables(&[fwd("eth0", "eth1", false, false)], false, &st).unwrap();
        assert!(!t.contains("-I FORWARD"), "{t}");
        // No NAT any more: the nat chain goes.
        assert!(
            t.contains(":NETPERFD-POST - [0:0]\n-D POSTROUTING -j NETPERFD-POST\n-X NETPERFD-POST"),
            "{t}"
        );
        // Disable: jumps removed, chains flushed and deleted; foreign rules not mentioned.
        let t = render_iptables(&[], false, &st).unwrap();
        assert_eq!(t, "*filter\n:NETPERFD-FWD - [0:0]\n-D FORWARD -j NETPERFD-FWD\n-X NETPERFD-FWD\nCOMMIT\n*nat\n:NETPERFD-POST - [0:0]\n-D POSTROUTING -j NETPERFD-POST\n-X NETPERFD-POST\nCOMMIT\n");
        assert!(!t.contains("eth9"));
        assert_eq!(render_iptables(&[], false, &IptState::default()), None);
        // IPv6 rules only for forwards that ask for IPv6.
        assert_eq!(
            render_iptables(&[fwd("a", "b", true, false)], true, &IptState::default()),
            None
        );
    }

    #[test]
    fn names_and_choices() {
        assert!(rule_safe_name("fm1-mac9"));
        assert!(rule_safe_name("eth0.100"));
        assert!(!rule_safe_name("eth\"0"));
        assert!(!rule_safe_name("a;b"));
        assert_eq!(
            BackendChoice::parse("nft"),
            Ok(BackendChoice::Fixed(Backend::Nftables))
        );
        assert_eq!(BackendChoice::parse("AUTO"), Ok(BackendChoice::Auto));
        assert!(BackendChoice::parse("pf")
            .unwrap_err()
            .contains("auto, nftables or iptables"));
    }

    #[test]
    fn lock_file_denial_is_a_system_error_with_iptables_text() {
        // What iptables-legacy 1.8.9 prints as user netperfd without XTABLES_LOCKFILE.
        let e = classify_failure(
            "iptables-restore",
            &["--noflush"],
            "Fatal: can't open lock file /run/xtables.lock: Permission denied",
            "exit status: 4",
        );
        assert_eq!(e.http_status(), 500);
        assert_eq!(e.kind(), "system");
        let m = e.to_string();
        assert!(m.starts_with("iptables-restore --noflush failed: Fatal: can't open lock file /run/xtables.lock: Permission denied"), "{m}");
        assert!(m.contains("XTABLES_LOCKFILE"), "{m}");
        assert!(!m.contains("CAP_NET_ADMIN"), "{m}");
    }

    #[test]
    fn missing_capability_is_read_only_with_iptables_text() {
        let e = classify_failure(
            "iptables-save",
            &[],
            "iptables-save v1.8.9 (legacy): Cannot initialize: Permission denied (you must be root)",
            "exit status: 1",
        );
        assert_eq!(e.http_status(), 403);
        assert_eq!(e.to_string(), "iptables-save failed: iptables-save v1.8.9 (legacy): Cannot initialize: Permission denied (you must be root) (netperfd needs the CAP_NET_ADMIN capability)");
        let e = classify_failure(
            "nft",
            &["-f", "-"],
            "Error: Could not process rule: Operation not permitted",
            "exit status: 1",
        );
        assert_eq!(e.http_status(), 403);
        assert!(e
            .to_string()
            .contains("Could not process rule: Operation not permitted"));
    }

    #[test]
    fn other_permission_denied_is_not_blamed_on_capabilities() {
        let e = classify_failure(
            "nft",
            &["-f", "-"],
            "Error: Could not open file /etc/x: Permission denied",
            "exit status: 1",
        );
        assert_eq!(e.http_status(), 500);
        assert_eq!(
            e.to_string(),
            "nft -f - failed: Error: Could not open file /etc/x: Permission denied"
        );
        let e = classify_failure("iptables-save", &[], "", "exit status: 2");
        assert_eq!(e.to_string(), "iptables-save failed: exit status: 2");
    }

    #[test]
    fn lockfile_goes_into_the_runtime_directory_unless_set() {
        use std::ffi::OsString;
        assert_eq!(
            lockfile_from(None, Some(OsString::from("/run/netperfd"))),
            Some(std::path::PathBuf::from("/run/netperfd/xtables.lock"))
        );
        assert_eq!(
            lockfile_from(None, Some(OsString::from("/run/a:/run/b"))),
            Some(std::path::PathBuf::from("/run/a/xtables.lock"))
        );
        assert_eq!(
            lockfile_from(
                Some(OsString::from("/run/x.lock")),
                Some(OsString::from("/run/netperfd"))
            ),
            None
        );
        assert_eq!(lockfile_from(None, None), None);
        assert_eq!(lockfile_from(None, Some(OsString::new())), None);
        assert_eq!(
            lockfile_from(Some(OsString::new()), Some(OsString::from("/run/n"))),
            Some(std::path::PathBuf::from("/run/n/xtables.lock"))
        );
    }
}
