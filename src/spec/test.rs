//! The "new test" request as the web form and the JSON API send it, validated into a
//! [`ClientSpec`] at the edge. Bad input gives one clear message and starts nothing.

use crate::engine::iperf3::client::{ClientSpec, WINDOW_MAX, WINDOW_MIN};
use crate::engine::iperf3::wire::Direction;
use crate::engine::report::parse_suffixed;
use crate::model::names::valid_host;
use serde::Deserialize;

/// Highest bitrate a test may ask for, bits/s (100 Gbit/s, above any board's port): a value
/// such as "100T" is a typo, not a test.
pub(crate) const MAX_BITRATE: u64 = 100_000_000_000;

/// Parse a bitrate ("500M", "1G", bits/s) up to [`MAX_BITRATE`].
pub(crate) fn parse_bitrate(b: &str) -> Result<u64, String> {
    let r = parse_suffixed(b, true).map_err(|e| format!("bitrate: {e}"))?;
    if r > MAX_BITRATE {
        return Err(format!(
            "bitrate: '{b}' is above the maximum of 100G ({MAX_BITRATE} bits/s)"
        ));
    }
    Ok(r)
}

/// A peer port as typed (e.g. "5201", surrounding spaces allowed), 1..65535. Errors: "port
/// must be a whole number, got 'x'", "port must be 1..65535, got 0".
pub(crate) fn parse_port(text: &str) -> Result<u16, String> {
    let p = num(&Some(text.to_string()), "port")?.unwrap_or(0);
    check_port(p)
}

/// `p` as a peer port: 1..65535, else "port must be 1..65535, got 70000".
pub(crate) fn check_port(p: u64) -> Result<u16, String> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("port must be 1..65535, got {p}"))
}

/// `s` as a test's duration: whole seconds 1..=[`MAX_SECONDS`](crate::engine::iperf3::client::MAX_SECONDS),
/// else "duration must be 1..86400, got 0".
pub(crate) fn check_duration(s: u64) -> Result<u32, String> {
    let max_s = crate::engine::iperf3::client::MAX_SECONDS;
    Ok(range(Some(s), "duration", 10, 1, u64::from(max_s))? as u32)
}

/// A test's duration as typed (e.g. "10", surrounding spaces allowed), whole seconds
/// 1..=[`MAX_SECONDS`](crate::engine::iperf3::client::MAX_SECONDS): the words a request's
/// `duration` gets; blank text is the default, 10 s. Errors: "duration must be a whole
/// number, got 'x'" for text that is not one, "duration must be 1..86400, got 0" for one out
/// of range.
pub(crate) fn parse_duration(text: &str) -> Result<u32, String> {
    let max_s = crate::engine::iperf3::client::MAX_SECONDS;
    let v = num(&Some(text.to_string()), "duration")?;
    Ok(range(v, "duration", 10, 1, u64::from(max_s))? as u32)
}

