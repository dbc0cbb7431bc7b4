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
//!   shell anywhere. The hook checks the whole lease first ([`lease_from_udhcpc`]; a refused
//!   one applies nothing and is written with its `error`), puts the leased address on the port
//!   with the lease's lifetime (so the kernel, like `ip -j addr`, shows it as dynamic with its
//!   countdown; an infinite lease forever, marked [`super::links::DHCP_ADDR_PROTO`]), sets the
//!   IPv4 default route via the lease's router (marked `proto dhcp`, so that the client's
//!   deconfig later removes that route and no other) only when no other port holds one, and writes
//!   the lease as JSON (`PORT.json` in the lease directory). udhcpc's and the hook's output
//!   go to netperfd's log. The kernel does SLAAC.
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
    /// The domain name the lease gives (udhcpc only; at most [`MAX_DOMAIN`] bytes).
    #[serde(default)]
    pub domain: Option<String>,
    /// Why netperfd refused the DHCP server's lease (udhcpc only): nothing of it was applied.
    /// The other fields are then empty.
    #[serde(default)]
    pub error: Option<String>,
    /// When the lease was refused, Unix ms.
    #[serde(default)]
    pub error_at: Option<i64>,
    /// Why the lease's router did not become the board's default route (another port holds
    /// it), when it did not.
    #[serde(default)]
    pub route_note: Option<String>,
}

/// The lease time udhcpc reports for an infinite lease (0xffffffff s).
pub const INFINITE_LEASE: u64 = u32::MAX as u64;

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

    /// Whether `port` is by DHCP now: our client runs for it (or networkd has our file). A
    /// client left by an earlier netperfd (kill -9) does not count: its output pipe is gone
    /// (it died at its first renewal in the re-tryout, the ports losing their addresses), so
    /// the reconcile at start stops it and starts one of ours.
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
        networkd_path(port).exists()
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
        let mut child = Command::new(prog)
            .args(args)
            .env(HOOK_ENV, &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BoardError::System(format!("cannot start {}: {e}", client.describe())))?;
        // The client's own messages and the hook's (a refused lease) go to netperfd's log.
        if let Some(o) = child.stdout.take() {
            log_lines(port, o);
        }
        if let Some(e) = child.stderr.take() {
            log_lines(port, e);
        }
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

    /// Stop every client netperfd runs (udhcpc, dhcpcd children): on a graceful stop, so that
    /// none is left running as an orphan. Their ports stay by DHCP in the configuration (the
    /// next start runs the client again); networkd's files stay. Errors are logged.
    pub async fn stop_children(&self) {
        let ports: Vec<String> = self
            .children
            .lock()
            .map(|g| g.keys().cloned().collect())
            .unwrap_or_default();
        for p in ports {
            if let Err(e) = self.stop(&p).await {
                tracing::warn!("DHCP on {p}: stopping the client: {e}");
            }
        }
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
        if l.error.is_some() {
            return Some(l);
        }
        if l.lease_secs.is_some_and(|s| s >= INFINITE_LEASE) {
            l.expires_at = None;
            if l.address.is_none() {
                l.address = dynamic.map(|(a, _)| a.to_string());
            }
            return Some(l);
        }
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

/// Copy each line `r` gives (a DHCP client's stdout or stderr) into netperfd's log, on a
/// thread of its own that ends with the client: the hook's lines (a refused lease, a failed
/// netlink call) as warnings, the client's own as info.
fn log_lines(port: &str, r: impl std::io::Read + Send + 'static) {
    use std::io::BufRead;
    let p = port.to_string();
    let spawned = std::thread::Builder::new()
        .name(format!("dhcp-log-{port}"))
        .spawn(move || {
            let port = p;
            for line in std::io::BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let line: String = line.chars().take(1000).collect();
                if line.starts_with(HOOK_PREFIX) {
                    tracing::warn!("DHCP on {port}: {line}");
                } else {
                    tracing::info!("DHCP on {port}: {line}");
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("DHCP on {port}: cannot log the client's output: {e}");
    }
}

/// How the udhcpc hook's messages on stderr begin.
const HOOK_PREFIX: &str = "netperfd udhcpc hook";

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
        ..Lease::default()
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
        ..Lease::default()
    })
}

