//! Apply → confirm → roll back, the LuCI / Cockpit practice, so that a wrong change from a
//! browser can never lock the user out:
//!
//! 1. a change (or a list of them) is validated against the live ports; bad input changes
//!    nothing;
//! 2. the parts of the configuration it touches are snapshotted *to a file in the data
//!    directory* (written and synced before anything is changed), then the change is applied
//!    through netlink and the firewall backend;
//! 3. it must be confirmed within a window (default 60 s): then the new configuration is
//!    stored in SQLite as the confirmed one and the snapshot file goes; otherwise it is rolled
//!    back to the snapshot automatically. If the daemon (or the board) restarts inside the
//!    window, [`Controller::startup`] restores the snapshot before the UI is served, then
//!    re-applies the confirmed configuration.
//!
//! "Apply unchecked" skips the window (for a deliberate move of the management address, whose
//! confirmation could never arrive). A change that removes the address the browser came in on
//! is refused with a warning unless asked for explicitly. Every operation runs in this
//! process's network namespace. Not for: how one operation is done (`addresses`,
//! `forwarding`) or what is valid (`netconfig`).

use super::addresses::{self, Gateway};
use super::error::BoardError;
use super::forwarding::{self, Backend, BackendChoice, Forward, Sysctls};
use super::governor::{self, Core};
use super::links::{self, netlink, Link};
use super::netconfig::{
    management_warning, port_state, validate, Change, DefaultRoute, FwState, NetState, PortState,
    Scope,
};
use crate::store::{BoardLogRow, Store};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default confirmation window, seconds.
pub(crate) const DEFAULT_WINDOW_SECS: u32 = 60;
/// Longest confirmation window accepted, seconds.
pub(crate) const MAX_WINDOW_SECS: u32 = 3600;
/// File (in the data directory) holding the roll-back snapshot of an unconfirmed change.
pub(crate) const SNAPSHOT_FILE: &str = "board-rollback.json";
/// Environment variable overriding the confirmation window (seconds).
pub(crate) const WINDOW_ENV: &str = "NETPERFD_CONFIRM_WINDOW";
/// Environment variable overriding the firewall backend (`auto`, `nftables`, `iptables`).
pub(crate) const FIREWALL_ENV: &str = "NETPERFD_FIREWALL";
/// Settings key (store) of the confirmation window, seconds.
pub(crate) const WINDOW_KEY: &str = "board.confirm_window_secs";
/// Settings key (store) of the firewall backend choice.
pub(crate) const FIREWALL_KEY: &str = "board.firewall";

/// Why the board is read-only, when it is.
pub(crate) const READ_ONLY_REASON: &str = "netperfd runs without the CAP_NET_ADMIN capability, so it can show the ports but not change them. Run it as root or grant CAP_NET_ADMIN (the shipped systemd unit does, with AmbientCapabilities=CAP_NET_ADMIN).";

/// Whether this process may change the network (CAP_NET_ADMIN in its effective set).
pub(crate) fn net_admin() -> Result<(), BoardError> {
    const CAP_NET_ADMIN: u32 = 12;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Ok(()); // cannot tell: let the kernel decide
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    match eff {
        Some(caps) if caps & (1 << CAP_NET_ADMIN) == 0 => {
            Err(BoardError::ReadOnly(READ_ONLY_REASON.into()))
        }
        _ => Ok(()),
    }
}

/// How a change is to be applied.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// Confirmation window in seconds; None = the configured default.
    pub confirm_within: Option<u32>,
    /// Apply and keep at once, without a confirmation window.
    pub unchecked: bool,
    /// Apply even when it removes the management address (with the window: it will roll
    /// back unless confirmed over another path).
    pub force: bool,
    /// The board address the request came in on (for the lock-out warning).
    pub mgmt: Option<IpAddr>,
    /// Where the change comes from: `web`, `api`, `cli`.
    pub source: String,
}

/// A change waiting for confirmation, as shown to the user.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PendingView {
    /// Id of the pending change (grows with every apply).
    pub id: u64,
    /// What was changed, one line per change.
    pub changes: Vec<String>,
    /// When it is rolled back unless confirmed, Unix ms.
    pub deadline: i64,
    /// Seconds until then (rounded up).
    pub seconds_left: u64,
    /// The window it was given, seconds.
    pub window_secs: u32,
}

/// What a change would do (see [`Controller::preview`]).
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    /// The changes, one line each.
    pub applied: Vec<String>,
    /// The warning when the change takes away the address the request came in on.
    pub cuts_off: Option<String>,
    /// The addresses the port of that address keeps or gets (where to reconnect).
    pub moved_to: Vec<String>,
}

struct Plan {
    before: NetState,
    after: NetState,
    descs: Vec<String>,
    cuts_off: Option<String>,
    moved_to: Vec<String>,
}

/// What an apply did.
#[derive(Debug, Clone, Serialize)]
pub struct ApplyOutcome {
    /// The changes, one line each.
    pub applied: Vec<String>,
    /// The change now waits for confirmation (None when applied unchecked).
    pub pending: Option<PendingView>,
    /// Applied without a confirmation window (and stored as confirmed).
    pub unchecked: bool,
}

/// The roll-back snapshot of an unconfirmed change (also the on-disk format).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Pending {
    id: u64,
    created_at: i64,
    deadline: i64,
    window_secs: u32,
    /// The touched parts as they were before the first unconfirmed change.
    before: NetState,
    /// The touched parts as the changes made them (stored as confirmed on confirm).
    after: NetState,
    changes: Vec<String>,
    #[serde(default)]
    log_ids: Vec<i64>,
}

