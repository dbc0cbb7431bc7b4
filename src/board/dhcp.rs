//! A port by DHCP (IPv4; IPv6 by SLAAC) through the image's own client, detected at run time:
//!
//! * **systemd-networkd** (when a `systemd-networkd` process runs in this network namespace and
//!   `networkctl` is there): netperfd writes `/run/systemd/network/10-netperfd-PORT.network`
//!   (`DHCP=ipv4`, `IPv6AcceptRA=yes`) and runs `networkctl reload` and `networkctl reconfigure
//!   PORT`; static again removes the file and does the same. The lease is read from networkd's
//!   lease file `/run/systemd/netif/leases/IFINDEX`.
//! * **dhcpcd**: `dhcpcd -B -4 PORT` runs as netperfd's child (its own hooks configure the
//!   port); the kernel does SLAAC. The lease is `dhcpcd -4 -U PORT`'s dump.
//! * **busybox udhcpc** (`udhcpc`, or `busybox udhcpc`): `udhcpc -f -R -i PORT -s NETPERFD` runs
//!   as netperfd's child with netperfd's own binary as its script ([`udhcpc_hook_main`]): no
//!   shell anywhere. The hook puts the leased address on the port with the lease's lifetime
//!   (so the kernel, like `ip -j addr`, shows it as dynamic with its countdown), sets the IPv4
//!   default route via the lease's router, and writes the lease as JSON (`PORT.json` in the
//!   lease directory). The kernel does SLAAC.
//!
//! Every client is run directly with an argv list (never through a shell); port names are
//! checked ([`crate::model::names::valid_ifname`] and a conservative character set) before
//! they reach a command line or a path. `$NETPERFD_DHCP_CLIENT` (`auto`, `networkd`,
//! `dhcpcd`, `udhcpc`, `none`) overrides the detection. Not for: deciding when a port changes
//! mode (see `apply`, which calls [`Dhcp::start`] and [`Dhcp::stop`] while reconciling).

use super::error::BoardError;
use super::links::{nl_error, IfAddr};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// Environment variable overriding the client detection: `auto`, `networkd`, `dhcpcd`,
/// `udhcpc` or `none`.
pub const CLIENT_ENV: &str = "NETPERFD_DHCP_CLIENT";
/// Environment variable netperfd sets for udhcpc: the lease directory. With it set and one of
/// udhcpc's events as the only argument, the binary runs as udhcpc's script.
pub const HOOK_ENV: &str = "NETPERFD_UDHCPC_HOOK";
/// Where netperfd puts its networkd files (a runtime directory networkd reads).
pub const NETWORKD_DIR: &str = "/run/systemd/network";
/// networkd's lease files, one per interface index.
pub const NETWORKD_LEASES: &str = "/run/systemd/netif/leases";

/// Which DHCP client the image has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    /// systemd-networkd, through its .network files and `networkctl`.
    Networkd,
    /// dhcpcd, run as netperfd's child.
    Dhcpcd,
    /// busybox udhcpc, run as netperfd's child with netperfd as its script.
    Udhcpc,
}

/// The client found, and how it is run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Client {
    /// Which client.
    pub kind: ClientKind,
    /// The program run: `networkctl`, `dhcpcd`, `udhcpc` or `busybox` (absolute path).
    pub program: PathBuf,
    /// The program is busybox: `udhcpc` goes first in its arguments.
    pub busybox: bool,
}

impl Client {
    /// How the page names it: "systemd-networkd (/usr/bin/networkctl)", "udhcpc (busybox
    /// /bin/busybox)".
    pub fn describe(&self) -> String {
        let p = self.program.display();
        match self.kind {
            ClientKind::Networkd => format!("systemd-networkd ({p})"),
            ClientKind::Dhcpcd => format!("dhcpcd ({p})"),
            ClientKind::Udhcpc if self.busybox => format!("udhcpc (busybox {p})"),
            ClientKind::Udhcpc => format!("udhcpc ({p})"),
        }
    }
}

