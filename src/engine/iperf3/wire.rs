//! iperf3 wire format: state bytes, cookie, length-prefixed JSON framing, the parameter
//! document and the results document, read leniently and written the way stock iperf3
//! 3.9–3.18 expects (see `docs/iperf3-wire.md` §3–§9).
//!
//! This module only turns bytes into values and back. It knows nothing of sockets' state
//! machines (see `client.rs` / `server.rs`) and can be fuzzed on its own.
// Lengths and sizes here come from the network or from files: checked arithmetic and
// fallible slicing only (issue 37, blocker 3). CI runs clippy with -D warnings.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

pub use crate::engine::params::{Direction, Params, Protocol, Results, StreamResult};
pub use crate::engine::report::num;
use serde_json::{Map, Value};

/// Default iperf3 TCP/UDP port.
pub const DEFAULT_PORT: u16 = 5201;
/// Cookie length on the wire: 36 characters and a NUL.
pub const COOKIE_SIZE: usize = 37;
/// Largest params document we accept, in bytes (iperf3 3.18's `MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_JSON: u32 = 8192;
/// Largest results document a client accepts from a server, in bytes. Stock iperf3 sets no
/// limit; results with `server_output_json` of a long test can be large, 16 MiB is far above
/// any real one. (The client talks to a server its user chose; the server side, which anyone
/// can reach, uses [`MAX_CLIENT_RESULTS_JSON`].)
pub const MAX_RESULTS_JSON: u32 = 16 * 1024 * 1024;
/// Largest results document the server accepts from a client, in bytes (1 MiB). A real
/// client's results are under 50 KB (128 streams × ~250 bytes plus CPU figures; a client
/// never sends server output). The document is parsed into typed fields, skipping everything
/// else, so one session holds at most this much plus a few KB.
pub const MAX_CLIENT_RESULTS_JSON: u32 = 1024 * 1024;
/// Largest number of parallel streams (iperf3's `MAX_STREAMS`).
pub const MAX_PARALLEL: u32 = 128;
pub use crate::engine::params::DEFAULT_TCP_BLKSIZE;
/// Largest block size iperf3 accepts for TCP (`MAX_BLOCKSIZE`), bytes.
pub const MAX_TCP_BLKSIZE: usize = 1024 * 1024;

/// One-byte control states (signed on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum State {
    TestStart = 1,
    TestRunning = 2,
    TestEnd = 4,
    ParamExchange = 9,
    CreateStreams = 10,
    ServerTerminate = 11,
    ClientTerminate = 12,
    ExchangeResults = 13,
    DisplayResults = 14,
    IperfDone = 16,
    AccessDenied = -1,
    ServerError = -2,
}

impl State {
    /// The byte as sent on the wire.
    pub fn byte(self) -> u8 {
        self as i8 as u8
    }

    /// Decode a received byte; `None` for values stock iperf3 never sends.
    pub fn from_byte(b: u8) -> Option<State> {
        Some(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return None,
        })
    }
}

/// iperf3 error codes (`i_errno`) we send or map to text.
pub(crate) mod ierr {
    pub(crate) const IEACCESSDENIED: i32 = 121;
    pub(crate) const IESETBUF2: i32 = 141;
    pub(crate) const IECTRLCLOSE: i32 = 109;
    pub(crate) const IEMESSAGE: i32 = 110;
    pub(crate) const IERECVMESSAGE: i32 = 112;
    pub(crate) const IERECVPARAMS: i32 = 113;
    pub(crate) const IERECVRESULTS: i32 = 117;
    pub(crate) const IECLIENTTERM: i32 = 119;
    pub(crate) const IESERVERTERM: i32 = 120;
    pub(crate) const IEUNIMP: i32 = 126;
    pub(crate) const IENOMSG: i32 = 144;
    pub(crate) const IESTREAMCONNECT: i32 = 203;
    pub(crate) const IESTREAMID: i32 = 208;
}

