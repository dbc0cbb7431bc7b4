//! Daemon configuration: `/etc/netperfd/netperfd.toml` (or `--config FILE`), overridden by
//! command-line flags. Every key is optional.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The daemon's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Web UI address, default 127.0.0.1:8080 by hand (0.0.0.0:443 in the shipped config).
    /// Beyond loopback it serves HTTPS ([`Config::tls_in_force`]); on loopback plain HTTP.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The web UI's own certificate and private key, PEM files (the certificate file may
    /// hold the chain after it; the key PKCS#8, PKCS#1 or SEC1). Both or neither; without
    /// them the daemon makes a certificate at first start and keeps it in `data_dir`.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// A second, plain-HTTP listener (the shipped config: `0.0.0.0:80`) that sends every page
    /// to the HTTPS address and refuses every API request with an error naming it. Only
    /// while HTTPS is in force; default none.
    #[serde(default)]
    pub http_redirect: Option<SocketAddr>,
    /// Serve plain HTTP on `listen` even beyond loopback (passwords, session cookies and API
    /// tokens then cross the network in clear; the log and every page say so). Default false.
    #[serde(default)]
    pub plain_http: bool,
    /// Directory of the SQLite history, default `./data`.
    #[serde(default = "default_data")]
    pub data_dir: PathBuf,
    /// Admin password as an argon2 PHC string (`netperfd hash-password`), for image builders.
    #[serde(default)]
    pub admin_password_hash: Option<String>,
    /// Ports of the built-in iperf3 server, default [5201]; empty turns it off.
    #[serde(default = "default_iperf3_ports")]
    pub iperf3_ports: Vec<u16>,
    /// Ports of the built-in iperf 2 server (TCP and UDP each), default [5001]; empty turns
    /// it off.
    #[serde(default = "default_iperf2_ports")]
    pub iperf2_ports: Vec<u16>,
    /// Web session lifetime in hours, default 12.
    #[serde(default = "default_session_hours")]
    pub session_hours: u32,
    /// Port of the HTTP payload server (`GET /payload/<size>`, no login), default 8088;
    /// 0 turns it off.
    #[serde(default = "default_http_payload_port")]
    pub http_payload_port: u16,
    /// Port of the TCP sink (`nc board PORT < /dev/zero`), default 5009; 0 turns it off.
    #[serde(default = "default_tcp_sink_port")]
    pub tcp_sink_port: u16,
    /// Port of the TCP source (`nc board PORT > /dev/null`), default 5019; 0 turns it off.
    #[serde(default = "default_tcp_source_port")]
    pub tcp_source_port: u16,
    /// UDP port of the latency echo responder (one-way delays for a board that probes this
    /// host), default 5291; 0 turns it off.
    #[serde(default = "default_echo_port")]
    pub echo_port: u16,
    /// `GET /metrics` without credentials (true) or only with an API bearer token or a
    /// session (false, the default).
    #[serde(default)]
    pub metrics_open: bool,
    /// Shortest period of a scheduled suite run, seconds, default 60 (tests use less).
    #[serde(default = "default_schedule_min_period_s")]
    pub schedule_min_period_s: u64,
    /// Largest history file `POST /api/import` and the UI accept, bytes, default 64 MiB.
    #[serde(default = "default_import_max_bytes")]
    pub import_max_bytes: usize,
    /// Until an admin password exists, the setup code and the setup URLs are written to this
    /// file for the console's login prompt, renewed when the board's addresses change, and
    /// removed once a password is set. The shipped config sets `/run/netperfd/setup.issue`
    /// (the unit's RuntimeDirectory), which the images link from
    /// `/etc/issue.d/netperfd.issue` (agetty reads that directory). Default empty: off.
    #[serde(default)]
    pub setup_issue_file: PathBuf,
    /// No longer used (a line on the kernel console through `/dev/kmsg`, which the unit's
    /// `PrivateDevices=`/`ProtectKernelLogs=` hide). Still accepted, so an older config file
    /// keeps working; the daemon logs a warning when it is set.
    #[serde(default)]
    pub setup_kmsg: Option<bool>,
    /// Hard caps of a packet capture on the Diagnostics page: longest, seconds (default 60);
    /// most packets (default 100 000); largest pcap file, bytes (default 64 MiB). A request
    /// above a cap is refused with the cap named.
    #[serde(default = "default_capture_max_seconds")]
    pub capture_max_seconds: u32,
    #[serde(default = "default_capture_max_packets")]
    pub capture_max_packets: u64,
    #[serde(default = "default_capture_max_bytes")]
    pub capture_max_bytes: u64,
}