/// The reason shown when the image has no DHCP client.
pub const NO_CLIENT: &str = "this image has no DHCP client: neither systemd-networkd (running, with networkctl), dhcpcd nor busybox udhcpc was found";

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .filter(|d| !d.is_empty())
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| is_executable(p));
    found
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a `systemd-networkd` process runs in this process's network namespace (a process
/// whose namespace cannot be read counts as ours).
fn networkd_running() -> bool {
    let own = std::fs::read_link("/proc/self/ns/net").ok();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let p = e.path();
        let is_pid = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == "systemd-network")
            && match (&own, std::fs::read_link(p.join("ns/net"))) {
                (Some(a), Ok(b)) => *a == b,
                _ => true,
            }
    })
}

fn busybox_has_udhcpc(bb: &Path) -> bool {
    Command::new(bb)
        .arg("--list")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "udhcpc")
        })
}

/// The image's DHCP client: `$NETPERFD_DHCP_CLIENT` when set (and found), else networkd when it
/// runs here, else dhcpcd, else udhcpc. Errors: the reason none can be used ([`NO_CLIENT`], or
/// the asked-for client is missing), for the page to show.
pub fn detect() -> Result<Client, String> {
    let choice = std::env::var(CLIENT_ENV).unwrap_or_default();
    let choice = choice.trim();
    let networkd = || {
        find_program("networkctl").map(|p| Client {
            kind: ClientKind::Networkd,
            program: p,
            busybox: false,
        })
    };
    let dhcpcd = || {
        find_program("dhcpcd").map(|p| Client {
            kind: ClientKind::Dhcpcd,
            program: p,
            busybox: false,
        })
    };
    let udhcpc = || {
        find_program("udhcpc")
            .map(|p| Client {
                kind: ClientKind::Udhcpc,
                program: p,
                busybox: false,
            })
            .or_else(|| {
                find_program("busybox")
                    .filter(|b| busybox_has_udhcpc(b))
                    .map(|p| Client {
                        kind: ClientKind::Udhcpc,
                        program: p,
                        busybox: true,
                    })
            })
    };
    match choice {
        "" | "auto" => networkd_running()
            .then(networkd)
            .flatten()
            .or_else(dhcpcd)
            .or_else(udhcpc)
            .ok_or_else(|| NO_CLIENT.to_string()),
        "networkd" => networkd()
            .ok_or_else(|| format!("{CLIENT_ENV}=networkd, but networkctl is not installed")),
        "dhcpcd" => {
            dhcpcd().ok_or_else(|| format!("{CLIENT_ENV}=dhcpcd, but dhcpcd is not installed"))
        }
        "udhcpc" => udhcpc().ok_or_else(|| {
            format!("{CLIENT_ENV}=udhcpc, but neither udhcpc nor busybox with udhcpc is installed")
        }),
        "none" => Err(format!("DHCP is turned off ({CLIENT_ENV}=none)")),
        other => Err(format!(
            "{CLIENT_ENV} must be auto, networkd, dhcpcd, udhcpc or none, got '{other}'"
        )),
    }
}

/// Whether `port` may go into a command line, a file name and a networkd file: a valid
/// interface name of letters, digits and `._-@` only.
pub fn safe_port(port: &str) -> bool {
    super::forwarding::rule_safe_name(port) && !port.starts_with('-')
}

fn check_port(port: &str) -> Result<(), BoardError> {
    if safe_port(port) {
        Ok(())
    } else {
        Err(BoardError::Invalid(format!(
            "port name '{port}' cannot be handed to a DHCP client"
        )))
    }
}

