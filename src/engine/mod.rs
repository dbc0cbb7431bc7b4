//! The measurement engine: iperf3-compatible client and server, the TCP stream loops, interval
//! statistics and reports. Not for: storage, the web UI, or changing the board.
pub mod http;
pub mod iperf2;
pub mod iperf3;
pub mod meter;
pub mod net;
pub mod pacer;
pub mod report;
pub mod session;
pub mod stats;
pub mod tcp;
pub mod threadcpu;
pub mod udp;

/// Outcome of a run as stored in history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Aborted,
}

impl RunStatus {
    /// The stored word: running / completed / failed / aborted.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Aborted => "aborted",
        }
    }

    /// Parse a stored word.
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "aborted" => RunStatus::Aborted,
            _ => return None,
        })
    }
}
