//! `netperfd daemon`: the appliance. Opens the history, starts the built-in iperf3 server
//! (recording every test a peer runs against the board), serves the web UI and API, and tells
//! systemd when it is ready (sd_notify READY=1, WATCHDOG=1 pings when WatchdogSec is set).

use crate::config::Config;
use crate::engine::iperf3::server::{self, ServerConfig};
use crate::runs::context::RunContext;
use crate::store::Store;
use crate::web::{self, AppState};
use actix_web::{App, HttpServer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `netperfd daemon` (they override the config file).
#[derive(clap::Args, Debug, Default)]
pub struct DaemonArgs {
    /// Web UI address (default 127.0.0.1:8080)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Data directory for the SQLite history (default ./data)
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Configuration file (TOML; see systemd/netperfd.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// iperf3 server ports (default 5201; 0 turns the server off)
    #[arg(long = "iperf3-port", value_delimiter = ',', value_name = "PORT")]
    pub iperf3_port: Vec<u16>,
    /// iperf 2 server ports, TCP and UDP (default 5001; 0 turns the server off)
    #[arg(long = "iperf2-port", value_delimiter = ',', value_name = "PORT")]
    pub iperf2_port: Vec<u16>,
    /// UDP port of the latency echo responder (default 5291; 0 turns it off)
    #[arg(long = "echo-port", value_name = "PORT")]
    pub echo_port: Option<u16>,
    /// Serve plain HTTP beyond loopback too (config `plain_http`; passwords cross in clear)
    #[arg(long = "plain-http")]
    pub plain_http: bool,
}

/// Resolve the configuration: file first, then flags.
pub fn config_from(a: &DaemonArgs) -> Result<Config, String> {
    let mut c = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    if let Some(l) = a.listen {
        c.listen = l;
    }
    if let Some(d) = &a.data {
        c.data_dir = d.clone();
    }
    if !a.iperf3_port.is_empty() {
        c.iperf3_ports = a.iperf3_port.iter().copied().filter(|&p| p != 0).collect();
    }
    if !a.iperf2_port.is_empty() {
        c.iperf2_ports = a.iperf2_port.iter().copied().filter(|&p| p != 0).collect();
    }
    if let Some(p) = a.echo_port {
        c.echo_port = p;
    }
    if a.plain_http {
        c.plain_http = true;
    }
    Ok(c)
}

/// glibc's mmap threshold for the daemon, bytes: blocks this large or larger (argon2's 19 MiB,
/// an import's or a chart's big buffers) are returned to the kernel when freed.
pub const MMAP_THRESHOLD: usize = 1 << 20;

/// Run the daemon; returns the exit code.
pub fn main(a: DaemonArgs) -> i32 {
    crate::logging::init("info");
    // Before any thread: a login's 19 MiB argon2 block goes back to the kernel when freed
    // (without it the daemon kept 60–110 MB after a few logins; docs/hardening.md).
    crate::engine::sys::fix_mmap_threshold(MMAP_THRESHOLD);
    raise_nofile();
    let cfg = match config_from(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netperfd: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("netperfd: cannot start the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(cfg)) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("netperfd: {e}");
            1
        }
    }
}

/// What the start-up writes still owe when the store could not write (a full data
/// partition): forwarding undone on the board but not yet in the stored configuration, and
/// the stale runs and suites to mark aborted (only those older than this process).
struct StartWrites {
    started_ms: i64,
    forwarding: Vec<(i64, String, String, crate::runs::forward::Undo)>,
}

impl StartWrites {
    /// Do what is owed, in order (forwarding first: a stale run marked aborted before its
    /// forwarding is stored undone would have it re-applied at the next start). Errors: the
    /// first write that failed, in words.
    async fn finish(
        &mut self,
        store: &Store,
        board: &Arc<crate::board::apply::Controller>,
    ) -> Result<(), String> {
        let owed = std::mem::take(&mut self.forwarding);
        if let Err((left, e)) = crate::runs::forward::retry_stale(board, owed).await {
            self.forwarding = left;
            return Err(format!(
                "the forwarding undone for a run cut short cannot be stored: {e}"
            ));
        }
        let stale = store
            .abort_runs_started_before(self.started_ms)
            .map_err(|e| e.to_string())?;
        if stale > 0 {
            tracing::warn!("{stale} run(s) were active when netperfd last stopped; marked aborted");
        }
        // Suites: built-in definitions on first start; suites cut by a restart end as aborted.
        crate::spec::suite::seed_builtins(store)?;
        store
            .abort_suites_created_before(self.started_ms)
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Remove what a daemon that stopped mid-way left on the data partition (capture files,
/// import spool files): on a full disk, what frees it before anything is written.
fn remove_leftovers(data_dir: &std::path::Path) {
    let mb = |b: u64| crate::model::display::size(b as f64);
    let (n, b) = crate::web::diag::remove_stale_captures(data_dir);
    if n > 0 {
        tracing::info!(
            "removed {n} capture file(s) ({}) left by the last daemon",
            mb(b)
        );
    }
    let (n, b) = crate::web::transfer::remove_stale_spools(data_dir);
    if n > 0 {
        tracing::info!(
            "removed {n} import spool file(s) ({}) left by the last daemon",
            mb(b)
        );
    }
}

/// The web server's worker threads.
pub const WEB_WORKERS: usize = 2;

/// Descriptors the daemon needs besides its listeners' connections: the iperf 2 server, the
/// board's own client runs, SQLite, netlink, the sampler, `ip`/`iptables` children (measured
/// below 600 in issue 21; docs/hardening.md, file-descriptor budget).
pub const OTHER_FDS: u64 = 600;

/// Open files the daemon can hold by its own caps (docs/hardening.md, file-descriptor
/// budget): the web UI's workers × connections per worker, the iperf3 server's tests × (one
/// control + [`MAX_PARALLEL`](crate::engine::iperf3::wire::MAX_PARALLEL) streams) plus the
/// connections still sending their cookie, the payload server, TCP sink and source, and
/// [`OTHER_FDS`]. 4,832 today.
pub fn fd_budget() -> u64 {
    let web = WEB_WORKERS * web::limits::MAX_CONNECTIONS_PER_WORKER;
    let iperf3 = server::MAX_SESSIONS * (1 + crate::engine::iperf3::wire::MAX_PARALLEL as usize)
        + server::MAX_GREETINGS;
    let traffic =
        crate::runs::traffic::MAX_HTTP_CONNECTIONS + 2 * crate::runs::traffic::MAX_RAW_CONNECTIONS;
    (web + iperf3 + traffic) as u64 + OTHER_FDS
}

/// The warning to log when the open-file limit in force (`limit`, after raising the soft
/// limit to the `hard` one) is below `budget` ([`fd_budget`]); `None` when it is not.
fn nofile_warning(limit: u64, hard: u64, budget: u64) -> Option<String> {
    (limit < budget).then(|| {
        format!(
            "the open-file limit is {limit} (hard limit {hard}), below the {budget} descriptors \
             this daemon's own connection caps can hold (docs/hardening.md): under load new \
             connections will fail with \"too many open files\"; raise LimitNOFILE (the unit \
             sets 8192) or `ulimit -n`"
        )
    })
}

/// At start: raise the soft open-file limit to the hard one (allowed without privileges),
/// and warn when the result is below [`fd_budget`] (a board's default soft limit is 1024).
fn raise_nofile() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot read the open-file limit: {e}");
            return;
        }
    };
    let mut now = soft;
    if hard > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => {
                tracing::info!("open-file limit raised from {soft} to {hard}");
                now = hard;
            }
            Err(e) => tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}"),
        }
    }
    // rlim_t is u32 on armv7 and u64 on aarch64/x86_64.
    #[allow(clippy::useless_conversion)]
    let (now, hard) = (u64::from(now), u64::from(hard));
    if let Some(w) = nofile_warning(now, hard, fd_budget()) {
        tracing::warn!("{w}");
    }
}