/// The stock text for an iperf3 error code, as the stock client prints it.
pub fn ierr_text(code: i32) -> String {
    match code {
        ierr::IEACCESSDENIED => "the server is busy running a test. try again later".into(),
        ierr::IESETBUF2 => "socket buffer size not set correctly".into(),
        ierr::IECTRLCLOSE => "control socket has closed unexpectedly".into(),
        ierr::IEMESSAGE => {
            "received an unknown control message (ensure other side is iperf3 and not iperf)".into()
        }
        ierr::IERECVMESSAGE => "unable to receive control message".into(),
        ierr::IERECVPARAMS => "unable to receive parameters from client".into(),
        ierr::IERECVRESULTS => "unable to receive results".into(),
        ierr::IECLIENTTERM => "the client has terminated".into(),
        ierr::IESERVERTERM => "the server has terminated".into(),
        ierr::IEUNIMP => "an option you are trying to set is not implemented yet".into(),
        ierr::IENOMSG => "idle timeout for receiving data".into(),
        ierr::IESTREAMCONNECT => "unable to connect stream".into(),
        ierr::IESTREAMID => "stream has an invalid id".into(),
        102 => "unable to start listener for connections".into(),
        124 => "unable to set socket buffer size".into(),
        134 => "unable to set TCP_CONGESTION: supplied congestion control algorithm not supported on this host".into(),
        202 => "unable to start stream listener".into(),
        _ => format!("server error {code}"),
    }
}

/// Errors of the wire layer.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection closed by peer")]
    Closed,
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("JSON length {len} out of range (1..={max} bytes)")]
    BadLength { len: u32, max: u32 },
    #[error("invalid JSON: {0}")]
    BadJson(String),
    #[error("invalid value for '{key}': {why}")]
    BadField { key: &'static str, why: String },
}

/// Alphabet iperf3 draws cookie characters from.
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A fresh random cookie: 36 characters, NUL-terminated (37 bytes).
pub fn make_cookie() -> [u8; COOKIE_SIZE] {
    let mut raw = [0u8; COOKIE_SIZE - 1];
    // getrandom only fails when the OS has no entropy source at all; fall back to time.
    if getrandom::getrandom(&mut raw).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tb = t.to_le_bytes();
        for ((b, x), i) in raw.iter_mut().zip(tb.iter().cycle()).zip(0u8..) {
            *b = x ^ i.wrapping_mul(31);
        }
    }
    let mut c = [0u8; COOKIE_SIZE];
    for (d, b) in c.iter_mut().zip(raw) {
        *d = COOKIE_ALPHABET
            .get(usize::from(b % 32))
            .copied()
            .unwrap_or(b'a');
    }
    c
}

/// The cookie of a peer probe (peer type "auto"): four NUL bytes, 32 random cookie characters
/// and the NUL (37 bytes). An iperf3 server takes any 37 bytes as a cookie and answers
/// PARAM_EXCHANGE; an iperf 2 server reads the first word as its header flags, and 0 means a
/// plain test with no return test, no extension and no key — what every iperf 2 server from
/// 2.0.5 to 2.2 survives. A real cookie's letters would set iperf 2 flag bits (`0x40` of `a`
/// is HEADER_EXTEND) and send 2.0.x servers into a reverse test and 2.1.8 into a crash
/// (docs/iperf2-wire.md §6). Our own iperf3 server does not take it for an iperf 2 header: its
/// second word (`numThreads`) is far out of range.
pub fn probe_cookie() -> [u8; COOKIE_SIZE] {
    let mut c = make_cookie();
    c.copy_within(0..COOKIE_SIZE - 5, 4);
    c[..4].fill(0);
    c[COOKIE_SIZE - 1] = 0;
    c
}

/// The printable part of a cookie (up to the first NUL), lossy UTF-8.
pub fn cookie_str(c: &[u8]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(c.get(..end).unwrap_or(c)).into_owned()
}

/// Check a frame's 4-byte big-endian length prefix: the length must be in `1..=max` bytes.
/// Pure; used by [`super::framing::read_frame`] and the fuzz targets.
pub fn frame_len(prefix: [u8; 4], max: u32) -> Result<u32, WireError> {
    let len = u32::from_be_bytes(prefix);
    if len == 0 || len > max {
        return Err(WireError::BadLength { len, max });
    }
    Ok(len)
}

