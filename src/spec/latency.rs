//! A latency-under-load request (web form, `POST /api/runs/latency`, `netperfd latency`),
//! typed and checked once: peer host, iperf3 port, load direction, streams, phase durations,
//! probe interval and board port. A bad field gives one clear message and nothing runs.

use serde::{Deserialize, Serialize};

/// Most TCP streams per direction of the load.
pub(crate) const MAX_STREAMS: u32 = 32;
/// Longest idle phase, s.
pub(crate) const MAX_IDLE_S: u32 = 600;
/// Shortest and longest loaded phase, s.
pub(crate) const MIN_LOADED_S: u32 = 1;
pub(crate) const MAX_LOADED_S: u32 = 3600;
/// Probe interval bounds, ms.
pub(crate) const MIN_INTERVAL_MS: u32 = 1;
pub(crate) const MAX_INTERVAL_MS: u32 = 1000;

/// The load's direction. Default: both (RRUL-like, as [`DEFAULT_STREAMS`] per direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// The board sends (iperf3 client sending).
    Up,
    /// The peer sends (`iperf3 -R`).
    Down,
    /// Both at once (`iperf3 --bidir`).
    #[default]
    Both,
}

/// TCP streams per direction when none are asked for: 4, as RRUL loads a link (issue 22
/// item 6: one stream raised a ~100 ms queue by 3.5 ms, four cubic streams by 42 ms).
pub(crate) const DEFAULT_STREAMS: u32 = 4;
/// Below this many streams per direction a load may not fill the bottleneck's queue.
pub(crate) const FILLING_STREAMS: u32 = 4;