/// The data directory 0700 and the history `db` 0600 (SQLite gives its journal and WAL files
/// the database's mode), when this process owns them: outside systemd (whose unit sets
/// `UMask=0027`) a plain umask left them readable by every local user. Failures are logged.
fn private_data_dir(dir: &std::path::Path, db: &std::path::Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let me = nix::unistd::geteuid().as_raw();
    for (p, mode) in [(dir, 0o700), (db, 0o600)] {
        let Ok(m) = std::fs::metadata(p) else {
            continue;
        };
        if m.uid() != me || m.mode() & 0o077 == 0 {
            continue;
        }
        if let Err(e) = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)) {
            tracing::warn!("cannot make {} private ({mode:o}): {e}", p.display());
        }
    }
}

/// The process umask with group-write and every "others" bit added (0027 at the least, as
/// the shipped unit's `UMask=0027`): files the daemon makes (the history, its WAL and shared
/// memory files, the certificate) are never readable by other local users, also outside
/// systemd and before [`private_data_dir`] runs (the WAL file was 0644 at first start:
/// attacker tryout 2026-12-07). Returns the umask now in force.
fn private_umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::from_bits_truncate(0o077));
    let new = Mode::from_bits_truncate(private_mask(old.bits()));
    umask(new);
    new.bits()
}