/// Read a JSON number as i64 the way iperf3 peers mean it: integers that do not fit i64
/// (3.12/3.13 print −1 as 18446744073709551615) are reinterpreted as two's complement,
/// and floats are truncated. Non-numbers give `None`.
pub fn lenient_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else if let Some(u) = n.as_u64() {
                Some(u as i64)
            } else {
                // f64 → i64 `as` saturates: the truncation iperf3 peers mean.
                #[allow(clippy::cast_possible_truncation)]
                let trunc = |f: f64| f as i64;
                n.as_f64().filter(|f| f.is_finite()).map(trunc)
            }
        }
        _ => None,
    }
}

/// A flag key as 3.9–3.18 peers send it: present and `true` or a non-zero number.
/// (`false`, `0`, `null`, absent: off.) Strings count as on, as on ≤3.17 (presence only).
fn flag(m: &Map<String, Value>, key: &str) -> bool {
    match m.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Number(n)) => n.as_f64().map(|f| f != 0.0).unwrap_or(true),
        Some(_) => true,
    }
}

fn get_u64(m: &Map<String, Value>, key: &'static str, max: u64) -> Result<Option<u64>, WireError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let i = lenient_i64(v).ok_or_else(|| WireError::BadField {
                key,
                why: format!("expected a number, got {v}"),
            })?;
            if i < 0 || i as u64 > max {
                // Quote the number as sent: 2^63 wraps to i64::MIN above, but is not negative.
                return Err(WireError::BadField {
                    key,
                    why: format!("{v} is outside 0..={max}"),
                });
            }
            Ok(Some(i as u64))
        }
    }
}

/// [`get_u64`] for a field that fits u32 (`max` ≤ u32::MAX).
fn get_u32(m: &Map<String, Value>, key: &'static str, max: u32) -> Result<Option<u32>, WireError> {
    Ok(get_u64(m, key, u64::from(max))?.and_then(|v| u32::try_from(v).ok()))
}

fn get_string(m: &Map<String, Value>, key: &'static str) -> Result<Option<String>, WireError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(WireError::BadField {
            key,
            why: format!("expected a string, got {v}"),
        }),
    }
}