/// The argv (program first) that starts `client` on `port`; `hook` is netperfd's own binary
/// (udhcpc's script). Empty for networkd (it is not started per port).
pub fn client_argv(client: &Client, port: &str, hook: &Path) -> Vec<String> {
    let prog = client.program.display().to_string();
    match client.kind {
        ClientKind::Networkd => Vec::new(),
        ClientKind::Dhcpcd => vec![prog, "-B".into(), "-4".into(), port.into()],
        ClientKind::Udhcpc => {
            let mut v = vec![prog];
            if client.busybox {
                v.push("udhcpc".into());
            }
            v.extend(
                [
                    "-f", "-R", "-t", "3", "-T", "2", "-A", "5", "-i", port, "-s",
                ]
                .map(String::from),
            );
            v.push(hook.display().to_string());
            v
        }
    }
}

/// The .network file netperfd writes for `port` under networkd.
pub fn networkd_file(port: &str) -> String {
    format!(
        "# Written by netperfd: {port} by DHCP (Ports page). Removed when {port} goes back to static.\n\
         [Match]\nName={port}\n\n[Network]\nDHCP=ipv4\nIPv6AcceptRA=yes\nLinkLocalAddressing=ipv6\n"
    )
}

fn networkd_path(port: &str) -> PathBuf {
    Path::new(NETWORKD_DIR).join(format!("10-netperfd-{port}.network"))
}

/// The lease a port holds, as the page and `GET /api/board` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Leased address with prefix, `10.0.0.50/24`.
    pub address: Option<String>,
    /// The first router the lease gives.
    pub router: Option<IpAddr>,
    /// DNS servers the lease gives.
    #[serde(default)]
    pub dns: Vec<IpAddr>,
    /// The DHCP server.
    #[serde(default)]
    pub server: Option<IpAddr>,
    /// Lease time granted, seconds.
    #[serde(default)]
    pub lease_secs: Option<u64>,
    /// When the lease runs out unless renewed, Unix ms (the kernel's valid lifetime of the
    /// address when it has one, else the client's lease time from when it was bound).
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// When the lease was bound or last renewed, Unix ms (udhcpc only).
    #[serde(default)]
    pub bound_at: Option<i64>,
}

/// One port's addressing, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortDhcp {
    /// `dhcp` or `static`.
    pub method: String,
    /// The lease, when the port is by DHCP and holds one.
    pub lease: Option<Lease>,
}

struct Running {
    child: Child,
}

/// The DHCP clients netperfd runs, one per port at most. Made by the board controller.
pub struct Dhcp {
    dir: PathBuf,
    children: Mutex<HashMap<String, Running>>,
}

fn pid_alive_as(pid: i32, names: &[&str]) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| names.iter().any(|n| c.trim() == *n))
}

impl Dhcp {
    /// Clients keep their pid and lease files in `dir` (made when needed).
    pub fn new(dir: PathBuf) -> Dhcp {
        Dhcp {
            dir,
            children: Mutex::new(HashMap::new()),
        }
    }

    fn pidfile(&self, port: &str) -> PathBuf {
        self.dir.join(format!("{port}.pid"))
    }

    /// The lease file the udhcpc hook writes for `port`.
    pub fn lease_file(&self, port: &str) -> PathBuf {
        self.dir.join(format!("{port}.json"))
    }