/// A TCP throughput test against a peer running `iperf3 -s` (or netperfd). The API refuses
/// keys that are not in [`TestRequest::FIELDS`] (a misspelt key would otherwise silently run
/// a default test); the web form's own fields are all known, and its CSRF token is checked
/// before anything else.
#[derive(Debug, Clone, Deserialize, Default)]
pub(crate) struct TestRequest {
    /// Peer host name or address.
    pub host: String,
    /// "tcp" (default) or "udp".
    #[serde(default)]
    pub protocol: Option<String>,
    /// TCP block or UDP datagram size, e.g. "128K" or "1448"; empty = iperf3's default.
    #[serde(default)]
    pub length: Option<String>,
    /// Peer port, default 5201.
    #[serde(default)]
    pub port: Option<String>,
    /// Seconds, default 10.
    #[serde(default)]
    pub duration: Option<String>,
    /// Parallel streams, default 1.
    #[serde(default)]
    pub parallel: Option<String>,
    /// "send" (default), "receive" (`-R`) or "bidir".
    #[serde(default)]
    pub direction: Option<String>,
    /// Bitrate limit per stream, e.g. "500M"; empty = unlimited.
    #[serde(default)]
    pub bitrate: Option<String>,
    /// Socket buffer, e.g. "256K"; empty = kernel default.
    #[serde(default)]
    pub window: Option<String>,
    /// Omit seconds at the start.
    #[serde(default)]
    pub omit: Option<String>,
    /// TCP maximum segment size (`-M`), bytes 88..9000; empty = the path's. iperf3 peers only.
    #[serde(default)]
    pub mss: Option<String>,
    /// IP type of service byte (`-S`), 0..255, decimal or `0x..` hex; empty = 0. iperf3
    /// peers only.
    #[serde(default)]
    pub tos: Option<String>,
    /// TCP congestion control (`-C`, e.g. "cubic", "bbr"); empty = the hosts' default.
    /// iperf3 peers only.
    #[serde(default)]
    pub congestion: Option<String>,
    /// Board port (interface name) to bind every socket to; empty = routing decides.
    #[serde(default)]
    pub bind: Option<String>,
    /// What the peer runs: "iperf3" (default), "iperf2" (iperf 2.0.5 … 2.1.x, default port
    /// 5001) or "auto" (ask the port with an iperf3 cookie; silence means iperf 2).
    #[serde(default)]
    pub peer_type: Option<String>,
    /// CSRF token (forms only).
    #[serde(default)]
    pub csrf: Option<String>,
}

fn opt(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A whole number as typed in field `name`; `None` when the field is empty.
fn num(s: &Option<String>, name: &str) -> Result<Option<u64>, String> {
    opt(s)
        .map(|v| {
            v.parse()
                .map_err(|_| format!("{name} must be a whole number, got '{v}'"))
        })
        .transpose()
}

/// `v` (or `default` when `None`) within `lo..=hi`, else "`name` must be lo..hi, got v".
fn range(v: Option<u64>, name: &str, default: u64, lo: u64, hi: u64) -> Result<u64, String> {
    let n = v.unwrap_or(default);
    if n < lo || n > hi {
        return Err(format!("{name} must be {lo}..{hi}, got {n}"));
    }
    Ok(n)
}

impl TestRequest {
    /// Every key a request may have.
    pub(crate) const FIELDS: [&'static str; 16] = [
        "host",
        "protocol",
        "length",
        "port",
        "duration",
        "parallel",
        "direction",
        "bitrate",
        "window",
        "omit",
        "mss",
        "tos",
        "congestion",
        "bind",
        "peer_type",
        "csrf",
    ];

    /// `Err("unknown field `k`, expected one of …")` for the first key of `keys` that is not a
    /// request field.
    pub(crate) fn check_keys<'a>(keys: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
        super::check_keys(keys, &Self::FIELDS)
    }

    /// The request's text read into a [`TestSpec`]: numbers, sizes ("128K"), bitrates
    /// ("500M"), words. Only the form of each value is checked here; the ranges, which depend
    /// on the peer type and protocol, are checked when the spec becomes a client's.
    pub(crate) fn parse(&self) -> Result<TestSpec, String> {
        let peer_type = self.peer_type()?;
        let udp = match opt(&self.protocol).unwrap_or("tcp") {
            "tcp" | "TCP" => false,
            "udp" | "UDP" => true,
            x => return Err(format!("protocol must be tcp or udp, got '{x}'")),
        };
        let direction = match opt(&self.direction).unwrap_or("send") {
            "send" => TestDirection::Send,
            "receive" | "reverse" => TestDirection::Receive,
            "bidir" => TestDirection::Bidir,
            "tradeoff" => TestDirection::Tradeoff,
            d if peer_type == PeerType::Iperf2 => {
                return Err(format!(
                    "direction must be send, bidir or tradeoff, got '{d}'"
                ))
            }
            d => {
                return Err(format!(
                    "direction must be send, receive or bidir, got '{d}'"
                ))
            }
        };
        let size = |f: &Option<String>, name: &str| {
            opt(f)
                .map(|v| parse_suffixed(v, false).map_err(|e| format!("{name}: {e}")))
                .transpose()
        };
        let port = opt(&self.port).map(parse_port).transpose()?;
        let mss = match (opt(&self.mss), num(&self.mss, "MSS")) {
            (Some(m), Err(e)) => return Err(format!("{e} bytes ('{m}')")),
            (_, r) => r?,
        };
        Ok(TestSpec {
            host: self.host.trim().to_string(),
            port,
            udp,
            length: size(&self.length, "length")?,
            duration: num(&self.duration, "duration")?,
            parallel: num(&self.parallel, "parallel streams")?,
            omit: num(&self.omit, "omit")?,
            direction,
            bitrate: opt(&self.bitrate).map(parse_bitrate).transpose()?,
            window: size(&self.window, "window")?,
            mss,
            tos: opt(&self.tos).map(parse_tos).transpose()?,
            congestion: opt(&self.congestion).map(str::to_string),
            bind: opt(&self.bind).map(str::to_string),
            peer_type,
        })
    }

    /// Validate into an iperf3 client spec ([`TestRequest::parse`], then
    /// [`TestSpec::to_client_spec`]). `ports` are the board's interfaces, to check `bind` and
    /// take its address from.
    pub(crate) fn to_spec(&self, ports: &[crate::board::Port]) -> Result<ClientSpec, String> {
        self.parse()?.to_client_spec(ports)
    }

    /// The peer type field, checked (the other fields are not looked at).
    pub(crate) fn peer_type(&self) -> Result<PeerType, String> {
        match opt(&self.peer_type).unwrap_or("iperf3") {
            "iperf3" => Ok(PeerType::Iperf3),
            "iperf2" => Ok(PeerType::Iperf2),
            "auto" => Ok(PeerType::Auto),
            x => Err(format!(
                "peer type must be iperf3, iperf2 or auto, got '{x}'"
            )),
        }
    }

    /// Validate into an iperf 2 client spec ([`TestSpec::to_iperf2_spec`]).
    pub(crate) fn to_iperf2_spec(
        &self,
        ports: &[crate::board::Port],
    ) -> Result<crate::engine::iperf2::client::Iperf2Spec, String> {
        self.parse()?.to_iperf2_spec(ports)
    }
}

