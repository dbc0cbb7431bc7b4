//! Bounded, typed parsing of an iperf3 results document straight from bytes.
//!
//! A `serde_json::Value` of a document takes up to ~85 times the document's size, so a
//! hostile 16 MB document cost the server more than 1 GB. Here the document is read into
//! the few typed fields the server needs; everything else (unknown keys, `server_output_json`,
//! nested arrays where a number belongs) is skipped without being stored. The `streams` array
//! is cut off after [`MAX_PARALLEL`] × 2 entries. Memory: the input plus a few KB.

use super::wire::{Results, StreamResult, WireError, MAX_PARALLEL};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// One JSON value read loosely: a number in any of its forms, a string, or "something
/// else" (skipped without storing it).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Loose {
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    #[default]
    Other,
}

impl Loose {
    /// As `lenient_i64`: integers above i64 wrap (two's complement), floats truncate.
    fn as_i64(&self) -> Option<i64> {
        match *self {
            Loose::Int(i) => Some(i),
            Loose::UInt(u) => Some(u as i64),
            Loose::Float(f) if f.is_finite() => Some(f as i64),
            _ => None,
        }
    }

    /// Any finite number as f64.
    fn as_f64(&self) -> Option<f64> {
        match *self {
            Loose::Int(i) => Some(i as f64),
            Loose::UInt(u) => Some(u as f64),
            Loose::Float(f) if f.is_finite() => Some(f),
            _ => None,
        }
    }

    fn into_string(self) -> Option<String> {
        match self {
            Loose::Str(s) => Some(s),
            _ => None,
        }
    }
}

struct LooseVisitor;