/// The umask [`private_umask`] sets over `old`: `old | 0o027`.
fn private_mask(old: u32) -> u32 {
    old | 0o027
}

async fn run(cfg: Config) -> Result<(), String> {
    let started_ms = crate::model::time::now_ms();
    private_umask();
    // 1. Files left by the last daemon go first (nothing is written before).
    remove_leftovers(&cfg.data_dir);
    // 2. The store; read-only when it cannot be opened for writing (e.g. a full partition).
    let (store, mut read_only) = open_store(&cfg)?;
    let opened_read_only = read_only.is_some();
    // 3. Forwarding turned on by a forwarding run that was cut short goes off again, before
    // anything is written to the store (and even when it cannot be).
    let stale_forwarding = crate::runs::forward::stale_forwarding(&store);
    // Board control: restore an unconfirmed change's snapshot, re-apply the confirmed config.
    let board = crate::board::apply::start_daemon(store.clone(), &cfg.data_dir).await;
    let mut owed = StartWrites {
        started_ms,
        forwarding: crate::runs::forward::undo_stale(&board, stale_forwarding).await,
    };
    // 4. The start-up writes; when they fail, the daemon comes up read-only and says so on
    // every page, trying again every few seconds.
    if read_only.is_none() {
        if let Err(e) = owed.finish(&store, &board).await {
            read_only = Some(e);
        }
    }
    if let Some(reason) = &read_only {
        come_up_read_only(&cfg, &store, &board, owed, opened_read_only, reason);
    }
    let hub = RunContext::with_board(store.clone(), board.clone());
    // Scheduled suite runs (due ones that were missed while netperfd was down fire once now).
    crate::runs::schedule::start(hub.clone());
    if let Err(e) = store.board_id() {
        tracing::warn!("cannot make the board id: {e}");
    }
    // HTTPS beyond loopback: the certificate (made at first start) before anything announces
    // the URLs; a bad own certificate stops the daemon here with the file named.
    let tls = tls_identity(&cfg)?;
    let state = web_state(&cfg, &store, &hub, tls.as_ref());

    // The iperf3 server: bind now so a busy port is a start-up error, not a silent gap.
    let shutdown = Arc::new(tokio::sync::Notify::new());
    start_iperf3(&cfg, &hub, &shutdown)?;

    // The iperf 2 server (TCP and UDP): a busy port is logged, the appliance still starts.
    if !cfg.iperf2_ports.is_empty() {
        crate::runs::iperf2::start_server(&hub, &cfg.iperf2_ports, shutdown.clone());
    }

    // The UDP echo for latency runs of other boards: a busy port is logged, the appliance
    // still starts. Kept until the daemon ends.
    let _echo = start_echo(&cfg);

    let (http, redirect) = web_servers(&cfg, &state, tls.as_ref())?;
    // Payload server, TCP sink and source (after the web UI has its port; one that cannot
    // listen is logged and left off).
    let _ = crate::runs::traffic::start(&hub, &cfg);
    tracing::info!(
        "web UI on {}://{}/ (data in {})",
        if tls.is_some() { "https" } else { "http" },
        cfg.listen,
        store.path().display()
    );
    notify_ready();
    let r = serve(http, redirect).await;
    shutdown.notify_one();
    board.stop_dhcp_clients().await;
    r
}