/// Which way a test's data goes, from the board's (the client's) view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TestDirection {
    /// The client sends (iperf3 and iperf 2 default).
    #[default]
    Send,
    /// The server sends (iperf3 `-R`).
    Receive,
    /// Both at once (iperf3 `--bidir`, iperf 2 `-d`).
    Bidir,
    /// Send, then receive (iperf 2 `-r`).
    Tradeoff,
}

/// One throughput test, typed: what the web form and the API ([`TestRequest::parse`]), the
/// command line, suites and the peer agent's spec all become before a client runs it.
/// Ranges are checked by [`TestSpec::to_client_spec`] (iperf3) and
/// [`TestSpec::to_iperf2_spec`], with the same messages whichever way the spec was built.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TestSpec {
    /// Peer host name or address.
    pub host: String,
    /// Peer port; `None`: 5201 for iperf3, 5001 for iperf 2.
    pub port: Option<u16>,
    /// UDP instead of TCP.
    pub udp: bool,
    /// TCP block or UDP datagram size, bytes; `None`: iperf's default (128 KiB TCP, the path
    /// MSS for UDP).
    pub length: Option<u64>,
    /// Seconds; `None`: 10.
    pub duration: Option<u64>,
    /// Parallel streams; `None`: 1.
    pub parallel: Option<u64>,
    /// Seconds left out at the start (iperf3 `-O`); `None`: 0.
    pub omit: Option<u64>,
    pub direction: TestDirection,
    /// Bitrate limit per stream, bits/s; `None`: unlimited for TCP, 1 Mbit/s for UDP; `Some(0)`:
    /// unlimited.
    pub bitrate: Option<u64>,
    /// Socket buffer, bytes; `None`: the kernel's.
    pub window: Option<u64>,
    /// TCP maximum segment size, bytes (iperf3 only).
    pub mss: Option<u64>,
    /// IP type-of-service byte (iperf3 only).
    pub tos: Option<u32>,
    /// TCP congestion control (iperf3 only).
    pub congestion: Option<String>,
    /// Board port (interface name) to bind every socket to.
    pub bind: Option<String>,
    pub peer_type: PeerType,
}