impl Pending {
    fn view(&self) -> PendingView {
        let left = (self.deadline - crate::model::time::now_ms()).max(0);
        PendingView {
            id: self.id,
            changes: self.changes.clone(),
            deadline: self.deadline,
            seconds_left: (left as u64).div_ceil(1000),
            window_secs: self.window_secs,
        }
    }
}

struct Inner {
    pending: Option<Pending>,
    next_id: u64,
}

/// Forwarding as the UI shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardingView {
    /// The backend in use (`nftables` / `iptables`); None when the image has neither.
    pub backend: Option<Backend>,
    /// The configured choice: `auto`, `nftables` or `iptables`.
    pub backend_choice: String,
    /// Why no backend is usable, when none is.
    pub backend_error: Option<String>,
    /// Enabled forwards.
    pub forwards: Vec<Forward>,
    /// net.ipv4.ip_forward.
    pub ipv4_forwarding: bool,
    /// net.ipv6.conf.all.forwarding.
    pub ipv6_forwarding: bool,
}

/// Everything the ports page and `GET /api/board` show.
#[derive(Debug, Clone, Serialize)]
pub struct BoardView {
    /// Every interface, with counters and live rates.
    pub ports: Vec<Link>,
    /// The IPv4 default route.
    pub ipv4_default_route: Option<Gateway>,
    /// The IPv6 default route.
    pub ipv6_default_route: Option<Gateway>,
    /// Forwarding and NAT.
    pub forwarding: ForwardingView,
    /// A change waiting for confirmation.
    pub pending: Option<PendingView>,
    /// The default confirmation window, seconds.
    pub confirm_window_secs: u32,
    /// Whether this process may change the network.
    pub writable: bool,
    /// Why not, when it may not.
    pub read_only_reason: Option<String>,
    /// CPU frequency governor per core.
    pub governors: Vec<Core>,
    /// The confirmed configuration, re-applied when the daemon starts.
    pub confirmed: NetState,
    /// Addresses of the confirmed configuration that are not on the board now, as
    /// `192.0.2.1/24 on eth0` (something else reconfigured the port: `networkctl
    /// reconfigure`, a DHCP client, NetworkManager). Empty while a change is pending.
    pub missing: Vec<String>,
    /// The newest changes and their outcomes.
    pub log: Vec<BoardLogRow>,
    /// The image's DHCP client, as the page names it ("udhcpc (busybox /bin/busybox)").
    pub dhcp_client: Option<String>,
    /// Why no port can be switched to DHCP, when none can.
    pub dhcp_unavailable: Option<String>,
    /// Each non-loopback port's addressing (`dhcp` / `static`) and lease, by port name.
    pub addressing: std::collections::BTreeMap<String, super::dhcp::PortDhcp>,
}

/// The board-control engine. The daemon makes one ([`start_daemon`]) and hands it to the web
/// layer and the run context; one-shot CLI commands make their own. It owns the board's 1 Hz
/// sampler and the last configuration it read (for the network snapshot of each run).
pub struct Controller {
    store: Option<Arc<Store>>,
    snapshot: Option<PathBuf>,
    inner: tokio::sync::Mutex<Inner>,
    backend: Mutex<Option<(BackendChoice, Backend)>>,
    rt: tokio::runtime::Handle,
    sampler: Arc<super::sampler::Sampler>,
    last_state: Mutex<Option<NetState>>,
    dhcp: super::dhcp::Dhcp,
}

/// The daemon's start-up hook, to be awaited before the web UI is served: makes the
/// controller over `store` and `data_dir`, restores the snapshot of a change left unconfirmed
/// by a previous run, re-applies the confirmed configuration, and starts the board's 1 Hz
/// sampler with the port inventory. Failures are logged; the daemon goes on (the UI must come up in any case).
pub(crate) async fn start_daemon(store: Arc<Store>, data_dir: &Path) -> Arc<Controller> {
    let c = Controller::new(Some(store), Some(data_dir));
    c.startup().await;
    c.sampler.read_inventory();
    c.sampler.start(&c.rt);
    c
}

fn env_window() -> Option<u32> {
    std::env::var(WINDOW_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|v| (1..=MAX_WINDOW_SECS).contains(v))
}