    /// A client left running by an earlier netperfd (its pid file names a live udhcpc or
    /// dhcpcd).
    fn orphan(&self, port: &str) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.pidfile(port))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (pid > 1 && pid_alive_as(pid, &["udhcpc", "busybox", "dhcpcd"])).then_some(pid)
    }

    /// Whether `port` is by DHCP now: our client runs for it (or networkd has our file).
    pub fn is_on(&self, port: &str) -> bool {
        if !safe_port(port) {
            return false;
        }
        if let Ok(mut g) = self.children.lock() {
            if let Some(r) = g.get_mut(port) {
                if matches!(r.child.try_wait(), Ok(None)) {
                    return true;
                }
                g.remove(port);
            }
        }
        self.orphan(port).is_some() || networkd_path(port).exists()
    }

    /// Start DHCP on `port` with `client` (IPv6: the kernel's SLAAC is turned on for the port,
    /// accept_ra 2 when the board forwards). Errors: the client cannot be started.
    pub async fn start(&self, client: &Client, port: &str) -> Result<(), BoardError> {
        check_port(port)?;
        self.stop(port).await?;
        if client.kind == ClientKind::Networkd {
            let p = networkd_path(port);
            std::fs::create_dir_all(NETWORKD_DIR)
                .and_then(|_| std::fs::write(&p, networkd_file(port)))
                .map_err(|e| BoardError::System(format!("writing {}: {e}", p.display())))?;
            networkctl(&client.program, &["reload"]).await?;
            return networkctl(&client.program, &["reconfigure", port]).await;
        }
        slaac_on(port);
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| BoardError::System(format!("cannot make {}: {e}", self.dir.display())))?;
        let _ = std::fs::remove_file(self.lease_file(port));
        let hook = std::env::current_exe()
            .map_err(|e| BoardError::System(format!("cannot find netperfd's own binary: {e}")))?;
        let argv = client_argv(client, port, &hook);
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| BoardError::System("no DHCP client to run".into()))?;
        let child = Command::new(prog)
            .args(args)
            .env(HOOK_ENV, &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| BoardError::System(format!("cannot start {}: {e}", client.describe())))?;
        let _ = std::fs::write(self.pidfile(port), child.id().to_string());
        tracing::info!("DHCP on {port}: started {}", argv.join(" "));
        if let Ok(mut g) = self.children.lock() {
            g.insert(port.to_string(), Running { child });
        }
        Ok(())
    }

    /// Stop DHCP on `port`: the client is asked to release (SIGTERM; killed after 3 s), and
    /// whatever dynamic IPv4 address it left on the port goes. A no-op when none runs.
    pub async fn stop(&self, port: &str) -> Result<(), BoardError> {
        check_port(port)?;
        let nd = networkd_path(port);
        if nd.exists() {
            std::fs::remove_file(&nd)
                .map_err(|e| BoardError::System(format!("removing {}: {e}", nd.display())))?;
            if let Ok(c) = detect() {
                if c.kind == ClientKind::Networkd {
                    networkctl(&c.program, &["reload"]).await?;
                    networkctl(&c.program, &["reconfigure", port]).await?;
                }
            }
        }
        let child = self.children.lock().ok().and_then(|mut g| g.remove(port));
        let pid = child
            .as_ref()
            .map(|r| r.child.id() as i32)
            .or_else(|| self.orphan(port));
        if let Some(pid) = pid {
            use nix::sys::signal::{kill, Signal};
            use nix::unistd::Pid;
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            let mut child = child.map(|r| r.child);
            let mut gone = false;
            for _ in 0..60 {
                gone = match &mut child {
                    Some(c) => !matches!(c.try_wait(), Ok(None)),
                    None => !pid_alive_as(pid, &["udhcpc", "busybox", "dhcpcd"]),
                };
                if gone {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if !gone {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                if let Some(c) = &mut child {
                    let _ = c.wait();
                }
            }
            let _ = std::fs::remove_file(self.pidfile(port));
            let _ = std::fs::remove_file(self.lease_file(port));
            drop_dynamic_v4(port).await?;
            tracing::info!("DHCP on {port}: stopped");
        }
        Ok(())
    }

    /// The lease `port` holds under `client` (None when it holds none, or the client's
    /// lease cannot be read). `dynamic` is the port's dynamic IPv4 address with its valid
    /// lifetime in seconds, as the kernel reports it.
    pub async fn lease(
        &self,
        client: &Client,
        port: &str,
        index: u32,
        dynamic: Option<(IfAddr, Option<u32>)>,
    ) -> Option<Lease> {
        if !safe_port(port) {
            return None;
        }
        let now = crate::model::time::now_ms();
        let mut l = match client.kind {
            ClientKind::Udhcpc => std::fs::read_to_string(self.lease_file(port))
                .ok()
                .and_then(|t| serde_json::from_str::<Lease>(&t).ok()),
            ClientKind::Networkd => {
                std::fs::read_to_string(Path::new(NETWORKD_LEASES).join(index.to_string()))
                    .ok()
                    .and_then(|t| parse_networkd_lease(&t))
            }
            ClientKind::Dhcpcd => {
                let args = ["-4", "-U", port].map(String::from).to_vec();
                match run_output(&client.program, args, Duration::from_secs(2)).await {
                    Ok(o) if o.status.success() => {
                        parse_dhcpcd_dump(&String::from_utf8_lossy(&o.stdout))
                    }
                    _ => None,
                }
            }
        }?;
        if let Some((a, valid)) = dynamic {
            if l.address.is_none() {
                l.address = Some(a.to_string());
            }
            if let Some(v) = valid {
                l.expires_at = Some(now.saturating_add(i64::from(v) * 1000));
            }
        }
        if l.expires_at.is_none() {
            if let (Some(b), Some(s)) = (l.bound_at, l.lease_secs) {
                l.expires_at = i64::try_from(s)
                    .ok()
                    .and_then(|s| s.checked_mul(1000))
                    .and_then(|ms| b.checked_add(ms));
            }
        }
        Some(l)
    }
}

/// Run `prog` with `args` (no shell), stdin empty, and collect its output; killed after
/// `limit`. Errors: it could not be started, or it ran longer than `limit`.
async fn run_output(
    prog: &Path,
    args: Vec<String>,
    limit: Duration,
) -> Result<std::process::Output, String> {
    let prog = prog.to_path_buf();
    crate::engine::task::spawn_blocking(move || {
        let mut c = Command::new(&prog)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", prog.display()))?;
        let t = std::time::Instant::now();
        while matches!(c.try_wait(), Ok(None)) {
            if t.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                return Err(format!(
                    "{} {} took longer than {} s",
                    prog.display(),
                    args.join(" "),
                    limit.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        c.wait_with_output()
            .map_err(|e| format!("reading {}'s output: {e}", prog.display()))
    })
    .await
    .map_err(|e| format!("running {}: {e}", "a DHCP client command"))?
}

async fn networkctl(prog: &Path, args: &[&str]) -> Result<(), BoardError> {
    let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    match run_output(prog, argv, Duration::from_secs(10)).await {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(BoardError::System(format!(
            "networkctl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) => Err(BoardError::System(e)),
    }
}

/// Turn the kernel's SLAAC on for `port` (IPv6 by SLAAC while the port is by DHCP): autoconf
/// 1, accept_ra 1 (2 when the board forwards IPv6, which makes the kernel ignore RAs at 1).
fn slaac_on(port: &str) {
    let base = Path::new("/proc/sys/net/ipv6/conf").join(port);
    if !base.exists() {
        return;
    }
    let fwd = std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/forwarding")
        .is_ok_and(|s| s.trim() == "1");
    for (k, v) in [
        ("autoconf", "1"),
        ("accept_ra", if fwd { "2" } else { "1" }),
    ] {
        if let Err(e) = std::fs::write(base.join(k), v) {
            tracing::warn!("cannot set {k} on {port}: {e}");
        }
    }
}

fn kv_lines(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .unwrap_or(v);
            (k.trim().to_string(), v.to_string())
        })
        .collect()
}

fn ips(s: Option<&String>) -> Vec<IpAddr> {
    s.map(|s| {
        s.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    })
    .unwrap_or_default()
}

fn prefix_of_mask(mask: &str) -> Option<u8> {
    let m: Ipv4Addr = mask.parse().ok()?;
    let bits = u32::from(m);
    let p = bits.leading_ones();
    if bits.checked_shl(p).unwrap_or(0) == 0 {
        u8::try_from(p).ok()
    } else {
        None
    }
}

/// A networkd lease file (`ADDRESS=`, `NETMASK=`, `ROUTER=`, `DNS=`, `SERVER_ADDRESS=`,
/// `LIFETIME=` seconds); None without an address.
pub fn parse_networkd_lease(text: &str) -> Option<Lease> {
    let kv = kv_lines(text);
    let addr: Ipv4Addr = kv.get("ADDRESS")?.parse().ok()?;
    let prefix = kv
        .get("NETMASK")
        .and_then(|m| prefix_of_mask(m))
        .unwrap_or(32);
    Some(Lease {
        address: Some(format!("{addr}/{prefix}")),
        router: ips(kv.get("ROUTER")).into_iter().next(),
        dns: ips(kv.get("DNS")),
        server: kv.get("SERVER_ADDRESS").and_then(|s| s.parse().ok()),
        lease_secs: kv.get("LIFETIME").and_then(|s| s.parse().ok()),
        expires_at: None,
        bound_at: None,
    })
}

/// `dhcpcd -4 -U PORT`'s dump (`ip_address=`, `subnet_cidr=`, `routers=`,
/// `domain_name_servers=`, `dhcp_server_identifier=`, `dhcp_lease_time=`, values possibly in
/// single quotes); None without an address.
pub fn parse_dhcpcd_dump(text: &str) -> Option<Lease> {
    let kv = kv_lines(text);
    let addr: Ipv4Addr = kv.get("ip_address")?.parse().ok()?;
    let prefix = kv
        .get("subnet_cidr")
        .and_then(|p| p.parse::<u8>().ok())
        .filter(|p| *p <= 32)
        .or_else(|| kv.get("subnet_mask").and_then(|m| prefix_of_mask(m)))
        .unwrap_or(32);
    Some(Lease {
        address: Some(format!("{addr}/{prefix}")),
        router: ips(kv.get("routers")).into_iter().next(),
        dns: ips(kv.get("domain_name_servers")),
        server: kv
            .get("dhcp_server_identifier")
            .and_then(|s| s.parse().ok()),
        lease_secs: kv.get("dhcp_lease_time").and_then(|s| s.parse().ok()),
        expires_at: None,
        bound_at: None,
    })
}

/// Remove every dynamic (not IFA_F_PERMANENT) IPv4 address of `port`, and the IPv4 default
/// routes leaving through it: what a DHCP client put there.
async fn drop_dynamic_v4(port: &str) -> Result<(), BoardError> {
    let links = super::links::inventory().await?;
    let Some(l) = links.iter().find(|l| l.name == port) else {
        return Ok(());
    };
    let h = super::links::netlink()?;
    for a in l
        .addresses
        .iter()
        .filter(|a| !a.permanent && a.address.is_ipv4())
    {
        super::addresses::del_address(&h, l.index, port, a.address).await?;
    }
    if let Some((_, Some(oif))) = super::addresses::default_route(&h, false).await? {
        if oif == l.index {
            super::addresses::set_default_route(&h, false, None).await?;
        }
    }
    Ok(())
}

/// udhcpc's events the hook handles.
const EVENTS: [&str; 5] = ["deconfig", "bound", "renew", "leasefail", "nak"];

/// When this process was started by udhcpc as its script (`$NETPERFD_UDHCPC_HOOK` set, one
/// argument: the event), handle the event and return the exit code; None otherwise (the
/// normal command line). `bound`/`renew`: the leased address goes on `$interface` with the
/// lease's lifetime, the first router becomes the IPv4 default route, and the lease is
/// written to `$NETPERFD_UDHCPC_HOOK/PORT.json`; `deconfig`: the port's dynamic IPv4
/// addresses and its default route go, and the lease file too.
pub fn udhcpc_hook_main() -> Option<i32> {
    let dir = std::env::var_os(HOOK_ENV)?;
    let args: Vec<String> = std::env::args().collect();
    let event = match args.as_slice() {
        [_, e] if EVENTS.contains(&e.as_str()) => e.clone(),
        _ => return None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let env: HashMap<String, String> = std::env::vars().collect();
    Some(match rt.block_on(hook(&event, &env, Path::new(&dir))) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("netperfd udhcpc hook ({event}): {e}");
            1
        }
    })
}

/// The lease udhcpc hands its script (`ip`, `mask` or `subnet`, `router`, `dns`, `serverid`,
/// `lease`), at `now` (Unix ms). Errors: no valid address.
pub fn lease_from_udhcpc(
    env: &HashMap<String, String>,
    now: i64,
) -> Result<(IfAddr, Lease), String> {
    let ip: Ipv4Addr = env
        .get("ip")
        .and_then(|s| s.parse().ok())
        .ok_or("udhcpc gave no valid address ($ip)")?;
    let prefix = env
        .get("mask")
        .and_then(|m| m.parse::<u8>().ok())
        .filter(|p| (1..=32).contains(p))
        .or_else(|| env.get("subnet").and_then(|s| prefix_of_mask(s)))
        .unwrap_or(32);
    let a = IfAddr {
        addr: IpAddr::V4(ip),
        prefix,
    };
    let lease_secs = env.get("lease").and_then(|s| s.trim().parse::<u64>().ok());
    Ok((
        a,
        Lease {
            address: Some(a.to_string()),
            router: ips(env.get("router"))
                .into_iter()
                .find(|r| r.is_ipv4() && !r.is_unspecified()),
            dns: ips(env.get("dns")),
            server: env.get("serverid").and_then(|s| s.parse().ok()),
            lease_secs,
            expires_at: None,
            bound_at: Some(now),
        },
    ))
}

async fn hook(event: &str, env: &HashMap<String, String>, dir: &Path) -> Result<(), BoardError> {
    let port = env
        .get("interface")
        .cloned()
        .ok_or_else(|| BoardError::Invalid("udhcpc gave no $interface".into()))?;
    check_port(&port)?;
    let lease_file = dir.join(format!("{port}.json"));
    match event {
        "deconfig" => {
            let _ = std::fs::remove_file(&lease_file);
            drop_dynamic_v4(&port).await
        }
        "bound" | "renew" => {
            let (a, lease) = lease_from_udhcpc(env, crate::model::time::now_ms())
                .map_err(BoardError::Invalid)?;
            let links = super::links::inventory().await?;
            let l = super::links::find(&links, &port)?;
            let h = super::links::netlink()?;
            for old in l
                .addresses
                .iter()
                .filter(|x| !x.permanent && x.address.is_ipv4() && x.address != a)
            {
                super::addresses::del_address(&h, l.index, &port, old.address).await?;
            }
            let secs = lease
                .lease_secs
                .and_then(|s| u32::try_from(s).ok())
                .filter(|s| *s > 0 && *s < u32::MAX)
                .unwrap_or(3600);
            let mut req = h.address().add(l.index, a.addr, a.prefix).replace();
            req.message_mut().attributes.push(
                rtnetlink::packet_route::address::AddressAttribute::CacheInfo({
                    let mut c = rtnetlink::packet_route::address::CacheInfo::default();
                    c.ifa_preferred = secs;
                    c.ifa_valid = secs;
                    c
                }),
            );
            req.execute()
                .await
                .map_err(|e| nl_error(&format!("adding the leased {a} to {port}"), e))?;
            if let Some(r) = lease.router {
                super::addresses::set_default_route(&h, false, Some((r, Some(l.index)))).await?;
            }
            let text = serde_json::to_string(&lease)
                .map_err(|e| BoardError::System(format!("cannot encode the lease: {e}")))?;
            let tmp = lease_file.with_extension("json.tmp");
            std::fs::write(&tmp, text)
                .and_then(|_| std::fs::rename(&tmp, &lease_file))
                .map_err(|e| BoardError::System(format!("writing {}: {e}", lease_file.display())))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_run_with_an_argv_list() {
        let c = Client {
            kind: ClientKind::Udhcpc,
            program: "/bin/busybox".into(),
            busybox: true,
        };
        let v = client_argv(&c, "eno0", Path::new("/usr/bin/netperfd"));
        assert_eq!(
            v.join(" "),
            "/bin/busybox udhcpc -f -R -t 3 -T 2 -A 5 -i eno0 -s /usr/bin/netperfd"
        );
        assert_eq!(c.describe(), "udhcpc (busybox /bin/busybox)");
        let d = Client {
            kind: ClientKind::Dhcpcd,
            program: "/usr/sbin/dhcpcd".into(),
            busybox: false,
        };
        assert_eq!(
            client_argv(&d, "eth1", Path::new("/x")),
            vec!["/usr/sbin/dhcpcd", "-B", "-4", "eth1"]
        );
        assert!(networkd_file("eno0").contains("[Match]\nName=eno0\n"));
        assert!(networkd_file("eno0").contains("DHCP=ipv4\nIPv6AcceptRA=yes\n"));
        for bad in [
            "",
            "a b",
            "x;rm",
            "../x",
            "$(id)",
            "a/b",
            "-i",
            "0123456789abcdef",
        ] {
            assert!(!safe_port(bad), "{bad}");
        }
        assert!(safe_port("eno0") && safe_port("eth0.100") && safe_port("br-lan"));
    }

    #[test]
    fn leases_from_each_client() {
        let env: HashMap<String, String> = [
            ("ip", "10.77.1.50"),
            ("mask", "24"),
            ("router", "10.77.1.1 10.77.1.2"),
            ("dns", "10.77.1.53 10.77.1.54"),
            ("serverid", "10.77.1.1"),
            ("lease", "600"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (a, l) = lease_from_udhcpc(&env, 1_000).unwrap();
        assert_eq!(a.to_string(), "10.77.1.50/24");
        assert_eq!(l.router, Some("10.77.1.1".parse().unwrap()));
        assert_eq!(l.dns.len(), 2);
        assert_eq!(l.lease_secs, Some(600));
        let mut no_ip = env.clone();
        no_ip.insert("ip".into(), "10.77.1.500".into());
        assert!(lease_from_udhcpc(&no_ip, 0).is_err());
        let mut subnet = env.clone();
        subnet.remove("mask");
        subnet.insert("subnet".into(), "255.255.252.0".into());
        assert_eq!(lease_from_udhcpc(&subnet, 0).unwrap().0.prefix, 22);

        let n = parse_networkd_lease(
            "# This is private data. Do not parse.\nADDRESS=10.77.2.9\nNETMASK=255.255.255.0\nROUTER=10.77.2.1\nSERVER_ADDRESS=10.77.2.1\nDNS=10.77.2.53 10.77.2.54\nLIFETIME=3600\n",
        )
        .unwrap();
        assert_eq!(n.address.as_deref(), Some("10.77.2.9/24"));
        assert_eq!(n.dns.len(), 2);
        assert_eq!(n.lease_secs, Some(3600));
        let d = parse_dhcpcd_dump(
            "ip_address='10.77.3.7'\nsubnet_cidr='23'\nrouters='10.77.3.1'\ndomain_name_servers='10.77.3.53'\ndhcp_lease_time='86400'\n",
        )
        .unwrap();
        assert_eq!(d.address.as_deref(), Some("10.77.3.7/23"));
        assert_eq!(d.router, Some("10.77.3.1".parse().unwrap()));
        assert_eq!(d.lease_secs, Some(86400));
        assert!(parse_dhcpcd_dump("reason=FAIL\n").is_none());
        assert_eq!(prefix_of_mask("255.0.255.0"), None);
        assert_eq!(prefix_of_mask("0.0.0.0"), Some(0));
    }
}