fn default_capture_max_seconds() -> u32 {
    60
}
fn default_capture_max_packets() -> u64 {
    100_000
}
fn default_capture_max_bytes() -> u64 {
    64 * 1024 * 1024
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_data() -> PathBuf {
    PathBuf::from("./data")
}
fn default_iperf3_ports() -> Vec<u16> {
    vec![5201]
}
fn default_iperf2_ports() -> Vec<u16> {
    vec![5001]
}
fn default_session_hours() -> u32 {
    12
}
fn default_http_payload_port() -> u16 {
    8088
}
fn default_tcp_sink_port() -> u16 {
    5009
}
fn default_tcp_source_port() -> u16 {
    5019
}
fn default_echo_port() -> u16 {
    // engine::echo::DEFAULT_PORT (config may not import the engine).
    5291
}

fn default_schedule_min_period_s() -> u64 {
    60
}
fn default_import_max_bytes() -> usize {
    64 * 1024 * 1024
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: default_listen(),
            tls_cert: None,
            tls_key: None,
            http_redirect: None,
            plain_http: false,
            data_dir: default_data(),
            admin_password_hash: None,
            iperf3_ports: default_iperf3_ports(),
            iperf2_ports: default_iperf2_ports(),
            session_hours: default_session_hours(),
            http_payload_port: default_http_payload_port(),
            tcp_sink_port: default_tcp_sink_port(),
            tcp_source_port: default_tcp_source_port(),
            echo_port: default_echo_port(),
            metrics_open: false,
            schedule_min_period_s: default_schedule_min_period_s(),
            import_max_bytes: default_import_max_bytes(),
            setup_issue_file: PathBuf::new(),
            setup_kmsg: None,
            capture_max_seconds: default_capture_max_seconds(),
            capture_max_packets: default_capture_max_packets(),
            capture_max_bytes: default_capture_max_bytes(),
        }
    }
}

impl Config {
    /// Whether the web UI serves HTTPS: on a listener beyond loopback, unless `plain_http`.
    pub fn tls_in_force(&self) -> bool {
        !self.plain_http && !self.listen.ip().to_canonical().is_loopback()
    }

    /// Read a TOML file. Errors name the file and the bad key.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }

    /// Parse TOML text and check values.
    pub fn parse(text: &str) -> Result<Config, String> {
        let c: Config = basic_toml::from_str(text).map_err(|e| e.to_string())?;
        if c.iperf3_ports.contains(&0) {
            return Err("iperf3_ports: 0 is not a port".into());
        }
        if c.iperf2_ports.contains(&0) {
            return Err("iperf2_ports: 0 is not a port".into());
        }
        if c.iperf2_ports.iter().any(|p| c.iperf3_ports.contains(p)) {
            return Err("iperf2_ports and iperf3_ports share a port".into());
        }
        if let Some(h) = &c.admin_password_hash {
            argon2::PasswordHash::new(h)
                .map_err(|e| format!("admin_password_hash is not an argon2 hash: {e}"))?;
        }
        if c.schedule_min_period_s == 0 {
            return Err("schedule_min_period_s must be at least 1".into());
        }
        if c.import_max_bytes < 1024 {
            return Err("import_max_bytes must be at least 1024".into());
        }
        if c.tls_cert.is_some() != c.tls_key.is_some() {
            return Err("tls_cert and tls_key go together: set both or neither".into());
        }
        if c.http_redirect == Some(c.listen) {
            return Err(format!(
                "http_redirect: {} is the web UI's own address (listen)",
                c.listen
            ));
        }
        if c.session_hours == 0 || c.session_hours > 24 * 30 {
            return Err("session_hours must be 1..720".into());
        }
        let svc = [
            ("http_payload_port", c.http_payload_port),
            ("tcp_sink_port", c.tcp_sink_port),
            ("tcp_source_port", c.tcp_source_port),
        ];
        for (i, (k, p)) in svc.iter().enumerate() {
            let clash = c.iperf3_ports.contains(p)
                || c.listen.port() == *p
                || c.http_redirect.map(|r| r.port()) == Some(*p)
                || svc[..i].iter().any(|(_, q)| q == p);
            if *p != 0 && clash {
                return Err(format!("{k}: port {p} is already used by another service"));
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(c.iperf3_ports, vec![5201]);
        assert_eq!(c.iperf2_ports, vec![5001]);
        assert!(Config::parse("iperf2_ports = []")
            .unwrap()
            .iperf2_ports
            .is_empty());
        let c = Config::parse("listen = \"0.0.0.0:80\"\niperf3_ports = [5201, 5202]\n").unwrap();
        assert_eq!(c.listen.port(), 80);
        assert_eq!(c.iperf3_ports, vec![5201, 5202]);
    }

    #[test]
    fn fleet_keys() {
        let c = Config::parse("").unwrap();
        assert!(!c.metrics_open, "token-protected by default");
        assert_eq!(c.schedule_min_period_s, 60);
        assert_eq!(c.import_max_bytes, 64 * 1024 * 1024);
        let c = Config::parse(
            "metrics_open = true\nschedule_min_period_s = 1\nimport_max_bytes = 4096\n",
        )
        .unwrap();
        assert!(c.metrics_open);
        assert_eq!((c.schedule_min_period_s, c.import_max_bytes), (1, 4096));
        assert!(Config::parse("schedule_min_period_s = 0").is_err());
        assert!(Config::parse("import_max_bytes = 10").is_err());
        assert!(Config::parse("metrics_open = \"yes\"").is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Config::parse("listen = \"nowhere\"").is_err());
        assert!(Config::parse("iperf3_ports = [0]").is_err());
        assert!(Config::parse("iperf2_ports = [0]").is_err());
        assert!(Config::parse("iperf2_ports = [5201]").is_err());
        assert!(Config::parse("admin_password_hash = \"plain\"").is_err());
        assert!(Config::parse("unknown_key = 1").is_err());
        assert!(Config::parse("tcp_sink_port = 5201").is_err());
        assert!(Config::parse("tcp_sink_port = 8088").is_err());
        assert!(Config::parse("http_payload_port = 8080").is_err());
        let c = Config::parse("tcp_sink_port = 0\ntcp_source_port = 0\n").unwrap();
        assert_eq!(
            (c.tcp_sink_port, c.tcp_source_port, c.http_payload_port),
            (0, 0, 8088)
        );
    }

    #[test]
    fn tls_keys() {
        let c = Config::parse("").unwrap();
        assert!(
            !c.tls_in_force(),
            "loopback (the default 127.0.0.1:8080) stays plain HTTP"
        );
        let c = Config::parse("listen = \"0.0.0.0:443\"").unwrap();
        assert!(c.tls_in_force());
        let c = Config::parse("listen = \"[::1]:8080\"").unwrap();
        assert!(!c.tls_in_force());
        let c = Config::parse("listen = \"[::ffff:127.0.0.1]:8080\"").unwrap();
        assert!(!c.tls_in_force(), "a v4-mapped loopback is loopback");
        let c = Config::parse("listen = \"0.0.0.0:80\"\nplain_http = true").unwrap();
        assert!(!c.tls_in_force());
        assert_eq!(
            Config::parse("tls_cert = \"/etc/c.pem\"").unwrap_err(),
            "tls_cert and tls_key go together: set both or neither"
        );
        assert!(Config::parse("tls_key = \"/etc/k.pem\"").is_err());
        assert!(Config::parse("tls_cert = \"/c\"\ntls_key = \"/k\"").is_ok());
        assert!(
            Config::parse("listen = \"0.0.0.0:443\"\nhttp_redirect = \"0.0.0.0:443\"").is_err()
        );
        assert!(Config::parse("http_redirect = \"0.0.0.0:8088\"").is_err());
        let shipped = Config::parse(include_str!("../systemd/netperfd.toml")).unwrap();
        assert_eq!(shipped.listen, "0.0.0.0:443".parse().unwrap());
        assert_eq!(shipped.http_redirect, Some("0.0.0.0:80".parse().unwrap()));
        assert!(shipped.tls_in_force());
    }

    #[test]
    fn an_older_config_with_setup_kmsg_still_loads() {
        // The config shipped before issue 23 had `setup_kmsg = true`; images keep a changed
        // conffile on upgrade, and an unknown key would stop the daemon.
        let old = "setup_issue_file = \"/run/issue.d/netperfd.issue\"\nsetup_kmsg = true\n";
        let c = Config::parse(old).unwrap();
        assert_eq!(c.setup_kmsg, Some(true));
        assert_eq!(Config::parse("").unwrap().setup_kmsg, None);
        let shipped = include_str!("../systemd/netperfd.toml");
        let c = Config::parse(shipped).unwrap();
        assert_eq!(c.setup_kmsg, None, "the shipped config no longer sets it");
        assert_eq!(
            c.setup_issue_file,
            std::path::Path::new("/run/netperfd/setup.issue")
        );
    }
}