/// Check a confirmation window given by a user, seconds.
pub(crate) fn check_window(secs: u32) -> Result<u32, BoardError> {
    if (1..=MAX_WINDOW_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(BoardError::Invalid(format!(
            "the confirmation window must be 1..{MAX_WINDOW_SECS} seconds, got {secs}"
        )))
    }
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> BoardError {
    BoardError::System(format!("{what} {}: {e}", p.display()))
}

/// Write `text` to `path` atomically and durably (temp file, fsync, rename, fsync dir).
fn write_durable(path: &Path, text: &str) -> Result<(), BoardError> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| io_err("cannot write", &tmp, e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| io_err("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err("cannot write", path, e))?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

impl Controller {
    /// A controller persisting the confirmed configuration in `store` and the roll-back
    /// snapshot in `data_dir` (both optional: without them nothing survives a restart).
    /// Timers run on the current tokio runtime.
    pub fn new(store: Option<Arc<Store>>, data_dir: Option<&Path>) -> Arc<Controller> {
        Arc::new(Controller {
            store,
            snapshot: data_dir.map(|d| d.join(SNAPSHOT_FILE)),
            inner: tokio::sync::Mutex::new(Inner {
                pending: None,
                next_id: 1,
            }),
            backend: Mutex::new(None),
            rt: tokio::runtime::Handle::current(),
            sampler: super::sampler::Sampler::new(),
            last_state: Mutex::new(None),
            dhcp: super::dhcp::Dhcp::new(match data_dir {
                Some(d) => d.join("dhcp"),
                None => std::env::temp_dir().join(format!("netperfd-dhcp-{}", std::process::id())),
            }),
        })
    }

    /// The board's 1 Hz sampler (the runs' monitor samples runs with it; see
    /// [`super::sampler::Sampler`]).
    pub fn sampler(&self) -> &Arc<super::sampler::Sampler> {
        &self.sampler
    }

    /// Every interface of the board with the sampler's latest rates (see
    /// [`links::inventory`]). Errors: netlink could not be read.
    pub async fn inventory(&self) -> Result<Vec<Link>, BoardError> {
        let mut l = links::inventory().await?;
        self.sampler.ports().attach_rates(&mut l);
        Ok(l)
    }

    fn set_last_state(&self, s: &NetState) {
        *self.last_state.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.clone());
    }

    /// The confirmation window in force, seconds: `$NETPERFD_CONFIRM_WINDOW`, else the stored
    /// setting, else 60.
    pub fn window_secs(&self) -> u32 {
        env_window()
            .or_else(|| {
                self.store
                    .as_ref()
                    .and_then(|s| s.setting(WINDOW_KEY).ok().flatten())
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|v| (1..=MAX_WINDOW_SECS).contains(v))
            })
            .unwrap_or(DEFAULT_WINDOW_SECS)
    }

    /// The firewall backend choice: `$NETPERFD_FIREWALL`, else the stored setting, else auto.
    pub fn backend_choice(&self) -> BackendChoice {
        std::env::var(FIREWALL_ENV)
            .ok()
            .or_else(|| {
                self.store
                    .as_ref()
                    .and_then(|s| s.setting(FIREWALL_KEY).ok().flatten())
            })
            .and_then(|v| BackendChoice::parse(&v).ok())
            .unwrap_or(BackendChoice::Auto)
    }

    /// Store the default window and backend choice (validated; environment variables still
    /// take precedence).
    pub fn save_settings(
        &self,
        window: Option<u32>,
        firewall: Option<&str>,
    ) -> Result<(), BoardError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| BoardError::System("no data directory to keep settings in".into()))?;
        let w = window.map(check_window).transpose()?;
        let f = firewall
            .map(|f| BackendChoice::parse(f).map_err(BoardError::Invalid))
            .transpose()?;
        if let Some(f) = f {
            if f != BackendChoice::Auto {
                forwarding::detect(f)?;
            }
        }
        let err = |e: crate::store::StoreError| BoardError::System(e.to_string());
        if let Some(w) = w {
            store.set_setting(WINDOW_KEY, &w.to_string()).map_err(err)?;
        }
        if let Some(f) = f {
            store.set_setting(FIREWALL_KEY, f.name()).map_err(err)?;
        }
        Ok(())
    }

    /// The firewall backend to use (detected once per choice).
    pub fn backend(&self) -> Result<Backend, BoardError> {
        let choice = self.backend_choice();
        if let Ok(g) = self.backend.lock() {
            if let Some((c, b)) = *g {
                if c == choice {
                    return Ok(b);
                }
            }
        }
        let b = forwarding::detect(choice)?;
        if let Ok(mut g) = self.backend.lock() {
            *g = Some((choice, b));
        }
        Ok(b)
    }

    fn confirmed(&self) -> NetState {
        self.store
            .as_ref()
            .and_then(|s| s.board_config().ok().flatten())
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default()
    }

    fn log_add(
        &self,
        source: &str,
        changes: &[String],
        outcome: &str,
        detail: Option<&str>,
    ) -> Option<i64> {
        let s = self.store.as_ref()?;
        match s.board_log_add(source, &changes.join("; "), outcome, detail) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::warn!("cannot log a board change: {e}");
                None
            }
        }
    }

    fn log_decide(&self, ids: &[i64], outcome: &str, detail: Option<&str>) {
        if let Some(s) = &self.store {
            if let Err(e) = s.board_log_decide(ids, outcome, detail) {
                tracing::warn!("cannot log a board change: {e}");
            }
        }
    }

    fn read_snapshot(&self) -> Option<Pending> {
        let p = self.snapshot.as_ref()?;
        let text = std::fs::read_to_string(p).ok()?;
        match serde_json::from_str(&text) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(
                    "ignoring an unreadable roll-back snapshot {}: {e}",
                    p.display()
                );
                None
            }
        }
    }

    fn write_snapshot(&self, p: &Pending) -> Result<(), BoardError> {
        let Some(path) = &self.snapshot else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(p)
            .map_err(|e| BoardError::System(format!("cannot encode the snapshot: {e}")))?;
        write_durable(path, &text)
    }

    fn remove_snapshot(&self) {
        if let Some(p) = &self.snapshot {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::error!("cannot remove {}: {e}", p.display()),
            }
        }
    }

    fn saved_sysctls(&self, inner: &Inner) -> Option<Sysctls> {
        if let Some(fw) = inner
            .pending
            .as_ref()
            .and_then(|p| p.after.forwarding.as_ref())
        {
            return fw.saved;
        }
        self.confirmed().forwarding.and_then(|f| f.saved)
    }

    /// The live configuration (every non-loopback port, both default routes, forwarding)
    /// and the inventory it was read from.
    async fn read_state(&self, inner: &Inner) -> Result<(NetState, Vec<Link>), BoardError> {
        let h = netlink()?;
        let links = self.inventory().await?;
        let name_of = |i: Option<u32>| {
            i.and_then(|i| links.iter().find(|l| l.index == i).map(|l| l.name.clone()))
        };
        let gw = |r: Option<(IpAddr, Option<u32>)>| DefaultRoute {
            gateway: r.map(|(via, oif)| Gateway {
                via,
                port: name_of(oif),
            }),
        };
        let g4 = gw(addresses::default_route(&h, false).await?);
        let g6 = gw(addresses::default_route(&h, true).await?);
        let forwards = match self.backend() {
            Ok(b) => match crate::engine::task::spawn_blocking(move || forwarding::read(b))
                .await
                .map_err(|e| BoardError::System(format!("reading the firewall: {e}")))
                .and_then(|r| r)
            {
                Ok(f) => f,
                // Without CAP_NET_ADMIN the firewall cannot even be read; nothing can be
                // changed either, so show none.
                Err(_) if net_admin().is_err() => Vec::new(),
                Err(e) => return Err(e),
            },
            Err(_) => Vec::new(),
        };
        let state = NetState {
            ports: links
                .iter()
                .filter(|l| !l.loopback)
                .map(|l| {
                    let mut p = port_state(l);
                    p.dhcp = self.dhcp.is_on(&l.name);
                    (l.name.clone(), p)
                })
                .collect(),
            ipv4_default_route: Some(g4),
            ipv6_default_route: Some(g6),
            forwarding: Some(FwState {
                forwards,
                sysctls: forwarding::read_sysctls(),
                saved: self.saved_sysctls(inner),
            }),
        };
        self.set_last_state(&state);
        Ok((state, links))
    }

    /// Make the system match `s` (only the parts it holds). Goes on after an error and
    /// reports the first one.
    async fn reconcile(&self, s: &NetState) -> Result<(), BoardError> {
        let h = netlink()?;
        let mut errors: Vec<BoardError> = Vec::new();
        let links = links::inventory().await?;
        // Clients are started last, once the default routes are as `s` has them: the client's
        // route is then not removed after it set it.
        let mut dhcp_starts: Vec<&str> = Vec::new();
        for (name, p) in &s.ports {
            let Some(l) = links.iter().find(|l| &l.name == name) else {
                errors.push(BoardError::System(format!(
                    "port {name} is not there any more"
                )));
                continue;
            };
            let n = name.as_str();
            let dhcp_on = self.dhcp.is_on(n);
            if !p.dhcp && dhcp_on {
                if let Err(e) = self.dhcp.stop(n).await {
                    errors.push(e);
                }
            } else if p.dhcp && !dhcp_on {
                dhcp_starts.push(n);
            }
            reconcile_port(&h, l, p, &mut errors).await?;
        }
        self.reconcile_routes(&h, s, &links, &dhcp_starts, &mut errors)
            .await;
        if !dhcp_starts.is_empty() {
            match super::dhcp::detect() {
                Ok(c) => {
                    for n in dhcp_starts {
                        if let Err(e) = self.dhcp.start(&c, n).await {
                            errors.push(e);
                        }
                    }
                }
                Err(e) => errors.push(BoardError::System(format!("DHCP: {e}"))),
            }
        }
        if let Some(fw) = &s.forwarding {
            self.reconcile_forwarding(fw, &mut errors).await;
        }
        match errors.into_iter().next() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// The default routes as `s` has them, on the board's ports `links`. A default route
    /// through a port by DHCP (whose client starts later if in `dhcp_starts`) is its client's.
    /// Errors go to `errors`.
    async fn reconcile_routes(
        &self,
        h: &rtnetlink::Handle,
        s: &NetState,
        links: &[Link],
        dhcp_starts: &[&str],
        errors: &mut Vec<BoardError>,
    ) {
        for (r, v6) in [
            (&s.ipv4_default_route, false),
            (&s.ipv6_default_route, true),
        ] {
            let Some(r) = r else { continue };
            // A default route through a port by DHCP is its client's to set: the old one is
            // not put back (the port has no address before the client's lease, so it would
            // fail), a stale one through that port goes when the client starts afresh.
            if let Some(pn) = r.gateway.as_ref().and_then(|g| g.port.as_deref()) {
                let by_dhcp = match s.ports.get(pn) {
                    Some(p) => p.dhcp,
                    None => self.dhcp.is_on(pn),
                };
                if !v6 && by_dhcp {
                    if dhcp_starts.contains(&pn) {
                        if let Some(l) = links.iter().find(|l| l.name == pn) {
                            if let Err(e) =
                                addresses::del_default_routes_via(h, false, l.index).await
                            {
                                errors.push(e);
                            }
                        }
                    }
                    continue;
                }
            }
            let target = match &r.gateway {
                None => None,
                Some(g) => {
                    let oif = match &g.port {
                        None => None,
                        Some(p) => match links.iter().find(|l| &l.name == p) {
                            Some(l) => Some(l.index),
                            None => {
                                errors.push(BoardError::System(format!(
                                    "port {p} of the default route is not there any more"
                                )));
                                continue;
                            }
                        },
                    };
                    Some((g.via, oif))
                }
            };
            if let Err(e) = addresses::set_default_route(h, v6, target).await {
                errors.push(e);
            }
        }
    }

    /// The firewall's forwards and the kernel's forwarding switches as `fw` has them. Errors
    /// go to `errors` (no firewall backend only when there is something to forward).
    async fn reconcile_forwarding(&self, fw: &FwState, errors: &mut Vec<BoardError>) {
        let forwards = fw.forwards.clone();
        match self.backend() {
            Ok(b) => {
                let r =
                    crate::engine::task::spawn_blocking(move || forwarding::write(b, &forwards))
                        .await
                        .map_err(|e| BoardError::System(format!("writing the firewall: {e}")))
                        .and_then(|r| r);
                if let Err(e) = r {
                    errors.push(e);
                }
            }
            Err(e) if !fw.forwards.is_empty() => errors.push(e),
            Err(_) => {}
        }
        if let Err(e) = forwarding::write_sysctls(fw.sysctls) {
            errors.push(e);
        }
    }

    /// Stop the DHCP clients netperfd runs (a graceful stop of the daemon): none is left
    /// running as an orphan; the ports stay by DHCP in the confirmed configuration.
    pub async fn stop_dhcp_clients(&self) {
        self.dhcp.stop_children().await;
    }

    /// Validate `changes` against the live board without applying them: what they would do,
    /// and the lock-out warning when they take away the address the request came in on
    /// (an error unless `o.unchecked` or `o.force`).
    pub async fn preview(
        &self,
        changes: &[Change],
        o: &ApplyOptions,
    ) -> Result<Preview, BoardError> {
        let inner = self.inner.lock().await;
        let plan = self.plan(&inner, changes, o).await?;
        Ok(Preview {
            applied: plan.descs,
            cuts_off: plan.cuts_off,
            moved_to: plan.moved_to,
        })
    }

    /// Apply `changes` after `delay` (on the controller's runtime), for a change that takes
    /// away the address the request came in on: the answer must leave before the address
    /// goes. Errors are logged.
    pub fn apply_later(
        self: &Arc<Self>,
        changes: Vec<Change>,
        mut o: ApplyOptions,
        delay: Duration,
    ) {
        o.mgmt = None;
        let me = self.clone();
        crate::engine::task::spawn_on(&self.rt, async move {
            tokio::time::sleep(delay).await;
            if let Err(e) = me.apply(&changes, &o).await {
                tracing::error!("applying a board change that moves the management address: {e}");
            }
        });
    }

    async fn plan(
        &self,
        inner: &Inner,
        changes: &[Change],
        o: &ApplyOptions,
    ) -> Result<Plan, BoardError> {
        if changes.is_empty() {
            return Err(BoardError::Invalid("no change given".into()));
        }
        if let Some(w) = o.confirm_within {
            check_window(w)?;
        }
        net_admin()?;
        if inner.pending.is_none() && self.snapshot.as_ref().is_some_and(|p| p.exists()) {
            return Err(BoardError::Conflict(format!(
                "another netperfd process has a change waiting for confirmation ({}); confirm or roll it back there first",
                self.snapshot.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
            )));
        }
        if o.unchecked && inner.pending.is_some() {
            return Err(BoardError::Conflict(
                "another change is waiting for confirmation; confirm it or roll it back first"
                    .into(),
            ));
        }
        if changes
            .iter()
            .any(|c| matches!(c, Change::Addressing { method, .. } if method.trim() == "dhcp"))
        {
            super::dhcp::detect()
                .map_err(|e| BoardError::Invalid(format!("cannot switch to DHCP: {e}")))?;
        }
        let (live, links) = self.read_state(inner).await?;
        let mut target = live.clone();
        let mut scope = Scope::default();
        let mut descs = Vec::new();
        for c in changes {
            descs.push(c.apply_to(&mut target, &links)?);
            let s = c.scope();
            for p in s.ports {
                if !scope.ports.contains(&p) {
                    scope.ports.push(p);
                }
            }
            scope.gw4 |= s.gw4;
            scope.gw6 |= s.gw6;
            scope.forwarding |= s.forwarding;
        }
        validate(&target, &live, &links)?;
        if scope.forwarding
            && target
                .forwarding
                .as_ref()
                .is_some_and(|f| !f.forwards.is_empty())
        {
            self.backend()?;
        }
        let cuts_off = o
            .mgmt
            .and_then(|ip| management_warning(&links, &live, &target, ip));
        if let (Some(w), false, false) = (&cuts_off, o.unchecked, o.force) {
            return Err(BoardError::Warning(w.clone()));
        }
        let moved_to = match (o.mgmt, &cuts_off) {
            (Some(ip), Some(_)) => links
                .iter()
                .find(|l| l.addresses.iter().any(|a| a.address.addr == ip))
                .and_then(|l| target.ports.get(&l.name))
                .filter(|p| p.up)
                .map(|p| {
                    p.addresses
                        .iter()
                        .filter(|a| a.is_ipv4() == ip.is_ipv4())
                        .map(|a| a.addr.to_string())
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let before = live.restrict(&scope);
        let after = target.restrict(&scope);
        if before == after {
            return Err(BoardError::Invalid(format!(
                "nothing would change ({})",
                descs.join("; ")
            )));
        }
        Ok(Plan {
            before,
            after,
            descs,
            cuts_off,
            moved_to,
        })
    }

    /// Validate and apply `changes` (all or nothing), then wait for confirmation unless
    /// `o.unchecked`. With another change already pending, the two are confirmed (or rolled
    /// back) together and the window starts again.
    pub async fn apply(
        self: &Arc<Self>,
        changes: &[Change],
        o: &ApplyOptions,
    ) -> Result<ApplyOutcome, BoardError> {
        let mut inner = self.inner.lock().await;
        let Plan {
            before,
            after,
            descs,
            ..
        } = self.plan(&inner, changes, o).await?;
        let window = o.confirm_within.unwrap_or_else(|| self.window_secs());

        if o.unchecked {
            if let Err(e) = self.reconcile(&after).await {
                let undo = self.reconcile(&before).await.err();
                self.log_add(&o.source, &descs, "failed", Some(&e.to_string()));
                return Err(failed(e, undo));
            }
            let mut confirmed = self.confirmed();
            confirmed.overlay(&after);
            self.store_confirmed(&confirmed)?;
            self.log_add(&o.source, &descs, "unchecked", None);
            tracing::info!("board change applied unchecked: {}", descs.join("; "));
            let _ = self.read_state(&inner).await;
            return Ok(ApplyOutcome {
                applied: descs,
                pending: None,
                unchecked: true,
            });
        }

        let now = crate::model::time::now_ms();
        let prev = inner.pending.clone();
        let mut snap_before = prev.as_ref().map(|p| p.before.clone()).unwrap_or_default();
        snap_before.fill_from(&before);
        let mut cum_after = prev.as_ref().map(|p| p.after.clone()).unwrap_or_default();
        cum_after.overlay(&after);
        let mut all_changes = prev.as_ref().map(|p| p.changes.clone()).unwrap_or_default();
        all_changes.extend(descs.iter().cloned());
        let mut pending = Pending {
            id: inner.next_id,
            created_at: prev.as_ref().map(|p| p.created_at).unwrap_or(now),
            deadline: now + i64::from(window) * 1000,
            window_secs: window,
            before: snap_before,
            after: cum_after,
            changes: all_changes,
            log_ids: prev.as_ref().map(|p| p.log_ids.clone()).unwrap_or_default(),
        };
        // The snapshot is on disk before anything changes.
        self.write_snapshot(&pending)
            .map_err(|e| BoardError::System(format!("{e}; nothing was changed")))?;
        if let Err(e) = self.reconcile(&after).await {
            let undo = self.reconcile(&before).await.err();
            match &prev {
                Some(p) => {
                    let _ = self.write_snapshot(p);
                }
                None => self.remove_snapshot(),
            }
            self.log_add(&o.source, &descs, "failed", Some(&e.to_string()));
            return Err(failed(e, undo));
        }
        if let Some(id) = self.log_add(&o.source, &descs, "pending", None) {
            pending.log_ids.push(id);
            let _ = self.write_snapshot(&pending);
        }
        inner.next_id += 1;
        let view = pending.view();
        let id = pending.id;
        inner.pending = Some(pending);
        tracing::info!(
            "board change applied, to be confirmed within {window} s: {}",
            descs.join("; ")
        );
        let _ = self.read_state(&inner).await;
        drop(inner);
        let me = self.clone();
        crate::engine::task::spawn_on(&self.rt, async move {
            tokio::time::sleep(Duration::from_secs(u64::from(window))).await;
            me.rollback_if(id, &format!("not confirmed within {window} s"))
                .await;
        });
        Ok(ApplyOutcome {
            applied: descs,
            pending: Some(view),
            unchecked: false,
        })
    }

    fn store_confirmed(&self, c: &NetState) -> Result<(), BoardError> {
        if let Some(s) = &self.store {
            let j = serde_json::to_string(c)
                .map_err(|e| BoardError::System(format!("cannot encode the configuration: {e}")))?;
            s.set_board_config(&j)
                .map_err(|e| BoardError::System(format!("cannot store the configuration: {e}")))?;
        }
        Ok(())
    }

    /// Keep the pending change: it becomes part of the confirmed configuration.
    pub async fn confirm(&self) -> Result<Vec<String>, BoardError> {
        let mut inner = self.inner.lock().await;
        let Some(p) = inner.pending.clone() else {
            return Err(BoardError::Conflict(
                "nothing is waiting for confirmation (a change not confirmed in time has been rolled back)".into(),
            ));
        };
        let mut confirmed = self.confirmed();
        confirmed.overlay(&p.after);
        self.store_confirmed(&confirmed)?;
        inner.pending = None;
        self.remove_snapshot();
        self.log_decide(&p.log_ids, "confirmed", None);
        tracing::info!("board change confirmed: {}", p.changes.join("; "));
        Ok(p.changes)
    }

    /// Undo the pending change now.
    pub async fn rollback(&self, reason: &str) -> Result<Vec<String>, BoardError> {
        let mut inner = self.inner.lock().await;
        match inner.pending.clone() {
            None => Err(BoardError::Conflict(
                "nothing is waiting for confirmation".into(),
            )),
            Some(p) => {
                self.roll_back(&mut inner, p.clone(), reason).await?;
                Ok(p.changes)
            }
        }
    }

    async fn rollback_if(&self, id: u64, reason: &str) {
        let mut inner = self.inner.lock().await;
        if let Some(p) = inner.pending.clone().filter(|p| p.id == id) {
            let _ = self.roll_back(&mut inner, p, reason).await;
        }
    }

    async fn roll_back(
        &self,
        inner: &mut Inner,
        p: Pending,
        reason: &str,
    ) -> Result<(), BoardError> {
        inner.pending = None;
        let r = self.reconcile(&p.before).await;
        match &r {
            Ok(()) => {
                self.remove_snapshot();
                self.log_decide(&p.log_ids, "rolled back", Some(reason));
                tracing::warn!(
                    "board change rolled back ({reason}): {}",
                    p.changes.join("; ")
                );
            }
            Err(e) => {
                // Everything that could be restored was; what failed is in the log. The
                // snapshot goes too, or it would block every later change.
                self.remove_snapshot();
                self.log_decide(&p.log_ids, "roll-back failed", Some(&e.to_string()));
                tracing::error!("rolling back a board change ({reason}) failed: {e}");
            }
        }
        let _ = self.read_state(inner).await;
        r
    }

    /// At daemon start: restore the snapshot of a change a previous run left unconfirmed,
    /// then re-apply the confirmed configuration. Logs what it does; never fails.
    pub async fn startup(&self) {
        let inner = self.inner.lock().await;
        let snap = self.read_snapshot();
        if net_admin().is_err() {
            if snap.is_some() {
                tracing::error!("a board change was left unconfirmed, but {READ_ONLY_REASON}");
            }
            return;
        }
        if let Some(p) = snap {
            tracing::warn!(
                "a board change was not confirmed before netperfd stopped ({}); restoring the previous configuration",
                p.changes.join("; ")
            );
            match self.reconcile(&p.before).await {
                Ok(()) => {
                    self.remove_snapshot();
                    self.log_decide(
                        &p.log_ids,
                        "rolled back",
                        Some("netperfd restarted before it was confirmed"),
                    );
                }
                Err(e) => {
                    tracing::error!("restoring the previous board configuration: {e}");
                    self.remove_snapshot();
                    self.log_decide(&p.log_ids, "roll-back failed", Some(&e.to_string()));
                }
            }
        }
        let c = self.confirmed();
        if !c.is_empty() {
            match self.reconcile(&c).await {
                Ok(()) => tracing::info!("confirmed board configuration applied"),
                Err(e) => tracing::error!("applying the confirmed board configuration: {e}"),
            }
        }
        let _ = self.read_state(&inner).await;
    }

    /// Keep the board's forwarding as it is now (rules and sysctls read from the kernel) in
    /// the stored confirmed configuration, the rest of it unchanged. For the daemon's start:
    /// a cut-short run's forwarding undone on the board while the store could not write (a
    /// full disk) is stored once it can, so the next start does not re-apply it. Errors: the
    /// board cannot be read, or the store cannot write.
    pub async fn store_live_forwarding(&self) -> Result<(), BoardError> {
        let inner = self.inner.lock().await;
        let (live, _) = self.read_state(&inner).await?;
        let mut confirmed = self.confirmed();
        if confirmed.forwarding.is_none() && live.forwarding.is_none() {
            return Ok(());
        }
        confirmed.forwarding = live.forwarding;
        self.store_confirmed(&confirmed)
    }

    /// The pending change, if any.
    pub async fn pending(&self) -> Option<PendingView> {
        self.inner.lock().await.pending.as_ref().map(Pending::view)
    }

    /// Each non-loopback port's addressing (`dhcp` / `static`) and lease, by port name, and
    /// the board's IPv4 default route as the kernel has it now: what the Ports page refreshes
    /// live (its lease cards, the "default route" mark). Reads the kernel and the clients'
    /// lease files, not the firewall or the store. Errors: the ports cannot be read.
    pub async fn addressing(
        &self,
    ) -> Result<
        (
            std::collections::BTreeMap<String, super::dhcp::PortDhcp>,
            Option<Gateway>,
        ),
        BoardError,
    > {
        let links = self.inventory().await?;
        let client = super::dhcp::detect();
        let map = self
            .addressing_of(&links, &client, |n| self.dhcp.is_on(n))
            .await;
        let h = netlink()?;
        let gw = addresses::default_route(&h, false)
            .await?
            .map(|(via, oif)| Gateway {
                via,
                port: oif.and_then(|i| links.iter().find(|l| l.index == i).map(|l| l.name.clone())),
            });
        Ok((map, gw))
    }

    async fn addressing_of(
        &self,
        ports: &[Link],
        client: &Result<super::dhcp::Client, String>,
        by_dhcp: impl Fn(&str) -> bool,
    ) -> std::collections::BTreeMap<String, super::dhcp::PortDhcp> {
        let mut addressing = std::collections::BTreeMap::new();
        for l in ports.iter().filter(|l| !l.loopback) {
            let on = by_dhcp(&l.name);
            let lease = match (client, on) {
                (Ok(c), true) => {
                    let dynamic = l
                        .addresses
                        .iter()
                        .find(|a| !a.permanent && a.address.is_ipv4())
                        .map(|a| (a.address, a.valid_secs));
                    self.dhcp.lease(c, &l.name, l.index, dynamic).await
                }
                _ => None,
            };
            addressing.insert(
                l.name.clone(),
                super::dhcp::PortDhcp {
                    method: if on { "dhcp" } else { "static" }.into(),
                    lease,
                },
            );
        }
        addressing
    }

    /// Everything the ports page shows.
    pub async fn view(&self) -> Result<BoardView, BoardError> {
        let inner = self.inner.lock().await;
        let (state, ports) = self.read_state(&inner).await?;
        let pending = inner.pending.as_ref().map(Pending::view);
        drop(inner);
        let (backend, backend_error) = match self.backend() {
            Ok(b) => (Some(b), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let fw = state.forwarding.clone().unwrap_or(FwState {
            forwards: Vec::new(),
            sysctls: forwarding::read_sysctls(),
            saved: None,
        });
        let writable = net_admin();
        let confirmed = self.confirmed();
        let missing = if pending.is_some() {
            Vec::new()
        } else {
            super::netconfig::missing_addresses(&confirmed, &ports)
        };
        let client = super::dhcp::detect();
        let addressing = self
            .addressing_of(&ports, &client, |n| {
                state.ports.get(n).is_some_and(|p| p.dhcp)
            })
            .await;
        Ok(BoardView {
            ports,
            ipv4_default_route: state.ipv4_default_route.and_then(|r| r.gateway),
            ipv6_default_route: state.ipv6_default_route.and_then(|r| r.gateway),
            forwarding: ForwardingView {
                backend,
                backend_choice: self.backend_choice().name().into(),
                backend_error,
                forwards: fw.forwards,
                ipv4_forwarding: fw.sysctls.ipv4,
                ipv6_forwarding: fw.sysctls.ipv6,
            },
            pending,
            confirm_window_secs: self.window_secs(),
            writable: writable.is_ok(),
            read_only_reason: writable.err().map(|e| e.to_string()),
            governors: governor::read(),
            confirmed,
            missing,
            log: self
                .store
                .as_ref()
                .and_then(|s| s.board_log(20).ok())
                .unwrap_or_default(),
            dhcp_client: client.as_ref().ok().map(|c| c.describe()),
            dhcp_unavailable: client.err(),
            addressing,
        })
    }
}

/// Make port `l` match `p`: MTU, up before its addresses change, the static addresses
/// (added and removed, twice: removing a primary IPv4 address can take its secondaries
/// along), down after. Errors go to `errors`; reading the ports again failing ends it.
async fn reconcile_port(
    h: &rtnetlink::Handle,
    l: &Link,
    p: &PortState,
    errors: &mut Vec<BoardError>,
) -> Result<(), BoardError> {
    let (i, n) = (l.index, l.name.as_str());
    if l.mtu != p.mtu {
        if let Err(e) = addresses::set_mtu(h, i, n, p.mtu).await {
            errors.push(e);
        }
    }
    if p.up && !l.up {
        if let Err(e) = addresses::set_up(h, i, n, true).await {
            errors.push(e);
        }
    }
    // Twice: removing a primary IPv4 address can take its secondaries along.
    for _ in 0..2 {
        let now = links::inventory().await?;
        let cur = now
            .iter()
            .find(|x| x.index == i)
            .map(|x| x.managed_addresses())
            .unwrap_or_default();
        for a in p.addresses.iter().filter(|a| !cur.contains(a)) {
            if let Err(e) = addresses::add_address(h, i, n, *a).await {
                errors.push(e);
            }
        }
        for a in cur.iter().filter(|a| !p.addresses.contains(a)) {
            if let Err(e) = addresses::del_address(h, i, n, *a).await {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            break;
        }
    }
    if !p.up && l.up {
        if let Err(e) = addresses::set_up(h, i, n, false).await {
            errors.push(e);
        }
    }
    Ok(())
}

fn failed(e: BoardError, undo: Option<BoardError>) -> BoardError {
    let tail = match undo {
        None => "; the previous configuration was restored".to_string(),
        Some(u) => format!("; restoring the previous configuration failed too: {u}"),
    };
    match e {
        BoardError::ReadOnly(m) => BoardError::ReadOnly(format!("{m}{tail}")),
        BoardError::Invalid(m) => BoardError::Invalid(format!("{m}{tail}")),
        other => BoardError::System(format!("{other}{tail}")),
    }
}

/// Record [`snapshot_json`] as the network configuration run `run_id` runs under (errors are
/// logged: a run is never refused for this).
pub fn record_net_config(store: &Store, run_id: i64, board: Option<&Controller>) {
    if let Err(e) = store.set_run_net_config(run_id, &snapshot_json(board)) {
        tracing::warn!(run = run_id, "cannot record the network configuration: {e}");
    }
}

/// The network configuration a run runs under, as JSON: ports (state, link, addresses),
/// default routes, forwarding, the kernel switches and the CPU governor per core. Cheap and
/// synchronous (the sampler's last inventory, at most about a second old, and the last state
/// `board` read); without a controller (one-shot CLI runs) the ports come from a quick
/// `/proc`/sysfs read and the default routes and forwards are left out. Never fails.
pub fn snapshot_json(board: Option<&Controller>) -> String {
    let ports: Vec<serde_json::Value> = match board.and_then(|b| b.sampler.ports().cached()) {
        Some(l) => l
            .iter()
            .filter(|l| !l.loopback)
            .map(|l| {
                serde_json::json!({
                    "name": l.name, "up": l.up, "carrier": l.carrier, "mtu": l.mtu,
                    "speed_mbps": l.speed_mbps, "duplex": l.duplex, "driver": l.driver,
                    "mac": l.mac,
                    "addresses": l.addresses.iter().map(|a| a.address.to_string()).collect::<Vec<_>>(),
                })
            })
            .collect(),
        None => super::ports()
            .iter()
            .filter(|p| !p.loopback)
            .map(|p| {
                serde_json::json!({
                    "name": p.name, "up": p.up, "carrier": p.running,
                    "addresses": p.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                })
            })
            .collect(),
    };
    let last = board.and_then(|b| {
        b.last_state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    });
    let gw = |r: Option<&DefaultRoute>| r.and_then(|r| r.gateway.as_ref()).map(|g| g.to_string());
    let fw = last.as_ref().and_then(|s| s.forwarding.as_ref());
    let s = forwarding::read_sysctls();
    serde_json::json!({
        "captured_at": crate::model::time::now_ms(),
        "ports": ports,
        "ipv4_default_route": last.as_ref().and_then(|s| gw(s.ipv4_default_route.as_ref())),
        "ipv6_default_route": last.as_ref().and_then(|s| gw(s.ipv6_default_route.as_ref())),
        "forwards": fw.map(|f| f.forwards.clone()).unwrap_or_default(),
        "ipv4_forwarding": s.ipv4,
        "ipv6_forwarding": s.ipv6,
        "tcp_timestamps": super::tcp_timestamps_enabled(),
        "cpu_governors": governor::read().iter().map(|c| serde_json::json!({"cpu": c.cpu, "governor": c.governor})).collect::<Vec<_>>(),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_and_snapshot_files() {
        assert_eq!(check_window(3), Ok(3));
        assert!(check_window(0)
            .unwrap_err()
            .to_string()
            .contains("1..3600 seconds, got 0"));
        assert!(check_window(3601).is_err());
        let d = crate::scratch::dir("apply");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(SNAPSHOT_FILE);
        let pend = Pending {
            id: 7,
            created_at: 1,
            deadline: 61_000,
            window_secs: 60,
            before: NetState::default(),
            after: NetState::default(),
            changes: vec!["add 192.0.2.5/24 to eth0".into()],
            log_ids: vec![3],
        };
        write_durable(&p, &serde_json::to_string(&pend).unwrap()).unwrap();
        let back: Pending = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(back, pend);
        assert_eq!(back.view().seconds_left, 0, "deadline long past");
        assert!(!d.join("board-rollback.json.tmp").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn snapshot_json_is_one_document() {
        let v: serde_json::Value = serde_json::from_str(&snapshot_json(None)).unwrap();
        assert!(v["ports"].is_array());
        assert!(v["captured_at"].as_i64().unwrap_or(0) > 0);
        assert!(v["ipv4_forwarding"].is_boolean());
    }
}