impl Load {
    /// Parse "up" / "down" / "both" (also "upload", "download", "send", "receive", "bidir");
    /// empty = the default (both).
    pub fn parse(s: &str) -> Result<Load, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "up" | "upload" | "send" => Load::Up,
            "down" | "download" | "receive" => Load::Down,
            "" => Load::default(),
            "both" | "bidir" => Load::Both,
            o => return Err(format!("load must be up, down or both, not '{o}'")),
        })
    }
    /// "up" / "down" / "both".
    pub fn word(self) -> &'static str {
        match self {
            Load::Up => "up",
            Load::Down => "down",
            Load::Both => "both",
        }
    }
    /// "upload" / "download" / "both" (the phase's direction in results).
    pub fn direction(self) -> &'static str {
        match self {
            Load::Up => "upload",
            Load::Down => "download",
            Load::Both => "both",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySpec {
    /// Peer host name or address: probed with ICMP, loaded through its `iperf3 -s`.
    pub host: String,
    /// The peer's iperf3 port, default 5201.
    pub port: u16,
    pub load: Load,
    /// TCP streams per direction (`-P`), 1..=32; default [`DEFAULT_STREAMS`].
    pub streams: u32,
    /// Idle phase before and after the load, s (0..=600; default 5).
    pub idle_s: u32,
    /// Loaded phase, s (1..=3600; default 10).
    pub loaded_s: u32,
    /// Probe interval, ms (1..=1000; default 10).
    pub interval_ms: u32,
    /// Board port to bind the probes and the load to (SO_BINDTODEVICE).
    pub bind_dev: Option<String>,
    /// TCP congestion control of the load's streams (`-C`, e.g. "cubic"); iperf3 sends it to
    /// the peer, whose sending sockets use it too (download). `None` = [`DEFAULT_CONGESTION`]
    /// when the board's kernel offers it (a loss-based load fills the queue whatever the
    /// hosts' own default; BBR keeps it short by design), else each host's default;
    /// [`HOSTS_CONGESTION`] = each host's default.
    #[serde(default)]
    pub congestion: Option<String>,
}

/// The congestion control a latency load uses when none is asked for: loss-based, so the load
/// fills the bottleneck's queue (the point of the test) even when a PC defaults to BBR.
pub(crate) const DEFAULT_CONGESTION: &str = "cubic";

/// The `-C` value that keeps each host's own default congestion control.
pub(crate) const HOSTS_CONGESTION: &str = "default";

impl Default for LatencySpec {
    fn default() -> Self {
        LatencySpec {
            host: String::new(),
            port: 5201,
            load: Load::default(),
            streams: DEFAULT_STREAMS,
            idle_s: 5,
            loaded_s: 10,
            interval_ms: 10,
            bind_dev: None,
            congestion: None,
        }
    }
}

impl LatencySpec {
    /// Check every field; errors name the field and its bounds.
    pub fn validate(&self) -> Result<(), String> {
        if !crate::model::names::valid_host(&self.host) {
            return Err(format!(
                "'{}' is not a host name or IP address (peer host)",
                self.host
            ));
        }
        if self.port == 0 {
            return Err("port must be 1..65535".into());
        }
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(format!("streams must be 1..{MAX_STREAMS} (-P)"));
        }
        if self.idle_s > MAX_IDLE_S {
            return Err(format!("idle phase must be 0..{MAX_IDLE_S} s (--idle)"));
        }
        if !(MIN_LOADED_S..=MAX_LOADED_S).contains(&self.loaded_s) {
            return Err(format!(
                "loaded phase must be {MIN_LOADED_S}..{MAX_LOADED_S} s (--loaded)"
            ));
        }
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&self.interval_ms) {
            return Err(format!(
                "probe interval must be {MIN_INTERVAL_MS}..{MAX_INTERVAL_MS} ms (-i)"
            ));
        }
        if let Some(c) = &self.congestion {
            if c.is_empty()
                || c.len() > 15
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(format!("'{c}' is not a congestion control name (-C)"));
            }
        }
        if let Some(d) = &self.bind_dev {
            if !crate::model::names::valid_ifname(d) {
                return Err(format!("'{d}' is not a port (interface) name (--bind-dev)"));
            }
        }
        Ok(())
    }

    /// Our command line for this run.
    pub fn command(&self) -> String {
        let mut s = format!(
            "netperfd latency -c {} --load {}",
            self.host,
            self.load.word()
        );
        if self.port != 5201 {
            s.push_str(&format!(" -p {}", self.port));
        }
        s.push_str(&format!(
            " -P {} --idle {} --loaded {} -i {}",
            self.streams, self.idle_s, self.loaded_s, self.interval_ms
        ));
        if let Some(d) = &self.bind_dev {
            s.push_str(&format!(" --bind-dev {d}"));
        }
        if let Some(c) = &self.congestion {
            s.push_str(&format!(" -C {c}"));
        }
        s
    }

    /// The stock tools that do the same by hand: ping on the probe interval beside an iperf3
    /// client with the load.
    pub fn stock_command(&self) -> String {
        let iperf = match self.load {
            Load::Up => "",
            Load::Down => " -R",
            Load::Both => " --bidir",
        };
        let port = if self.port != 5201 {
            format!(" -p {}", self.port)
        } else {
            String::new()
        };
        let (iface_ping, mut iface_iperf) = match &self.bind_dev {
            Some(d) => (format!(" -I {d}"), format!(" --bind-dev {d}")),
            None => (String::new(), String::new()),
        };
        if let Some(c) = &self.congestion {
            iface_iperf.push_str(&format!(" -C {c}"));
        }
        format!(
            "ping -i {} -w {}{iface_ping} {h} & sleep {}; iperf3 -c {h}{port} -P {} -t {}{iperf}{iface_iperf}",
            self.interval_ms as f64 / 1000.0,
            2 * self.idle_s + self.loaded_s,
            self.idle_s,
            self.streams,
            self.loaded_s,
            h = self.host,
        )
    }
}

/// A number in JSON or a form (`5` or `"5"`; empty = default).
fn num(v: &Option<serde_json::Value>, name: &str, default: u32) -> Result<u32, String> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(default),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| format!("{name} must be a whole number")),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(default),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a whole number, not '{s}'")),
        Some(_) => Err(format!("{name} must be a number")),
    }
}