/// Open the history in `cfg.data_dir` (made private); when it cannot be opened for writing,
/// read-only with the reason. Errors: it cannot be opened at all.
fn open_store(cfg: &Config) -> Result<(Arc<Store>, Option<String>), String> {
    let (store, read_only) = match Store::open_dir(&cfg.data_dir) {
        Ok(s) => (s, None),
        Err(e) => match Store::open_dir_read_only(&cfg.data_dir) {
            Ok(s) => {
                tracing::error!("cannot open the history for writing ({e}): read-only");
                (s, Some(e.to_string()))
            }
            Err(_) => return Err(e.to_string()),
        },
    };
    private_data_dir(&cfg.data_dir, store.path());
    Ok((Arc::new(store), read_only))
}

/// The daemon comes up read-only for `reason`: said on every page, and a task tries again
/// every [`web::storage::RETRY`] — the writes `owed`, or (`reopen`: the store was opened
/// read-only) whether it could be opened for writing, which then asks for a restart.
fn come_up_read_only(
    cfg: &Config,
    store: &Arc<Store>,
    board: &Arc<crate::board::apply::Controller>,
    mut owed: StartWrites,
    reopen: bool,
    reason: &str,
) {
    tracing::error!(
        "cannot write the history ({reason}): netperfd comes up read-only until there is room"
    );
    web::storage::set_read_only(&cfg.data_dir, store.path(), reason);
    let (s, b, dir) = (store.clone(), board.clone(), cfg.data_dir.clone());
    crate::engine::task::spawn(async move {
        loop {
            tokio::time::sleep(web::storage::RETRY).await;
            if reopen {
                // Opened read-only: a restart is what opens it for writing.
                if Store::open_dir(&dir).is_ok() {
                    tracing::warn!(
                        "the history can be written again: restart netperfd to leave read-only"
                    );
                    web::storage::set_read_only(
                        &dir,
                        s.path(),
                        "opened read-only at start; there is room again: restart netperfd",
                    );
                    break;
                }
                continue;
            }
            match owed.finish(&s, &b).await {
                Ok(()) => {
                    tracing::info!("the history can be written again: read-only ends");
                    web::storage::clear();
                    break;
                }
                Err(e) => web::storage::set_read_only(&dir, s.path(), &e),
            }
        }
    });
}

/// The web UI's certificate when HTTPS is in force (logged with its fingerprint and any
/// validity warning); `None` for plain HTTP. Errors: a bad own certificate, the file named.
fn tls_identity(cfg: &Config) -> Result<Option<crate::cert::Identity>, String> {
    if !cfg.tls_in_force() {
        return Ok(None);
    }
    let id = web::tls::identity(cfg)?;
    tracing::info!(
        "web UI certificate SHA-256 {} (public key sha256//{}; {}{})",
        id.fingerprint,
        id.spki_sha256,
        id.cert_path.display(),
        if id.made { ", made now" } else { "" }
    );
    if let Some(w) = id.validity_warning(chrono::Utc::now()) {
        tracing::warn!("{w}");
    }
    Ok(Some(id))
}