/// Remove every dynamic (not IFA_F_PERMANENT) IPv4 address of `port`, and the IPv4 default
/// routes its lease installed (through `port`, `proto dhcp`): what a DHCP client put there.
/// Another port's default route and a static one through `port` stay.
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
    super::addresses::del_dhcp_default_routes(&h, l.index).await?;
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
            eprintln!("{HOOK_PREFIX} ({event}): {e}");
            1
        }
    })
}

/// At most this many DNS servers of a lease are kept (resolv.conf's own limit).
pub const MAX_DNS: usize = 3;
/// The longest domain name kept from a lease, bytes (a DNS name's limit).
pub const MAX_DOMAIN: usize = 253;

/// Why `a` cannot be a unicast host address handed out by DHCP (0.0.0.0, loopback,
/// multicast, 255.255.255.255, 240.0.0.0/4); None when it can.
fn not_unicast(a: Ipv4Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some("0.0.0.0")
    } else if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_broadcast() {
        Some("the limited broadcast address")
    } else if a.is_multicast() {
        Some("a multicast address")
    } else if u32::from(a) >> 28 == 0xf {
        Some("a reserved (240.0.0.0/4) address")
    } else {
        None
    }
}

/// Whether `a` is the network or the broadcast address of `net/prefix` (only subnets of
/// /30 and wider have them; a /31 is point-to-point, RFC 3021).
fn net_or_broadcast(a: Ipv4Addr, prefix: u8) -> Option<&'static str> {
    if prefix > 30 {
        return None;
    }
    let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
    let a = u32::from(a);
    if a & host == 0 {
        Some("the subnet's network address")
    } else if a & host == host {
        Some("the subnet's broadcast address")
    } else {
        None
    }
}

fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX
        .checked_shl(32u32.saturating_sub(u32::from(prefix)))
        .unwrap_or(0);
    u32::from(a) & mask == u32::from(b) & mask
}

/// The lease udhcpc hands its script (`ip`, `mask` or `subnet`, `router`, `dns`, `serverid`,
/// `lease` seconds, `domain`), checked as a whole at `now` (Unix ms). Errors (the lease is
/// then refused, nothing applied): the address is not a unicast host address (0.0.0.0,
/// loopback, multicast, 255.255.255.255, 240.0.0.0/4, or the subnet's network or broadcast
/// address); the netmask is missing, not contiguous, or shorter than /8 or /32 (a /32 leaves
/// no router on the link; a /31 is accepted as point-to-point, RFC 3021); the first router is
/// not a unicast address inside the subnet other than the leased one. Kept: the first
/// [`MAX_DNS`] unicast DNS servers; the domain when it is at most [`MAX_DOMAIN`] bytes of
/// letters, digits, `-` and `.`. `lease` 4294967295 is an infinite lease.
pub fn lease_from_udhcpc(
    env: &HashMap<String, String>,
    now: i64,
) -> Result<(IfAddr, Lease), String> {
    let ip_s = env.get("ip").map(|s| s.trim()).unwrap_or("");
    let ip: Ipv4Addr = ip_s
        .parse()
        .map_err(|_| format!("the address '{ip_s}' is not an IPv4 address"))?;
    if let Some(why) = not_unicast(ip) {
        return Err(format!("the address {ip} is {why}"));
    }
    // The server's own dotted netmask (`subnet`) first: busybox's `mask` is a prefix length
    // counted from it, so 255.0.255.0 read as /24 there (the re-tryout's accepted lease).
    let prefix = match (env.get("subnet"), env.get("mask")) {
        (Some(s), _) => prefix_of_mask(s.trim())
            .ok_or_else(|| format!("the netmask {} is not contiguous", s.trim()))?,
        (None, Some(m)) => m
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("the netmask /{} is not a prefix length", m.trim()))?,
        (None, None) => return Err("the lease has no netmask".into()),
    };
    if prefix < 8 {
        return Err(format!(
            "the netmask /{prefix} is wider than /8 (it would put most of the Internet on the link)"
        ));
    }
    if prefix == 32 {
        return Err("the netmask /32 leaves no subnet (and no router) on the link".into());
    }
    if let Some(why) = net_or_broadcast(ip, prefix) {
        return Err(format!("the address {ip} is {why} of {ip}/{prefix}"));
    }
    let a = IfAddr {
        addr: IpAddr::V4(ip),
        prefix,
    };
    let router = match env.get("router").and_then(|r| r.split_whitespace().next()) {
        None => None,
        Some(r) => {
            let r: Ipv4Addr = r
                .parse()
                .map_err(|_| format!("the router '{r}' is not an IPv4 address"))?;
            if let Some(why) = not_unicast(r) {
                return Err(format!("the router {r} is {why}"));
            }
            if !same_subnet(ip, r, prefix) {
                return Err(format!("the router {r} is outside the subnet {a}"));
            }
            if let Some(why) = net_or_broadcast(r, prefix) {
                return Err(format!("the router {r} is {why}"));
            }
            if r == ip {
                return Err(format!("the router {r} is the leased address itself"));
            }
            Some(IpAddr::V4(r))
        }
    };
    let dns: Vec<IpAddr> = env
        .get("dns")
        .map(|s| {
            s.split_whitespace()
                .filter_map(|w| w.parse::<Ipv4Addr>().ok())
                .filter(|d| not_unicast(*d).is_none())
                .take(MAX_DNS)
                .map(IpAddr::V4)
                .collect()
        })
        .unwrap_or_default();
    let domain = env.get("domain").map(|d| d.trim()).filter(|d| {
        !d.is_empty()
            && d.len() <= MAX_DOMAIN
            && d.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    });
    let lease_secs = lease_time(env.get("lease").map(String::as_str))?;
    Ok((
        a,
        Lease {
            address: Some(a.to_string()),
            router,
            dns,
            domain: domain.map(str::to_string),
            server: env.get("serverid").and_then(|s| s.trim().parse().ok()),
            lease_secs,
            expires_at: None,
            bound_at: Some(now),
            ..Lease::default()
        },
    ))
}