impl Params {
    /// Parse a params document leniently (presence flags, numbers in any form, unknown keys
    /// ignored) but refuse values that would make no sense or harm the server: a wrong type
    /// on a numeric key, a negative or out-of-range number, `parallel` outside 1..=128,
    /// `len` of 0 or above 1 MiB (TCP) / 65535 (UDP).
    pub fn from_json(v: &Value) -> Result<Params, WireError> {
        let m = v.as_object().ok_or_else(|| WireError::BadField {
            key: "params",
            why: "not a JSON object".into(),
        })?;
        let protocol = if flag(m, "udp") {
            Protocol::Udp
        } else if flag(m, "sctp") {
            Protocol::Sctp
        } else {
            Protocol::Tcp
        };
        let direction = if flag(m, "bidirectional") {
            Direction::Bidir
        } else if flag(m, "reverse") {
            Direction::Receive
        } else {
            Direction::Send
        };
        let parallel = get_u32(m, "parallel", MAX_PARALLEL)?.unwrap_or(1);
        if parallel == 0 {
            return Err(WireError::BadField {
                key: "parallel",
                why: "0 streams".into(),
            });
        }
        let max_len = if protocol == Protocol::Udp {
            65535
        } else {
            u32::try_from(MAX_TCP_BLKSIZE).unwrap_or(u32::MAX)
        };
        let len = get_u32(m, "len", max_len)?.unwrap_or(if protocol == Protocol::Udp {
            1460
        } else {
            u32::try_from(DEFAULT_TCP_BLKSIZE).unwrap_or(u32::MAX)
        });
        if len == 0 {
            return Err(WireError::BadField {
                key: "len",
                why: "block size 0".into(),
            });
        }
        let day = 86_400u32;
        Ok(Params {
            protocol,
            omit: get_u32(m, "omit", day)?.unwrap_or(0),
            time: get_u32(m, "time", day)?.unwrap_or(10),
            num: get_u64(m, "num", i64::MAX as u64)?.unwrap_or(0),
            blockcount: get_u64(m, "blockcount", i64::MAX as u64)?.unwrap_or(0),
            mss: get_u32(m, "MSS", 65535)?.filter(|&x| x > 0),
            nodelay: flag(m, "nodelay"),
            parallel,
            direction,
            window: get_u32(m, "window", i32::MAX as u32)?.filter(|&x| x > 0),
            len,
            bandwidth: get_u64(m, "bandwidth", i64::MAX as u64)?.unwrap_or(0),
            burst: get_u32(m, "burst", 1_000_000)?.unwrap_or(0),
            tos: get_u32(m, "TOS", 255)?.unwrap_or(0),
            title: get_string(m, "title")?,
            extra_data: get_string(m, "extra_data")?,
            congestion: get_string(m, "congestion")?,
            fq_rate: get_u64(m, "fqrate", i64::MAX as u64)?.unwrap_or(0),
            get_server_output: flag(m, "get_server_output"),
            udp_counters_64bit: flag(m, "udp_counters_64bit"),
            repeating_payload: flag(m, "repeating_payload"),
            zerocopy: flag(m, "zerocopy"),
            dont_fragment: flag(m, "dont_fragment"),
            skip_rx_copy: flag(m, "skip_rx_copy"),
            client_version: get_string(m, "client_version")?,
            // Local to each end: a server paces its own senders as it decides.
            udp_pacing: Default::default(),
        })
    }

    /// The document as a stock 3.12 client sends it: stock key order, flag keys present only
    /// when on, flags of the typed kind (`true` or `1`) that 3.18 requires.
    ///
    /// `self` is destructured field by field, without `..`: a new field of [`Params`] does not
    /// compile here until its wire key (or that it has none) is decided.
    pub fn to_json(&self) -> Value {
        let Params {
            protocol,
            omit,
            time,
            num,
            blockcount,
            mss,
            nodelay,
            parallel,
            direction,
            window,
            len,
            bandwidth,
            burst,
            tos,
            title,
            extra_data,
            congestion,
            fq_rate,
            get_server_output,
            udp_counters_64bit,
            repeating_payload,
            zerocopy,
            dont_fragment,
            skip_rx_copy,
            client_version,
            // netperfd's own (how this end paces), never on the wire.
            udp_pacing: _,
        } = self;
        let mut m = Map::new();
        match protocol {
            Protocol::Tcp => m.insert("tcp".into(), Value::Bool(true)),
            Protocol::Udp => m.insert("udp".into(), Value::Bool(true)),
            Protocol::Sctp => m.insert("sctp".into(), Value::Bool(true)),
        };
        m.insert("omit".into(), (*omit).into());
        m.insert("time".into(), (*time).into());
        m.insert("num".into(), (*num).into());
        m.insert("blockcount".into(), (*blockcount).into());
        if let Some(mss) = mss {
            m.insert("MSS".into(), (*mss).into());
        }
        if *nodelay {
            m.insert("nodelay".into(), Value::Bool(true));
        }
        m.insert("parallel".into(), (*parallel).into());
        match direction {
            Direction::Send => {}
            Direction::Receive => {
                m.insert("reverse".into(), Value::Bool(true));
            }
            Direction::Bidir => {
                m.insert("bidirectional".into(), Value::Bool(true));
            }
        }
        if let Some(w) = window {
            m.insert("window".into(), (*w).into());
        }
        m.insert("len".into(), (*len).into());
        if *bandwidth > 0 || *protocol == Protocol::Udp {
            m.insert("bandwidth".into(), (*bandwidth).into());
        }
        m.insert("pacing_timer".into(), 1000.into());
        if *burst > 0 {
            m.insert("burst".into(), (*burst).into());
        }
        if *tos > 0 {
            m.insert("TOS".into(), (*tos).into());
        }
        if let Some(t) = title {
            m.insert("title".into(), t.clone().into());
        }
        if let Some(t) = extra_data {
            m.insert("extra_data".into(), t.clone().into());
        }
        if let Some(c) = congestion {
            m.insert("congestion".into(), c.clone().into());
        }
        if *fq_rate > 0 {
            m.insert("fqrate".into(), (*fq_rate).into());
        }
        for (on, key) in [
            (get_server_output, "get_server_output"),
            (udp_counters_64bit, "udp_counters_64bit"),
            (repeating_payload, "repeating_payload"),
            (zerocopy, "zerocopy"),
            (dont_fragment, "dont_fragment"),
            (skip_rx_copy, "skip_rx_copy"),
        ] {
            if *on {
                m.insert(key.into(), 1.into());
            }
        }
        m.insert(
            "client_version".into(),
            client_version
                .clone()
                .unwrap_or_else(|| "3.12".into())
                .into(),
        );
        Value::Object(m)
    }