/// The web form and the JSON body of `POST /api/runs/latency` (numbers may be text; unknown
/// keys are refused).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LatencyForm {
    #[serde(default, skip_serializing)]
    pub csrf: Option<String>,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: Option<serde_json::Value>,
    /// up / down / both.
    #[serde(default)]
    pub load: Option<String>,
    #[serde(default)]
    pub streams: Option<serde_json::Value>,
    /// Idle phase, s.
    #[serde(default)]
    pub idle: Option<serde_json::Value>,
    /// Loaded phase, s.
    #[serde(default)]
    pub loaded: Option<serde_json::Value>,
    /// Probe interval, ms.
    #[serde(default)]
    pub interval: Option<serde_json::Value>,
    /// Board port; empty = routing decides.
    #[serde(default)]
    pub bind: Option<String>,
    /// TCP congestion control of the load (e.g. "cubic"); empty = [`DEFAULT_CONGESTION`],
    /// "default" = each host's own default.
    #[serde(default)]
    pub congestion: Option<String>,
}

impl LatencyForm {
    /// Validate into a spec.
    pub(crate) fn to_spec(&self) -> Result<LatencySpec, String> {
        let d = LatencySpec::default();
        let port = num(&self.port, "port", 5201)?;
        let spec = LatencySpec {
            host: self.host.trim().to_string(),
            port: u16::try_from(port).map_err(|_| "port must be 1..65535".to_string())?,
            load: Load::parse(self.load.as_deref().unwrap_or(""))?,
            streams: num(&self.streams, "streams", d.streams)?,
            idle_s: num(&self.idle, "idle", d.idle_s)?,
            loaded_s: num(&self.loaded, "loaded", d.loaded_s)?,
            interval_ms: num(&self.interval, "interval", d.interval_ms)?,
            bind_dev: self
                .bind
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
            congestion: self
                .congestion
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        };
        if spec.host.is_empty() {
            return Err("peer host is empty".into());
        }
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(j: serde_json::Value) -> Result<LatencySpec, String> {
        serde_json::from_value::<LatencyForm>(j)
            .map_err(|e| e.to_string())?
            .to_spec()
    }

    #[test]
    fn defaults_and_bounds() {
        let s = form(serde_json::json!({"host": "192.0.2.2"})).unwrap();
        assert_eq!(
            (s.idle_s, s.loaded_s, s.interval_ms, s.streams),
            (5, 10, 10, 4)
        );
        // RRUL-like: 4 streams each way (issue 22 item 6).
        assert_eq!(s.load, Load::Both);
        assert_eq!(
            form(serde_json::json!({"host": "pc", "load": ""}))
                .unwrap()
                .load,
            Load::Both
        );
        let s =
            form(serde_json::json!({"host": "pc", "load": "both", "streams": "4", "loaded": 3}))
                .unwrap();
        assert_eq!((s.load, s.streams, s.loaded_s), (Load::Both, 4, 3));
        for (j, want) in [
            (serde_json::json!({"host": ""}), "host"),
            (serde_json::json!({"host": "a b"}), "host"),
            (
                serde_json::json!({"host": "pc", "streams": 0}),
                "streams must be 1..32",
            ),
            (
                serde_json::json!({"host": "pc", "streams": "33"}),
                "streams must be 1..32",
            ),
            (
                serde_json::json!({"host": "pc", "loaded": 0}),
                "loaded phase",
            ),
            (serde_json::json!({"host": "pc", "idle": 601}), "idle phase"),
            (
                serde_json::json!({"host": "pc", "interval": "x"}),
                "interval must be a whole number",
            ),
            (
                serde_json::json!({"host": "pc", "load": "sideways"}),
                "load must be up, down or both",
            ),
            (
                serde_json::json!({"host": "pc", "bogus": 1}),
                "unknown field",
            ),
        ] {
            let e = form(j.clone()).unwrap_err();
            assert!(e.contains(want), "{j}: {e}");
        }
    }

    #[test]
    fn command_lines() {
        let s = LatencySpec {
            host: "192.0.2.2".into(),
            streams: 2,
            load: Load::Down,
            ..Default::default()
        };
        assert_eq!(
            s.command(),
            "netperfd latency -c 192.0.2.2 --load down -P 2 --idle 5 --loaded 10 -i 10"
        );
        assert_eq!(
            s.stock_command(),
            "ping -i 0.01 -w 20 192.0.2.2 & sleep 5; iperf3 -c 192.0.2.2 -P 2 -t 10 -R"
        );
    }
}