impl TestSpec {
    /// A default test (TCP, 10 s, one stream, sending) to `host`.
    pub fn new(host: impl Into<String>) -> TestSpec {
        TestSpec {
            host: host.into(),
            ..Default::default()
        }
    }

    fn checked_host(&self) -> Result<&str, String> {
        let host = self.host.trim();
        if !valid_host(host) {
            return Err(format!("peer '{host}' is not a host name or IP address"));
        }
        Ok(host)
    }

    /// The port named by `bind` among the board's `ports`.
    fn bind_port<'a>(
        &self,
        ports: &'a [crate::board::Port],
    ) -> Result<Option<&'a crate::board::Port>, String> {
        self.bind
            .as_deref()
            .map(|b| {
                ports
                    .iter()
                    .find(|x| x.name == b)
                    .ok_or_else(|| format!("the board has no port '{b}'"))
            })
            .transpose()
    }

    fn checked_window(&self) -> Result<Option<u32>, String> {
        match self.window {
            Some(w) if !(WINDOW_MIN as u64..=WINDOW_MAX as u64).contains(&w) => {
                Err("window must be 1K..1G (1 KiB..1 GiB)".into())
            }
            w => Ok(w.map(|w| w as u32)),
        }
    }

    fn checked_bitrate(&self) -> Result<Option<u64>, String> {
        match self.bitrate {
            Some(b) if b > MAX_BITRATE => Err(format!(
                "bitrate: {b} bits/s is above the maximum of 100G ({MAX_BITRATE} bits/s)"
            )),
            b => Ok(b),
        }
    }

    /// Validate into an iperf3 client spec. `ports` are the board's interfaces, to check
    /// `bind` and take its address from. Errors name the field and its range.
    pub fn to_client_spec(&self, ports: &[crate::board::Port]) -> Result<ClientSpec, String> {
        let host = self.checked_host()?;
        let mut spec = ClientSpec::new(host);
        spec.port = range(self.port.map(u64::from), "port", 5201, 1, 65535)? as u16;
        let p = &mut spec.params;
        if self.udp {
            p.set_udp_defaults();
        }
        if let Some(len) = self.length {
            // The engine's bounds: IPv6 allows 65527-byte datagrams, IPv4 65507; a peer
            // named by host name is checked against its address family when the test starts.
            let (lo, hi) = if self.udp {
                let v4 = host.parse::<std::net::Ipv4Addr>().is_ok();
                let max = if v4 {
                    crate::engine::udp::MAX_UDP_LEN_V4
                } else {
                    crate::engine::udp::MAX_UDP_LEN_V6
                };
                (16, max as u64)
            } else {
                (1, crate::engine::iperf3::wire::MAX_TCP_BLKSIZE as u64)
            };
            if !(lo..=hi).contains(&len) {
                return Err(format!("length must be {lo}..{hi} bytes, got {len}"));
            }
            p.len = len as u32;
        }
        let max_s = crate::engine::iperf3::client::MAX_SECONDS as u64;
        let max_p = crate::engine::iperf3::wire::MAX_PARALLEL as u64;
        p.time = range(self.duration, "duration", 10, 1, max_s)? as u32;
        p.parallel = range(self.parallel, "parallel streams", 1, 1, max_p)? as u32;
        p.omit = range(self.omit, "omit", 0, 0, max_s)? as u32;
        p.direction = match self.direction {
            TestDirection::Send => Direction::Send,
            TestDirection::Receive => Direction::Receive,
            TestDirection::Bidir => Direction::Bidir,
            TestDirection::Tradeoff => {
                return Err("direction must be send, receive or bidir, got 'tradeoff'".into())
            }
        };
        if let Some(b) = self.checked_bitrate()? {
            p.bandwidth = b;
        }
        if let Some(w) = self.checked_window()? {
            p.window = Some(w);
            spec.sock.window = Some(w);
        }
        if let Some(m) = self.mss {
            let m = range(Some(m), "MSS", 0, 88, 9000).map_err(|e| format!("{e} bytes ('{m}')"))?;
            p.mss = Some(m as u32);
            spec.sock.mss = p.mss;
        }
        if let Some(t) = self.tos {
            p.tos = t;
            spec.sock.tos = t;
        }
        if let Some(c) = &self.congestion {
            p.congestion = Some(c.clone());
            spec.sock.congestion = p.congestion.clone();
        }
        if let Some(port) = self.bind_port(ports)? {
            spec.sock.bind_dev = Some(port.name.clone());
            spec.sock.bind = port.primary();
        }
        spec.validate()?;
        Ok(spec)
    }

    /// Validate into an iperf 2 client spec (default port 5001). Direction: send (plain),
    /// bidir (`-d`, both at once) or tradeoff (`-r`, send then receive); iperf 2 has no
    /// receive-only test. Omit, MSS, TOS and congestion control do not exist there.
    pub fn to_iperf2_spec(
        &self,
        ports: &[crate::board::Port],
    ) -> Result<crate::engine::iperf2::client::Iperf2Spec, String> {
        use crate::engine::iperf2::wire::Return;
        let host = self.checked_host()?;
        let mut s = crate::engine::iperf2::client::Iperf2Spec::new(host);
        s.port = range(self.port.map(u64::from), "port", 5001, 1, 65535)? as u16;
        s.udp = self.udp;
        if s.udp {
            s.rate = crate::engine::iperf2::wire::UDP_DEFAULT_RATE;
        }
        if let Some(b) = self.checked_bitrate()? {
            s.rate = b;
        }
        if let Some(len) = self.length {
            s.len = u32::try_from(len).map_err(|_| "length is too large".to_string())?;
        }
        s.time = range(self.duration, "duration", 10, 1, 86_400)? as f64;
        s.parallel = range(self.parallel, "parallel streams", 1, 1, 128)? as u32;
        if range(self.omit, "omit", 0, 0, 600)? > 0 {
            return Err("omit does not exist in iperf 2: leave it at 0".into());
        }
        s.ret = match self.direction {
            TestDirection::Send => Return::None,
            TestDirection::Bidir => Return::Dual,
            TestDirection::Tradeoff => Return::Tradeoff,
            TestDirection::Receive => {
                return Err("iperf 2 peers send back only with a return test: choose Both (-d) or Send then receive (-r)".into())
            }
        };
        s.window = self.checked_window()?;
        if self.mss.is_some() || self.tos.is_some() || self.congestion.is_some() {
            return Err(
                "MSS, TOS and congestion control are iperf 3 settings: leave them empty for an iperf 2 peer"
                    .into(),
            );
        }
        if let Some(port) = self.bind_port(ports)? {
            s.bind = Some(
                port.primary()
                    .ok_or_else(|| format!("port '{}' has no address", port.name))?,
            );
            s.bind_dev = Some(port.name.clone());
        }
        s.validate()?;
        Ok(s)
    }
}