    /// Number of streams the client sends on / the server receives on.
    pub fn client_send_streams(&self) -> u32 {
        match self.direction {
            Direction::Send | Direction::Bidir => self.parallel,
            Direction::Receive => 0,
        }
    }

    /// Number of streams the server sends on / the client receives on.
    pub fn client_recv_streams(&self) -> u32 {
        match self.direction {
            Direction::Receive | Direction::Bidir => self.parallel,
            Direction::Send => 0,
        }
    }

    /// Total number of data streams in the test.
    pub fn total_streams(&self) -> u32 {
        self.client_send_streams()
            .saturating_add(self.client_recv_streams())
    }
}

/// Stream IDs in creation order, with iperf3's quirk: 1, 3, 4, 5, … (never 2).
pub fn stream_id(index: usize) -> u32 {
    if index == 0 {
        1
    } else {
        u32::try_from(index).map_or(u32::MAX, |i| i.saturating_add(2))
    }
}

/// The results key under which a netperfd server adds its own drop counters over the test
/// (see [`Results::netperfd_drops`]); a stock client ignores keys it does not know.
pub const NETPERFD_DROPS: &str = "netperfd_drops";
/// The results key under which a netperfd peer says who paced its UDP senders (see
/// [`Results::netperfd_pacing`]).
pub const NETPERFD_PACING: &str = "netperfd_pacing";

impl Results {
    /// Parse leniently; a missing required key is an error (stock IERECVRESULTS). Numbers
    /// in any form (see [`lenient_i64`]), non-numbers where a number is optional count as
    /// absent, at most 2 × [`MAX_PARALLEL`] streams with ids 1..=258.
    pub fn from_json(v: &Value) -> Result<Results, WireError> {
        super::lenient::results_from_value(v)
    }

    /// Parse from the document's bytes without building a `Value` (memory: the input plus a
    /// few KB); `server_output_json` is skipped. What the server does with a client's results.
    pub fn from_slice(bytes: &[u8]) -> Result<Results, WireError> {
        super::lenient::results_from_slice(bytes)
    }