/// The lease time (seconds) from udhcpc's `lease` variable: None when the server gave none
/// (udhcpc then runs a 3600 s lease itself). A server that sends the lease-time option (51)
/// more than once gets its values joined by busybox ("120 600": it concatenates repeated
/// options as RFC 3396 says, and formats the 8 bytes as two numbers), while udhcpc itself
/// times its renewals by the first; RFC 2131 §4.1 allows an option once, RFC 2132 §9.2 gives
/// option 51 exactly 4 bytes. The first value is taken: the one the server granted first and
/// udhcpc renews by. Errors: a value that is not a number of seconds.
pub fn lease_time(v: Option<&str>) -> Result<Option<u64>, String> {
    let Some(v) = v else { return Ok(None) };
    match v.split_whitespace().next() {
        None => Ok(None),
        Some(first) => first
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("the lease time '{}' is not a number of seconds", v.trim())),
    }
}

fn write_lease(lease_file: &Path, lease: &Lease) -> Result<(), BoardError> {
    let text = serde_json::to_string(lease)
        .map_err(|e| BoardError::System(format!("cannot encode the lease: {e}")))?;
    let tmp = lease_file.with_extension("json.tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, lease_file))
        .map_err(|e| BoardError::System(format!("writing {}: {e}", lease_file.display())))
}

/// The lifetime (seconds) the leased address is installed with: the lease time, `u32::MAX`
/// (the kernel's "forever") for an infinite lease, 3600 when udhcpc gave none or 0.
pub fn address_lifetime(lease_secs: Option<u64>) -> u32 {
    match lease_secs {
        Some(s) if s >= INFINITE_LEASE => u32::MAX,
        Some(s) if s > 0 => u32::try_from(s).unwrap_or(u32::MAX),
        _ => 3600,
    }
}

/// Why leased address `a` cannot go on `port`: it overlaps an IPv4 subnet of another port
/// ("10.61.1.7/24 overlaps 10.61.1.1/24 on eth0: two ports cannot share a subnet", as a
/// static address there is refused); `None` when it does not.
fn overlap_elsewhere(links: &[super::links::Link], port: &str, a: IfAddr) -> Option<String> {
    links
        .iter()
        .filter(|x| x.name != port)
        .flat_map(|x| x.addresses.iter().map(move |b| (&x.name, b.address)))
        .find(|(_, b)| b.is_ipv4() && !b.is_link_local() && a.overlaps(b))
        .map(|(other, b)| format!("{a} overlaps {b} on {other}: two ports cannot share a subnet"))
}

/// Put the leased address `a` on port `port` (interface `index`) with the lifetime `secs`
/// (seconds; `u32::MAX` = forever), marked as DHCP's, replacing it if it is there.
async fn add_leased(
    h: &rtnetlink::Handle,
    index: u32,
    a: IfAddr,
    secs: u32,
    port: &str,
) -> Result<(), BoardError> {
    let mut req = h.address().add(index, a.addr, a.prefix).replace();
    let attrs = &mut req.message_mut().attributes;
    attrs.push(
        rtnetlink::packet_route::address::AddressAttribute::CacheInfo({
            let mut c = rtnetlink::packet_route::address::CacheInfo::default();
            c.ifa_preferred = secs;
            c.ifa_valid = secs;
            c
        }),
    );
    attrs.push(
        rtnetlink::packet_route::address::AddressAttribute::Protocol(
            super::links::DHCP_ADDR_PROTO.into(),
        ),
    );
    req.execute()
        .await
        .map_err(|e| nl_error(&format!("adding the leased {a} to {port}"), e))?;
    Ok(())
}

/// The lease's router `r` becomes the board's IPv4 default route through port `port`
/// (interface `index`) unless another port holds the default route (then `lease` notes
/// why not). `links` are the board's ports; `event` is udhcpc's, for the log.
async fn lease_router(
    h: &rtnetlink::Handle,
    index: u32,
    links: &[super::links::Link],
    r: IpAddr,
    event: &str,
    port: &str,
    lease: &mut Lease,
) -> Result<(), BoardError> {
    // The board's default route stays where it is when another port holds it
    // (a static gateway, or a DHCP port that bound first).
    let other = super::addresses::default_routes(h, false)
        .await?
        .into_iter()
        .find(|(_, oif)| *oif != Some(index));
    match other {
        Some((via, oif)) => {
            let name = oif
                .and_then(|i| links.iter().find(|x| x.index == i))
                .map(|x| x.name.clone())
                .unwrap_or_else(|| "another port".into());
            let note = format!("not the board's default route: it stays via {via} on {name}");
            eprintln!("{HOOK_PREFIX} ({event}): {port}: router {r} {note}");
            lease.route_note = Some(note);
        }
        None => match r {
            IpAddr::V4(r4) => super::addresses::set_dhcp_default_route(h, r4, index).await?,
            IpAddr::V6(_) => {}
        },
    }
    Ok(())
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
            let now = crate::model::time::now_ms();
            // A lease that cannot be taken: nothing of it is applied; what an earlier lease
            // of this client put on the port goes (a renew can turn hostile).
            let (port_r, file_r) = (&port, &lease_file);
            let refuse = |why: String| async move {
                let (port, lease_file) = (port_r, file_r);
                let dropped = drop_dynamic_v4(port).await;
                let refused = Lease {
                    error: Some(why.clone()),
                    error_at: Some(now),
                    ..Lease::default()
                };
                write_lease(lease_file, &refused)?;
                dropped?;
                Err(BoardError::Invalid(format!(
                    "{port}: the DHCP server's lease was refused: {why}"
                )))
            };
            let (a, mut lease) = match lease_from_udhcpc(env, now) {
                Ok(x) => x,
                Err(why) => return refuse(why).await,
            };
            // Another port's subnet is that port's: a lease inside it would take its
            // traffic (the attacker's rogue server took 10.61.1.0/24 from the port holding
            // 10.61.1.1/24; a static address there is refused the same way).
            let links = super::links::inventory().await?;
            if let Some(why) = overlap_elsewhere(&links, &port, a) {
                return refuse(why).await;
            }
            if let Some(v) = env
                .get("lease")
                .filter(|v| v.split_whitespace().nth(1).is_some())
            {
                eprintln!(
                    "{HOOK_PREFIX} ({event}): {port}: the DHCP server sent the lease time more than once ({}); the first, {} s, is used (as udhcpc renews by it)",
                    v.trim(),
                    lease.lease_secs.unwrap_or_default()
                );
            }
            let l = super::links::find(&links, &port)?;
            let h = super::links::netlink()?;
            for old in l
                .addresses
                .iter()
                .filter(|x| !x.permanent && x.address.is_ipv4() && x.address != a)
            {
                super::addresses::del_address(&h, l.index, &port, old.address).await?;
            }
            let secs = address_lifetime(lease.lease_secs);
            add_leased(&h, l.index, a, secs, &port).await?;
            if let Some(r) = lease.router {
                lease_router(&h, l.index, &links, r, event, &port, &mut lease).await?;
            }
            write_lease(&lease_file, &lease)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attacker's rogue server offered 10.61.1.7/24 on one port while another held
    /// 10.61.1.1/24: the lease took that port's traffic. Refused now, as a static address.
    #[test]
    fn a_lease_inside_another_port_s_subnet_is_refused() {
        use crate::board::links::{Link, PortAddress};
        let port = |name: &str, addrs: &[&str]| Link {
            name: name.into(),
            addresses: addrs.iter().map(|a| PortAddress::static_v4(a)).collect(),
            ..Link::default()
        };
        let links = [
            port("lo", &["127.0.0.1/8"]),
            port("bin", &["10.61.1.1/24"]),
            port("bdhcp", &["10.61.9.5/24"]),
        ];
        let a = |s: &str| IfAddr::parse_any(s).unwrap();
        assert_eq!(
            overlap_elsewhere(&links, "bdhcp", a("10.61.1.7/24")).as_deref(),
            Some("10.61.1.7/24 overlaps 10.61.1.1/24 on bin: two ports cannot share a subnet")
        );
        // The port's own earlier address is no conflict; another subnet is none either.
        assert_eq!(overlap_elsewhere(&links, "bdhcp", a("10.61.9.6/24")), None);
        assert_eq!(overlap_elsewhere(&links, "bdhcp", a("10.61.2.77/24")), None);
        // A wider lease that covers another port's subnet is refused too.
        assert!(overlap_elsewhere(&links, "bdhcp", a("10.61.9.5/16")).is_some());
    }

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
        // A non-contiguous netmask is refused even when busybox's `mask` says /24.
        let mut holey = env.clone();
        holey.insert("subnet".into(), "255.0.255.0".into());
        assert_eq!(
            lease_from_udhcpc(&holey, 0).map(|_| ()),
            Err("the netmask 255.0.255.0 is not contiguous".to_string())
        );

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

    fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hostile_leases_are_refused_whole() {
        let good = [
            ("ip", "10.99.1.50"),
            ("mask", "24"),
            ("router", "10.99.1.1"),
        ];
        let (a, l) = lease_from_udhcpc(&env_of(&good), 5).unwrap();
        assert_eq!(a.to_string(), "10.99.1.50/24");
        assert_eq!(l.router, Some("10.99.1.1".parse().unwrap()));
        assert_eq!(l.error, None);
        let refused = |over: &[(&str, &str)]| {
            let mut e = env_of(&good);
            for (k, v) in over {
                if v.is_empty() {
                    e.remove(*k);
                } else {
                    e.insert(k.to_string(), v.to_string());
                }
            }
            lease_from_udhcpc(&e, 0).err()
        };
        for (over, why) in [
            (
                vec![("router", "10.99.2.1")],
                "the router 10.99.2.1 is outside the subnet 10.99.1.50/24",
            ),
            (
                vec![("router", "255.255.255.255")],
                "the router 255.255.255.255 is the limited broadcast address",
            ),
            (
                vec![("router", "224.0.0.1")],
                "the router 224.0.0.1 is a multicast address",
            ),
            (
                vec![("router", "10.99.1.255")],
                "the router 10.99.1.255 is the subnet's broadcast address",
            ),
            (
                vec![("router", "10.99.1.50")],
                "the router 10.99.1.50 is the leased address itself",
            ),
            (
                vec![("router", "gw")],
                "the router 'gw' is not an IPv4 address",
            ),
            (
                vec![("mask", "0")],
                "the netmask /0 is wider than /8 (it would put most of the Internet on the link)",
            ),
            (
                vec![("mask", "32")],
                "the netmask /32 leaves no subnet (and no router) on the link",
            ),
            (
                vec![("mask", "33")],
                "the netmask /33 is not a prefix length",
            ),
            (
                vec![("mask", ""), ("subnet", "255.0.255.0")],
                "the netmask 255.0.255.0 is not contiguous",
            ),
            (vec![("mask", "")], "the lease has no netmask"),
            (
                vec![("ip", "10.99.1.255")],
                "the address 10.99.1.255 is the subnet's broadcast address of 10.99.1.255/24",
            ),
            (
                vec![("ip", "10.99.1.0")],
                "the address 10.99.1.0 is the subnet's network address of 10.99.1.0/24",
            ),
            (
                vec![("ip", "127.0.0.9"), ("router", "")],
                "the address 127.0.0.9 is a loopback address",
            ),
            (vec![("ip", "0.0.0.0")], "the address 0.0.0.0 is 0.0.0.0"),
            (
                vec![("ip", "255.255.255.255")],
                "the address 255.255.255.255 is the limited broadcast address",
            ),
            (
                vec![("ip", "239.1.1.1")],
                "the address 239.1.1.1 is a multicast address",
            ),
            (
                vec![("ip", "250.1.1.1")],
                "the address 250.1.1.1 is a reserved (240.0.0.0/4) address",
            ),
        ] {
            assert_eq!(refused(&over).as_deref(), Some(why), "{over:?}");
        }
        // A /31 is point-to-point (RFC 3021): both addresses are hosts.
        let p2p = env_of(&[("ip", "10.99.1.0"), ("mask", "31"), ("router", "10.99.1.1")]);
        assert_eq!(
            lease_from_udhcpc(&p2p, 0).unwrap().0.to_string(),
            "10.99.1.0/31"
        );
        // No router: a lease without a default route.
        let mut e = env_of(&good);
        e.remove("router");
        assert_eq!(lease_from_udhcpc(&e, 0).unwrap().1.router, None);
        // DNS: the first 3 unicast ones; an over-long or odd domain is dropped.
        let dns: Vec<String> = (1..=60).map(|i| format!("10.99.1.{i}")).collect();
        let mut e = env_of(&good);
        e.insert("dns".into(), format!("224.0.0.1 {}", dns.join(" ")));
        e.insert("domain".into(), "lab.example".into());
        let l = lease_from_udhcpc(&e, 0).unwrap().1;
        assert_eq!(
            l.dns.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            ["10.99.1.1", "10.99.1.2", "10.99.1.3"]
        );
        assert_eq!(l.domain.as_deref(), Some("lab.example"));
        e.insert("domain".into(), "a".repeat(254));
        assert_eq!(lease_from_udhcpc(&e, 0).unwrap().1.domain, None);
        e.insert("domain".into(), "x;rm -rf".into());
        assert_eq!(lease_from_udhcpc(&e, 0).unwrap().1.domain, None);
    }

    #[test]
    fn a_lease_time_sent_twice_takes_the_first() {
        // What busybox 1.35 udhcpc hands its script when dnsmasq sends option 51 twice
        // (`--dhcp-option-force=51,600` after its own 2m): "lease=120 600"; udhcpc logs
        // "lease time 120" and renews by it. It was read as no lease time (3600 s).
        let e = env_of(&[("ip", "10.99.1.50"), ("mask", "24"), ("lease", "120 600")]);
        let l = lease_from_udhcpc(&e, 0).unwrap().1;
        assert_eq!(l.lease_secs, Some(120));
        assert_eq!(address_lifetime(l.lease_secs), 120);
        assert_eq!(lease_time(Some(" 600 ")), Ok(Some(600)));
        assert_eq!(lease_time(Some("")), Ok(None));
        assert_eq!(lease_time(None), Ok(None));
        let bad = env_of(&[("ip", "10.99.1.50"), ("mask", "24"), ("lease", "-5")]);
        assert_eq!(
            lease_from_udhcpc(&bad, 0).err().as_deref(),
            Some("the lease time '-5' is not a number of seconds")
        );
    }

    #[test]
    fn an_infinite_lease_is_installed_forever() {
        assert_eq!(address_lifetime(Some(INFINITE_LEASE)), u32::MAX);
        assert_eq!(address_lifetime(Some(600)), 600);
        assert_eq!(address_lifetime(Some(0)), 3600);
        assert_eq!(address_lifetime(None), 3600);
        let e = env_of(&[
            ("ip", "10.99.1.50"),
            ("mask", "24"),
            ("lease", "4294967295"),
        ]);
        assert_eq!(
            lease_from_udhcpc(&e, 0).unwrap().1.lease_secs,
            Some(4_294_967_295)
        );
    }
}