/// The web UI's shared state; announces the first-run setup code (or withdraws it) and warns
/// about plain HTTP beyond loopback and the retired `setup_kmsg`.
fn web_state(
    cfg: &Config,
    store: &Arc<Store>,
    hub: &RunContext,
    tls: Option<&crate::cert::Identity>,
) -> actix_web::web::Data<AppState> {
    let mut app_state = AppState::new(store.clone(), hub.clone(), cfg.clone());
    app_state.tls = web::tls::Shown::new(cfg, tls);
    if let Some(w) = &app_state.tls.plain_warning {
        tracing::warn!("{w}");
        web::tls::warn_on_every_page();
    }
    let state = actix_web::web::Data::new(app_state);
    match state.setup_code() {
        Some(code) => {
            web::first_run::announce(cfg, &code, &state.tls);
            web::first_run::keep_current(state.clone());
        }
        None => web::first_run::withdraw(cfg),
    }
    if cfg.setup_kmsg.is_some() {
        tracing::warn!(
            "setup_kmsg in the config file is no longer used (the unit hides /dev/kmsg; the \
             setup code is on the login prompt through /etc/issue.d/netperfd.issue): remove it"
        );
    }
    state
}

/// Start the iperf3 server on `cfg.iperf3_ports` (none: off), its tests recorded by `hub`,
/// stopped by `shutdown`. Errors: a port that cannot be bound.
fn start_iperf3(
    cfg: &Config,
    hub: &RunContext,
    shutdown: &Arc<tokio::sync::Notify>,
) -> Result<(), String> {
    if cfg.iperf3_ports.is_empty() {
        return Ok(());
    }
    let mut listeners = Vec::new();
    for &p in &cfg.iperf3_ports {
        listeners.push(
            server::bind_listener(None, p)
                .map_err(|e| format!("cannot listen for iperf3 clients on port {p}: {e}"))?,
        );
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let h = hub.clone();
    crate::engine::task::spawn(async move { crate::runs::iperf3::record_served(&h, rx).await });
    let scfg = ServerConfig {
        ports: cfg.iperf3_ports.clone(),
        drops: Some(crate::runs::drops::host_drops()),
        ..ServerConfig::default()
    };
    let sd = shutdown.clone();
    crate::engine::task::spawn(async move {
        if let Err(e) = server::serve_listeners(listeners, scfg, Some(tx), Some(sd)).await {
            tracing::error!("iperf3 server stopped: {e}");
        }
    });
    tracing::info!(ports = ?cfg.iperf3_ports, "iperf3 server listening");
    Ok(())
}

/// The UDP echo responder on `cfg.echo_port` (0: off); `None` when off or the port is busy
/// (logged).
fn start_echo(cfg: &Config) -> Option<crate::engine::echo::Responder> {
    (cfg.echo_port != 0)
        .then(
            || match crate::engine::echo::Responder::start(cfg.echo_port) {
                Ok(r) => {
                    tracing::info!(port = cfg.echo_port, "UDP echo (latency) listening");
                    Some(r)
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot listen for the UDP echo on port {}: {e}",
                        cfg.echo_port
                    );
                    None
                }
            },
        )
        .flatten()
}