    /// The document as 3.14+ send it (signed −1, both `omitted_*` keys, no nulls).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("cpu_util_total".into(), num(self.cpu_util_total));
        m.insert("cpu_util_user".into(), num(self.cpu_util_user));
        m.insert("cpu_util_system".into(), num(self.cpu_util_system));
        m.insert(
            "sender_has_retransmits".into(),
            self.sender_has_retransmits.into(),
        );
        if let Some(c) = &self.congestion_used {
            m.insert("congestion_used".into(), c.clone().into());
        }
        if let Some(t) = &self.server_output_text {
            m.insert("server_output_text".into(), t.clone().into());
        }
        if let Some(j) = &self.server_output_json {
            m.insert("server_output_json".into(), j.clone());
        }
        if let Some(d) = &self.netperfd_drops {
            m.insert(NETPERFD_DROPS.into(), d.clone());
        }
        if let Some(p) = &self.netperfd_pacing {
            m.insert(NETPERFD_PACING.into(), p.clone().into());
        }
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "bytes": s.bytes,
                    "retransmits": s.retransmits,
                    "jitter": num(s.jitter),
                    "errors": s.errors,
                    "omitted_errors": s.omitted_errors,
                    "packets": s.packets,
                    "omitted_packets": s.omitted_packets,
                    "start_time": num(s.start_time),
                    "end_time": num(s.end_time),
                })
            })
            .collect();
        m.insert("streams".into(), Value::Array(streams));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_one_as_u64_reads_back_as_minus_one() {
        let v: Value = serde_json::from_str("18446744073709551615").unwrap();
        assert_eq!(lenient_i64(&v), Some(-1));
        let v: Value = serde_json::from_str("1e+16").unwrap();
        assert_eq!(lenient_i64(&v), Some(10_000_000_000_000_000));
    }

    #[test]
    fn probe_cookie_is_a_plain_iperf2_header_and_not_iperf2_to_our_server() {
        use crate::engine::iperf2::wire::{looks_like_iperf2, looks_like_iperf3, ClientHeader};
        for _ in 0..200 {
            let c = probe_cookie();
            assert_eq!(c.len(), 37);
            assert_eq!(&c[..4], &[0, 0, 0, 0]);
            assert_eq!(c[36], 0);
            assert!(c[4..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
            // As iperf 2 reads it: flags 0 (no return test, no extension, no key), and a
            // numThreads word of four letters that no server takes for a stream count.
            let h = ClientHeader::parse(&c).unwrap();
            assert_eq!(h.flags, 0);
            assert!(h.num_threads > 0x3232_3232);
            // Our iperf3 server answers it as a cookie (refuse_iperf2 stays out of it), and
            // our iperf 2 server does not mistake it for a stock iperf3 cookie either.
            assert!(!looks_like_iperf2(&c));
            assert!(!looks_like_iperf3(&c));
        }
        // The first real-cookie letter would set iperf 2's HEADER_EXTEND bit.
        assert_eq!(u32::from(b'a') << 24 & 0x4000_0000, 0x4000_0000);
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<u32> = (0..5).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6]);
    }

    #[test]
    fn reverse_false_is_off_but_presence_with_true_is_on() {
        let p = Params::from_json(&serde_json::json!({"tcp":true,"reverse":false})).unwrap();
        assert_eq!(p.direction, Direction::Send);
        let p = Params::from_json(&serde_json::json!({"tcp":true,"reverse":true})).unwrap();
        assert_eq!(p.direction, Direction::Receive);
        let p = Params::from_json(&serde_json::json!({"udp":true,"bidirectional":1})).unwrap();
        assert_eq!(p.direction, Direction::Bidir);
        assert_eq!(p.protocol, Protocol::Udp);
    }

    #[test]
    fn params_reject_bad_types_and_ranges() {
        for bad in [
            r#"{"tcp":true,"parallel":"4"}"#,
            r#"{"tcp":true,"parallel":0}"#,
            r#"{"tcp":true,"parallel":129}"#,
            r#"{"tcp":true,"len":0}"#,
            r#"{"tcp":true,"len":2000000}"#,
            r#"{"tcp":true,"time":-5}"#,
            r#"{"tcp":true,"title":5}"#,
            r#"[1,2,3]"#,
        ] {
            let v: Value = serde_json::from_str(bad).unwrap();
            assert!(Params::from_json(&v).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn out_of_range_numbers_are_quoted_as_sent() {
        let v: Value = serde_json::from_str(r#"{"tcp":true,"num":9223372036854775808}"#).unwrap();
        let e = Params::from_json(&v).unwrap_err().to_string();
        assert!(e.contains("9223372036854775808 is outside"), "{e}");
        assert!(!e.contains('-'), "{e}");
    }

    /// Issue 39 (kpace tryout): a -R client's -J lacked end.pacing (only the server's had
    /// it). A netperfd server says who paced its senders in its results; a client reads it
    /// bounded, as text only, and a stock peer's results (no key) read as before.
    #[test]
    fn a_servers_pacing_words_cross_the_results() {
        let mine = Results {
            netperfd_pacing: Some("user-space token bucket".into()),
            streams: vec![StreamResult {
                id: 1,
                bytes: 10,
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = mine.to_json();
        assert_eq!(v["netperfd_pacing"], "user-space token bucket");
        let back = Results::from_json(&v).unwrap();
        assert_eq!(
            back.netperfd_pacing.as_deref(),
            Some("user-space token bucket")
        );
        let head = r#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":10}]"#;
        let doc = |p: &str| format!("{head},\"netperfd_pacing\":{p}}}");
        // Not text: nothing; control characters blanked; 10,000 characters cut to 200 + "…".
        for odd in ["null", "3", "[1]", r#"{"by":"kernel"}"#] {
            let r = Results::from_json(&serde_json::from_str(&doc(odd)).unwrap()).unwrap();
            assert_eq!(r.netperfd_pacing, None, "{odd}");
            assert_eq!(r.streams[0].bytes, 10);
        }
        let r = Results::from_slice(doc(r#""kernel\u0007 (fq)""#).as_bytes()).unwrap();
        assert_eq!(r.netperfd_pacing.as_deref(), Some("kernel  (fq)"));
        let long = format!("\"{}\"", "k".repeat(10_000));
        let r = Results::from_slice(doc(&long).as_bytes()).unwrap();
        assert_eq!(r.netperfd_pacing.map(|p| p.chars().count()), Some(201));
        let stock = Results::from_slice(format!("{head}}}").as_bytes()).unwrap();
        assert_eq!(stock.netperfd_pacing, None);
        assert!(stock.to_json().get("netperfd_pacing").is_none());
    }

    #[test]
    fn a_client_s_drop_counters_are_read_bounded_and_leniently() {
        let head = r#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":10}],"netperfd_drops":"#;
        let doc = |drops: &str| format!("{head}{drops}}}");
        // Both parsers (the server's from bytes, the client's from a Value) agree.
        let d = r#"[{"place":"qdisc","port":"eth0","packets":17422,"counter":"qdisc tbf drops on eth0","x":[1]},7,{"place":"nic","packets":-3,"counter":"rx"},{"place":"socket","packets":5,"counter":"Udp RcvbufErrors"}]"#;
        let a = Results::from_slice(doc(d).as_bytes()).unwrap();
        let b = Results::from_json(&serde_json::from_str(&doc(d)).unwrap()).unwrap();
        assert_eq!(a.netperfd_drops, b.netperfd_drops);
        assert_eq!(
            a.netperfd_drops,
            Some(serde_json::json!([
                {"place": "qdisc", "port": "eth0", "packets": 17422, "counter": "qdisc tbf drops on eth0"},
                {"place": "socket", "packets": 5, "counter": "Udp RcvbufErrors"}
            ]))
        );
        // Not a list: no drops, and the results still read.
        for odd in ["null", "3", r#""x""#, r#"{"a":1}"#] {
            let r = Results::from_slice(doc(odd).as_bytes()).unwrap();
            assert_eq!(r.netperfd_drops, None, "{odd}");
            assert_eq!(r.streams[0].bytes, 10);
        }
        // 10,000 entries: the first 16 kept.
        let one = r#"{"place":"qdisc","packets":1,"counter":"c"}"#;
        let many = format!("[{}]", vec![one; 10_000].join(","));
        let r = Results::from_slice(doc(&many).as_bytes()).unwrap();
        let n = r
            .netperfd_drops
            .as_ref()
            .and_then(|v| v.as_array())
            .map(Vec::len);
        assert_eq!(n, Some(super::super::lenient::MAX_DROP_ENTRIES));
    }

    #[test]
    fn results_from_bytes_skip_server_output_and_agree_with_value_parse() {
        let doc = br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":18446744073709551615,"congestion_used":"cubic","server_output_json":{"intervals":[{"streams":[{"bytes":1}]}]},"extra":[1,2,{"a":[]}],"streams":[{"id":1,"bytes":1.5e3,"retransmits":[1],"jitter":"x","packets":18446744073709551615,"end_time":1}]}"#;
        let a = Results::from_slice(doc).unwrap();
        assert_eq!(a.sender_has_retransmits, -1);
        assert_eq!(a.server_output_json, None);
        assert_eq!(a.congestion_used.as_deref(), Some("cubic"));
        assert_eq!(a.streams[0].bytes, 1500);
        assert_eq!(a.streams[0].retransmits, -1);
        assert_eq!(a.streams[0].packets, -1);
        let v: Value = serde_json::from_slice(doc).unwrap();
        let mut b = Results::from_json(&v).unwrap();
        assert!(b.server_output_json.is_some());
        b.server_output_json = None;
        assert_eq!(a, b);
        for bad in [
            &br#"[1]"#[..],
            br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0}"#,
            br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[1]}"#,
            br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[{"id":0}]}"#,
            br#"{"cpu_util_total":1,"#,
        ] {
            assert!(Results::from_slice(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // 257 streams: refused without storing them.
        let mut many = br#"{"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":["#.to_vec();
        for i in 0..257 {
            many.extend_from_slice(
                format!("{}{{\"id\":1}}", if i > 0 { "," } else { "" }).as_bytes(),
            );
        }
        many.extend_from_slice(b"]}");
        let e = Results::from_slice(&many).unwrap_err().to_string();
        assert!(e.contains("257 streams"), "{e}");
    }

    #[test]
    fn params_round_trip_in_stock_order() {
        let p = Params {
            time: 2,
            ..Params::default()
        };
        let s = serde_json::to_string(&p.to_json()).unwrap();
        assert_eq!(
            s,
            r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#
        );
        let back = Params::from_json(&p.to_json()).unwrap();
        assert_eq!(back.time, 2);
        assert_eq!(back.client_version.as_deref(), Some("3.12"));
    }

    #[test]
    fn skip_rx_copy_is_a_stock_flag() {
        let p = Params {
            skip_rx_copy: true,
            ..Params::default()
        };
        assert_eq!(p.to_json()["skip_rx_copy"], 1);
        assert!(Params::from_json(&p.to_json()).unwrap().skip_rx_copy);
        assert!(
            !Params::from_json(&Params::default().to_json())
                .unwrap()
                .skip_rx_copy
        );
    }

    #[test]
    fn fq_rate_is_sent_and_read_as_stock_fqrate() {
        let p = Params {
            time: 2,
            fq_rate: 100_000_000,
            ..Params::default()
        };
        let v = p.to_json();
        assert_eq!(v["fqrate"], 100_000_000);
        assert_eq!(Params::from_json(&v).unwrap().fq_rate, 100_000_000);
        // A stock 3.21 client's document: {"tcp":true,...,"fqrate":100000000}.
        let stock = serde_json::json!({"tcp": true, "time": 3, "parallel": 1, "len": 131072, "fqrate": 100000000});
        assert_eq!(Params::from_json(&stock).unwrap().fq_rate, 100_000_000);
        assert!(Params::from_json(&serde_json::json!({"tcp": true, "fqrate": -1})).is_err());
        // Off: no key at all.
        assert!(Params::default().to_json().get("fqrate").is_none());
    }

    #[test]
    fn results_missing_required_key_is_error() {
        let v = serde_json::json!({"cpu_util_total":1.0,"cpu_util_user":0.5,"streams":[]});
        assert!(Results::from_json(&v).is_err());
    }

    #[test]
    fn results_never_contain_null() {
        let r = Results {
            cpu_util_total: f64::NAN,
            cpu_util_user: f64::INFINITY,
            streams: vec![StreamResult {
                id: 1,
                jitter: f64::NAN,
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = serde_json::to_string(&r.to_json()).unwrap();
        assert!(!s.contains("null"), "{s}");
    }

    #[test]
    fn cookie_is_36_chars_and_nul() {
        let c = make_cookie();
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
        assert_eq!(cookie_str(&c).len(), 36);
    }
}