/// A type-of-service byte as typed: decimal ("16") or hex ("0x10"), 0..255 (`-S`).
pub(crate) fn parse_tos(t: &str) -> Result<u32, String> {
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => t.parse(),
    };
    match v {
        Ok(v) if v <= 255 => Ok(v),
        _ => Err(format!(
            "TOS must be 0..255 (decimal, or hex such as 0x10), got '{t}'"
        )),
    }
}

/// What a request asks the peer to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerType {
    /// iperf3 (default).
    #[default]
    Iperf3,
    /// iperf 2.0.5 … 2.1.x (default port 5001).
    Iperf2,
    /// Ask the port with an iperf3 cookie; silence means iperf 2.
    Auto,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_whole_seconds_in_range() {
        for (text, secs) in [
            ("1", 1),
            (" 60 ", 60),
            ("86400", 86_400),
            ("", 10),
            ("  ", 10),
        ] {
            assert_eq!(parse_duration(text), Ok(secs), "{text:?}");
        }
        for (text, words) in [
            ("x", "duration must be a whole number, got 'x'"),
            ("1.5", "duration must be a whole number, got '1.5'"),
            ("-1", "duration must be a whole number, got '-1'"),
            ("10s", "duration must be a whole number, got '10s'"),
            ("0", "duration must be 1..86400, got 0"),
            ("86401", "duration must be 1..86400, got 86401"),
        ] {
            assert_eq!(parse_duration(text).unwrap_err(), words, "{text:?}");
            // The same words as the request's field.
            let req = TestRequest {
                host: "192.0.2.1".into(),
                duration: Some(text.into()),
                ..Default::default()
            };
            assert_eq!(req.to_spec(&[]).unwrap_err(), words, "{text:?}");
        }
    }

    #[test]
    fn network_settings_are_checked_and_reach_the_spec() {
        let ok = TestRequest {
            host: "192.0.2.2".into(),
            mss: Some("1200".into()),
            tos: Some("0x10".into()),
            congestion: Some("reno".into()),
            window: Some("256K".into()),
            ..Default::default()
        };
        let s = ok.to_spec(&[]).unwrap();
        assert_eq!(s.params.mss, Some(1200));
        assert_eq!(s.sock.mss, Some(1200));
        assert_eq!((s.params.tos, s.sock.tos), (16, 16));
        assert_eq!(s.params.congestion.as_deref(), Some("reno"));
        assert_eq!(s.sock.congestion.as_deref(), Some("reno"));
        assert_eq!(s.params.window, Some(256 * 1024));
        for (field, v, want) in [
            ("mss", "9001", "MSS must be 88..9000"),
            ("mss", "big", "MSS must be a whole number"),
            ("tos", "256", "TOS must be 0..255"),
            ("tos", "0xzz", "TOS must be 0..255"),
            ("congestion", "a b", "not a congestion control name"),
        ] {
            let mut r = ok.clone();
            match field {
                "mss" => r.mss = Some(v.into()),
                "tos" => r.tos = Some(v.into()),
                _ => r.congestion = Some(v.into()),
            }
            let e = r.to_spec(&[]).unwrap_err();
            assert!(e.contains(want), "{field}={v}: {e}");
        }
        let e = ok.to_iperf2_spec(&[]).unwrap_err();
        assert!(e.contains("iperf 3 settings"), "{e}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let keys = ["host".to_string(), "duraton".to_string()];
        let e = TestRequest::check_keys(keys.iter()).unwrap_err();
        assert!(
            e.starts_with("unknown field `duraton`, expected one of host, protocol"),
            "{e}"
        );
        assert!(TestRequest::check_keys(["host".to_string(), "csrf".to_string()].iter()).is_ok());
    }

    #[test]
    fn iperf2_requests() {
        let r = TestRequest {
            peer_type: Some("iperf2".into()),
            protocol: Some("udp".into()),
            direction: Some("tradeoff".into()),
            bitrate: Some("100M".into()),
            ..req("192.0.2.2")
        };
        assert_eq!(r.peer_type().unwrap(), PeerType::Iperf2);
        let s = r.to_iperf2_spec(&[]).unwrap();
        assert_eq!((s.port, s.udp, s.rate), (5001, true, 100_000_000));
        assert_eq!(s.ret, crate::engine::iperf2::wire::Return::Tradeoff);
        let bad = TestRequest {
            direction: Some("receive".into()),
            ..r.clone()
        };
        assert!(bad.to_iperf2_spec(&[]).unwrap_err().contains("return test"));
        let bad = TestRequest {
            peer_type: Some("iperf4".into()),
            ..r
        };
        assert!(bad.peer_type().unwrap_err().contains("peer type"));
    }

    fn req(host: &str) -> TestRequest {
        TestRequest {
            host: host.into(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_iperf3_defaults() {
        let s = req("192.0.2.2").to_spec(&[]).unwrap();
        assert_eq!(s.port, 5201);
        assert_eq!(s.params.time, 10);
        assert_eq!(s.params.parallel, 1);
        assert_eq!(s.params.direction, Direction::Send);
        assert_eq!(s.params.bandwidth, 0);
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (
                TestRequest {
                    duration: Some("0".into()),
                    ..req("h")
                },
                "duration",
            ),
            (
                TestRequest {
                    parallel: Some("129".into()),
                    ..req("h")
                },
                "parallel",
            ),
            (
                TestRequest {
                    port: Some("70000".into()),
                    ..req("h")
                },
                "port",
            ),
            (
                TestRequest {
                    direction: Some("up".into()),
                    ..req("h")
                },
                "direction",
            ),
            (
                TestRequest {
                    bitrate: Some("fast".into()),
                    ..req("h")
                },
                "bitrate",
            ),
            (
                TestRequest {
                    bitrate: Some("100T".into()),
                    ..req("h")
                },
                "maximum of 100G",
            ),
            (
                TestRequest {
                    window: Some("1".into()),
                    ..req("h")
                },
                "window",
            ),
            (
                TestRequest {
                    bind: Some("eth9".into()),
                    ..req("h")
                },
                "port 'eth9'",
            ),
            (req("-rf /"), "not a host"),
            (req("a b"), "not a host"),
            (req(""), "not a host"),
        ];
        for (r, want) in cases {
            let e = r.to_spec(&[]).unwrap_err();
            assert!(e.contains(want), "{e} should mention {want}");
        }
    }

    #[test]
    fn udp_defaults_and_length_limits() {
        let r = TestRequest {
            protocol: Some("udp".into()),
            ..req("192.0.2.2")
        };
        let s = r.to_spec(&[]).unwrap();
        assert_eq!(
            s.params.protocol,
            crate::engine::iperf3::wire::Protocol::Udp
        );
        assert_eq!(s.params.bandwidth, 1_048_576);
        let r = TestRequest {
            protocol: Some("udp".into()),
            length: Some("65508".into()),
            ..req("192.0.2.2")
        };
        assert!(r
            .to_spec(&[])
            .unwrap_err()
            .contains("length must be 16..65507"));
        // IPv6 peers: up to 65527, the engine's bound (the CLI's too).
        let r = TestRequest {
            protocol: Some("udp".into()),
            length: Some("65527".into()),
            ..req("2001:db8::2")
        };
        assert_eq!(r.to_spec(&[]).unwrap().params.len, 65527);
        let r = TestRequest {
            protocol: Some("udp".into()),
            length: Some("65528".into()),
            ..req("2001:db8::2")
        };
        assert!(r
            .to_spec(&[])
            .unwrap_err()
            .contains("length must be 16..65527"));
        // Omit: the engine's bound of a day, like the CLI's -O.
        let r = TestRequest {
            omit: Some("3600".into()),
            ..req("192.0.2.2")
        };
        assert_eq!(r.to_spec(&[]).unwrap().params.omit, 3600);
        let r = TestRequest {
            omit: Some("86401".into()),
            ..req("192.0.2.2")
        };
        assert!(r.to_spec(&[]).unwrap_err().contains("omit"));
        let r = TestRequest {
            protocol: Some("sctp".into()),
            ..req("192.0.2.2")
        };
        assert!(r
            .to_spec(&[])
            .unwrap_err()
            .contains("protocol must be tcp or udp"));
    }

    #[test]
    fn bind_takes_the_ports_address() {
        let ports = vec![crate::board::Port {
            name: "eth1".into(),
            up: true,
            running: true,
            loopback: false,
            addresses: vec!["198.51.100.1".parse().unwrap()],
        }];
        let r = TestRequest {
            bind: Some("eth1".into()),
            bitrate: Some("100M".into()),
            direction: Some("bidir".into()),
            ..req("198.51.100.2")
        };
        let s = r.to_spec(&ports).unwrap();
        assert_eq!(s.sock.bind_dev.as_deref(), Some("eth1"));
        assert_eq!(s.sock.bind, Some("198.51.100.1".parse().unwrap()));
        assert_eq!(s.params.bandwidth, 100_000_000);
        assert_eq!(s.params.direction, Direction::Bidir);
    }
}
