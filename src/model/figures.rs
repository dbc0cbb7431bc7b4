//! The headline figures of a run as history keeps them (one row per run); computed from a
//! report or a kind's own outcome in `results::figures`.

/// Headline figures of a run: what History lists and compare reads. Every field is optional:
/// a kind fills what it measures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFigures {
    /// Sender bitrate, bits/s.
    pub sender_bps: Option<f64>,
    /// Receiver bitrate (goodput), bits/s.
    pub receiver_bps: Option<f64>,
    /// Bytes moved in the main direction.
    pub bytes: Option<i64>,
    /// Bytes the other direction's streams moved (a bidirectional run's reverse leg; the
    /// receiver's count). Not a stored column: it tells a run's own traffic on the board's
    /// ports from other traffic.
    pub reverse_bytes: Option<i64>,
    pub retransmits: Option<i64>,
    /// UDP datagrams lost / total, loss %, jitter ms.
    pub lost_packets: Option<i64>,
    pub total_packets: Option<i64>,
    pub lost_percent: Option<f64>,
    pub jitter_ms: Option<f64>,
}