impl<'de> Visitor<'de> for LooseVisitor {
    type Value = Loose;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Loose, E> {
        Ok(Loose::Other)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Loose, E> {
        Ok(Loose::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Loose, E> {
        Ok(Loose::UInt(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Loose, E> {
        Ok(Loose::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Loose, E> {
        Ok(Loose::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Loose, E> {
        Ok(Loose::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Loose, E> {
        Ok(Loose::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Loose, E> {
        Ok(Loose::Other)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Loose, D::Error> {
        d.deserialize_any(LooseVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Loose, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Loose, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Loose, D::Error> {
        d.deserialize_any(LooseVisitor)
    }
}

/// A stream entry: only the keys we read, each loose; anything else is skipped.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireStream {
    id: Loose,
    bytes: Loose,
    retransmits: Loose,
    jitter: Loose,
    errors: Loose,
    omitted_errors: Loose,
    packets: Loose,
    omitted_packets: Loose,
    start_time: Loose,
    end_time: Loose,
}

/// The `streams` key: entries that are objects, counted; `too_many` is set (and the rest
/// skipped) past 2 × [`MAX_PARALLEL`] entries; `not_object` when an entry is not an object.
#[derive(Default)]
struct WireStreams {
    present: bool,
    entries: Vec<WireStream>,
    count: usize,
    not_object: bool,
}

struct StreamsVisitor;

impl<'de> Visitor<'de> for StreamsVisitor {
    type Value = WireStreams;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of stream objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireStreams, A::Error> {
        let mut out = WireStreams {
            present: true,
            ..Default::default()
        };
        let max = 2 * MAX_PARALLEL as usize;
        loop {
            if out.count >= max || out.not_object {
                match seq.next_element::<IgnoredAny>()? {
                    Some(_) => out.count += 1,
                    None => break,
                }
                continue;
            }
            match seq.next_element::<ObjOrNot<WireStream>>()? {
                Some(ObjOrNot(Some(s))) => {
                    out.entries.push(s);
                    out.count += 1;
                }
                Some(ObjOrNot(None)) => {
                    out.not_object = true;
                    out.count += 1;
                }
                None => break,
            }
        }
        Ok(out)
    }
    // Not an array: "missing or not an array", decided by the caller.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<WireStreams, E> {
        Ok(WireStreams::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireStreams, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(WireStreams::default())
    }
}

impl<'de> Deserialize<'de> for WireStreams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WireStreams, D::Error> {
        d.deserialize_any(StreamsVisitor)
    }
}

/// An entry (a stream, a drop counter) if it is an object, `None` (skipped) otherwise.
struct ObjOrNot<T>(Option<T>);

struct ObjVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = ObjOrNot<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjOrNot<T>, A::Error> {
        let s = T::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(ObjOrNot(Some(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ObjOrNot<T>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(ObjOrNot(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<ObjOrNot<T>, E> {
        Ok(ObjOrNot(None))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjOrNot<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ObjOrNot<T>, D::Error> {
        d.deserialize_any(ObjVisitor(std::marker::PhantomData))
    }
}

/// Most entries of a peer's `netperfd_drops` read; the rest are skipped unstored.
pub(super) const MAX_DROP_ENTRIES: usize = 16;

/// Longest text (place, port, counter) of a `netperfd_drops` entry kept, characters.
pub(super) const MAX_DROP_TEXT: usize = 120;

/// Longest congestion control name a peer's results may carry (Linux: 16 bytes).
pub(super) const MAX_CONGESTION_TEXT: usize = 32;
/// Longest `netperfd_pacing` text kept from a peer, characters (ours are under 160).
pub(super) const MAX_PACING_TEXT: usize = 200;

/// One entry of `netperfd_drops` (see [`Results::netperfd_drops`]): only the keys we read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireDrop {
    place: Loose,
    port: Loose,
    packets: Loose,
    unit: Loose,
    counted: Loose,
    counter: Loose,
}

/// `netperfd_drops`: the first [`MAX_DROP_ENTRIES`] object entries of a list; anything that
/// is not a list reads as no list, so a peer's odd value never fails its results.
#[derive(Default)]
struct WireDrops(Option<Vec<WireDrop>>);

struct DropsVisitor;

impl<'de> Visitor<'de> for DropsVisitor {
    type Value = WireDrops;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of drop counters")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireDrops, A::Error> {
        let mut out = Vec::new();
        while let Some(ObjOrNot(e)) = seq.next_element::<ObjOrNot<WireDrop>>()? {
            if let Some(e) = e {
                out.push(e);
            }
            if out.len() == MAX_DROP_ENTRIES {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                break;
            }
        }
        Ok(WireDrops(Some(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireDrops, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(WireDrops(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<WireDrops, E> {
        Ok(WireDrops(None))
    }
}

impl<'de> Deserialize<'de> for WireDrops {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WireDrops, D::Error> {
        d.deserialize_any(DropsVisitor)
    }
}

impl WireDrops {
    /// The entries with a text `place` and `counter` and a packet count ≥ 0, as the JSON
    /// list [`Results::netperfd_drops`] holds; `port` kept when it is text.
    fn into_value(self) -> Option<serde_json::Value> {
        let list = self.0?;
        Some(serde_json::Value::Array(
            list.into_iter()
                .filter_map(|d| {
                    let packets = d.packets.as_i64().filter(|n| *n >= 0)?;
                    let mut m = serde_json::Map::new();
                    // Text cut and cleaned here, before anything is stored: 16 entries of
                    // 800 KB ports stored 14 MB per run (issue 38's tryout).
                    let text = |s: String| crate::model::display::peer_text(&s, MAX_DROP_TEXT);
                    m.insert("place".into(), text(d.place.into_string()?).into());
                    if let Some(p) = d.port.into_string() {
                        m.insert("port".into(), text(p).into());
                    }
                    m.insert("packets".into(), packets.into());
                    // The unit of `packets` (`datagrams` / `skbs`) and a qdisc's own skb
                    // count; short text only (the ledger reads two words).
                    if let Some(u) = d.unit.into_string().filter(|u| u.len() <= 16) {
                        m.insert("unit".into(), u.into());
                    }
                    if let Some(c) = d.counted.as_i64().filter(|n| *n >= 0) {
                        m.insert("counted".into(), c.into());
                    }
                    m.insert("counter".into(), text(d.counter.into_string()?).into());
                    Some(serde_json::Value::Object(m))
                })
                .collect(),
        ))
    }
}

/// The top level: only the keys we read. `server_output_json` is kept as a `Value` only
/// when `J` is `serde_json::Value` (the client); the server uses `IgnoredAny`.
#[derive(Deserialize)]
#[serde(bound = "J: Deserialize<'de>")]
struct WireResults<J> {
    #[serde(default)]
    cpu_util_total: Loose,
    #[serde(default)]
    cpu_util_user: Loose,
    #[serde(default)]
    cpu_util_system: Loose,
    #[serde(default)]
    sender_has_retransmits: Loose,
    #[serde(default)]
    congestion_used: Loose,
    #[serde(default)]
    server_output_text: Loose,
    #[serde(default = "none")]
    server_output_json: Option<J>,
    #[serde(default)]
    netperfd_drops: WireDrops,
    #[serde(default)]
    netperfd_pacing: Loose,
    #[serde(default)]
    streams: WireStreams,
}

fn none<J>() -> Option<J> {
    None
}

fn bad(key: &'static str, why: &str) -> WireError {
    WireError::BadField {
        key,
        why: why.into(),
    }
}

fn convert(w: WireResults<serde_json::Value>) -> Result<Results, WireError> {
    let ws = w.streams;
    if !ws.present {
        return Err(bad("streams", "missing or not an array"));
    }
    if ws.count > 2 * MAX_PARALLEL as usize {
        return Err(WireError::BadField {
            key: "streams",
            why: format!("{} streams", ws.count),
        });
    }
    if ws.not_object {
        return Err(bad("streams", "entry is not an object"));
    }
    let mut streams = Vec::with_capacity(ws.entries.len());
    for s in ws.entries {
        let id =
            s.id.as_i64()
                .ok_or_else(|| bad("id", "missing or not a number"))?;
        if !(1..=(2 * MAX_PARALLEL as i64 + 2)).contains(&id) {
            return Err(WireError::BadField {
                key: "id",
                why: format!("{id} is not a stream id"),
            });
        }
        // A byte count that is there must be one: a negative one (or an integer above
        // i64, which the lenient read wraps) or a string was stored as 0 bytes (the s52
        // tryout: 10^19, −5, "1e12"). Absent: 0, as before.
        let bytes = match &s.bytes {
            Loose::Other => 0,
            b => b
                .as_i64()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| WireError::BadField {
                    key: "bytes",
                    why: format!("stream {id}: not a byte count"),
                })?,
        };
        streams.push(StreamResult {
            id: id as u32,
            bytes,
            retransmits: s.retransmits.as_i64().unwrap_or(-1),
            jitter: s.jitter.as_f64().unwrap_or(0.0).max(0.0),
            errors: s.errors.as_i64().unwrap_or(0),
            omitted_errors: s.omitted_errors.as_i64().unwrap_or(0),
            packets: s.packets.as_i64().unwrap_or(0),
            omitted_packets: s.omitted_packets.as_i64().unwrap_or(0),
            start_time: s.start_time.as_f64().unwrap_or(0.0),
            end_time: s.end_time.as_f64().unwrap_or(0.0).max(0.0),
        });
    }
    let req =
        |v: &Loose, k: &'static str| v.as_f64().ok_or_else(|| bad(k, "missing or not a number"));
    Ok(Results {
        cpu_util_total: req(&w.cpu_util_total, "cpu_util_total")?,
        cpu_util_user: req(&w.cpu_util_user, "cpu_util_user")?,
        cpu_util_system: req(&w.cpu_util_system, "cpu_util_system")?,
        sender_has_retransmits: w
            .sender_has_retransmits
            .as_i64()
            .ok_or_else(|| bad("sender_has_retransmits", "missing or not a number"))?,
        congestion_used: w
            .congestion_used
            .into_string()
            .map(|c| crate::model::display::peer_text(&c, MAX_CONGESTION_TEXT)),
        server_output_text: w.server_output_text.into_string(),
        server_output_json: w.server_output_json.filter(|v| !v.is_null()),
        netperfd_drops: w.netperfd_drops.into_value(),
        netperfd_pacing: w
            .netperfd_pacing
            .into_string()
            .map(|p| crate::model::display::peer_text(&p, MAX_PACING_TEXT)),
        streams,
    })
}

fn not_object(bytes: &[u8], e: serde_json::Error) -> WireError {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if e.is_data() && first != Some(&b'{') {
        bad("results", "not a JSON object")
    } else {
        WireError::BadJson(e.to_string())
    }
}

/// Parse a results document from its bytes, as the server does with a client's: typed,
/// bounded (see the module doc), `server_output_json` skipped. Same leniency and errors as
/// [`Results::from_json`].
pub(super) fn results_from_slice(bytes: &[u8]) -> Result<Results, WireError> {
    let w: WireResults<IgnoredAny> =
        serde_json::from_slice(bytes).map_err(|e| not_object(bytes, e))?;
    convert(WireResults {
        cpu_util_total: w.cpu_util_total,
        cpu_util_user: w.cpu_util_user,
        cpu_util_system: w.cpu_util_system,
        sender_has_retransmits: w.sender_has_retransmits,
        congestion_used: w.congestion_used,
        server_output_text: w.server_output_text,
        server_output_json: None,
        netperfd_drops: w.netperfd_drops,
        netperfd_pacing: w.netperfd_pacing,
        streams: w.streams,
    })
}

/// Parse a results document from a `Value` (keeps `server_output_json`), as the client does
/// with a server's.
pub(super) fn results_from_value(v: &serde_json::Value) -> Result<Results, WireError> {
    if !v.is_object() {
        return Err(bad("results", "not a JSON object"));
    }
    let w: WireResults<serde_json::Value> =
        WireResults::deserialize(v).map_err(|e| WireError::BadJson(e.to_string()))?;
    convert(w)
}