/// Bind the web UI (HTTPS with `tls`, else plain HTTP) and, with HTTPS and
/// `cfg.http_redirect`, the plain-HTTP listener that sends pages to HTTPS. Errors: a port
/// that cannot be bound.
fn web_servers(
    cfg: &Config,
    state: &actix_web::web::Data<AppState>,
    tls: Option<&crate::cert::Identity>,
) -> Result<(actix_server::Server, Option<actix_server::Server>), String> {
    // Connections per worker, and per client address (web::limits): well below the unit's
    // LimitNOFILE (docs/hardening.md, file-descriptor budget). Over HTTPS the address is
    // counted before the TLS handshake (web::tls::https_server).
    let http = match tls {
        Some(id) => web::tls::https_server(
            state.clone(),
            cfg.listen,
            WEB_WORKERS,
            web::limits::MAX_CONNECTIONS_PER_WORKER,
            id.server.clone(),
        ),
        None => {
            let st = state.clone();
            HttpServer::new(move || App::new().app_data(st.clone()).configure(web::configure))
                .workers(WEB_WORKERS)
                .max_connections(web::limits::MAX_CONNECTIONS_PER_WORKER)
                .on_connect(web::limits::on_connect)
                .bind(cfg.listen)
                .map(|s| s.run())
        }
    }
    .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    // The plain-HTTP listener that sends pages to HTTPS (web::tls::redirect).
    let redirect = match (cfg.http_redirect, tls) {
        (Some(addr), Some(_)) => {
            let port = cfg.listen.port();
            let server = HttpServer::new(move || {
                App::new()
                    .default_service(actix_web::web::to(move |req| web::tls::redirect(req, port)))
            })
            .workers(1)
            .max_connections(web::limits::MAX_CONNECTIONS_PER_WORKER)
            .on_connect(web::limits::on_connect)
            .bind(addr)
            .map_err(|e| format!("cannot listen on {addr} (http_redirect): {e}"))?;
            tracing::info!("http://{addr}/ sends pages to HTTPS");
            Some(server.run())
        }
        (Some(addr), None) => {
            tracing::warn!(
                "http_redirect = {addr} is ignored: the web UI on {} is plain HTTP",
                cfg.listen
            );
            None
        }
        (None, _) => None,
    };
    Ok((http, redirect))
}

/// Tell systemd the daemon is ready, and ping its watchdog at half the period when
/// WatchdogSec is set.
fn notify_ready() {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    if let Some(wd) = sd_notify::watchdog_enabled() {
        let period = (wd / 2).max(std::time::Duration::from_millis(100));
        crate::engine::task::spawn(async move {
            let mut t = tokio::time::interval(period);
            loop {
                t.tick().await;
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            }
        });
    }
}

/// Serve the web UI until it stops (the redirect listener, if any, stopped with it).
async fn serve(
    http: actix_server::Server,
    redirect: Option<actix_server::Server>,
) -> Result<(), String> {
    match redirect {
        Some(redirect) => {
            let handle = redirect.handle();
            crate::engine::task::spawn(async move {
                if let Err(e) = redirect.await {
                    tracing::error!("the HTTP redirect listener stopped: {e}");
                }
            });
            let r = http.await;
            handle.stop(true).await;
            r
        }
        None => http.await,
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_umask_never_lets_others_read_what_the_daemon_writes() {
        // A shell's 022 becomes 027 (the unit's), a stricter one stays; files made then are
        // 0640 at most (0666 & !027), never world-readable.
        for (old, want) in [
            (0o022, 0o027),
            (0o000, 0o027),
            (0o077, 0o077),
            (0o027, 0o027),
        ] {
            assert_eq!(super::private_mask(old), want, "{old:o}");
            assert_eq!(0o666 & !super::private_mask(old) & 0o007, 0, "{old:o}");
        }
    }

    use super::*;

    #[test]
    fn the_descriptor_budget_adds_the_daemons_caps() {
        // 2 × 1024 web + 8 × (1 + 128) iperf3 tests + 1024 cookies + 64 + 2 × 32 + 600.
        assert_eq!(fd_budget(), 2048 + 1032 + 1024 + 128 + 600);
        assert_eq!(fd_budget(), 4832);
        assert_eq!(
            nofile_warning(1024, 1024, fd_budget()).as_deref(),
            Some(
                "the open-file limit is 1024 (hard limit 1024), below the 4832 descriptors this \
                 daemon's own connection caps can hold (docs/hardening.md): under load new \
                 connections will fail with \"too many open files\"; raise LimitNOFILE (the \
                 unit sets 8192) or `ulimit -n`"
            )
        );
        assert_eq!(nofile_warning(8192, 8192, fd_budget()), None);
        assert_eq!(nofile_warning(4832, 524_288, 4832), None);
        assert!(nofile_warning(4831, 4831, 4832).is_some());
    }
}
