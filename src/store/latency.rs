//! The probe samples of latency-under-load runs: one row per ICMP probe (RTT, or lost) and
//! per TCP_INFO RTT sample of a load stream, at seconds since the run started. Written in
//! batches while the run goes (the chart reads them live), deleted with their run.

use super::{Result, Store};
use rusqlite::params;
use serde::Serialize;

/// Migration 7: the probe samples of latency runs.
pub(super) const LATENCY_MIGRATION: &str = r#"
CREATE TABLE latency_samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    probe TEXT NOT NULL CHECK (probe IN ('icmp','tcp')),
    t REAL NOT NULL,
    rtt_ms REAL
);
CREATE INDEX latency_samples_run ON latency_samples(run_id, t);
"#;

/// One sample of a latency run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySampleRow {
    /// "icmp" (an echo probe) or "tcp" (TCP_INFO RTT of a load stream).
    pub probe: &'static str,
    /// When it was sent (ICMP) or read (TCP), seconds since the run started.
    pub t: f64,
    /// Round-trip time, ms; `None` = an ICMP probe lost.
    pub rtt_ms: Option<f64>,
}

impl Store {
    /// Store a batch of samples of run `run_id` (one transaction).
    pub fn add_latency_samples(&self, run_id: i64, rows: &[LatencySampleRow]) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO latency_samples (run_id, probe, t, rtt_ms) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for r in rows {
                st.execute(params![run_id, r.probe, r.t, r.rtt_ms])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// A run's samples by time.
    pub fn latency_samples(&self, run_id: i64) -> Result<Vec<LatencySampleRow>> {
        let c = self.r();
        let mut st =
            c.prepare("SELECT probe, t, rtt_ms FROM latency_samples WHERE run_id=?1 ORDER BY t")?;
        let rows = st.query_map(params![run_id], |r| {
            let p: String = r.get(0)?;
            Ok(LatencySampleRow {
                probe: if p == "tcp" { "tcp" } else { "icmp" },
                t: r.get(1)?,
                rtt_ms: r.get(2)?,
            })
        })?;
        Ok(super::readable("latency samples", rows)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};

    #[test]
    fn samples_round_trip_and_go_with_their_run() {
        let d = crate::scratch::dir("latency-store");
        let s = Store::open_dir(&d).unwrap();
        let id = s
            .create_run(&crate::store::NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                peer_host: "192.0.2.2".into(),
                peer_port: 5201,
                direction: RunDirection::Receive,
                kind: crate::model::RunKind::Latency,
                ..Default::default()
            })
            .unwrap();
        let rows = [
            LatencySampleRow {
                probe: "icmp",
                t: 0.02,
                rtt_ms: Some(0.3),
            },
            LatencySampleRow {
                probe: "icmp",
                t: 0.01,
                rtt_ms: None,
            },
            LatencySampleRow {
                probe: "tcp",
                t: 1.0,
                rtt_ms: Some(12.5),
            },
        ];
        s.add_latency_samples(id, &rows).unwrap();
        let got = s.latency_samples(id).unwrap();
        assert_eq!(got, vec![rows[1], rows[0], rows[2]]);
        assert_eq!(
            s.get_run(id).unwrap().unwrap().kind,
            crate::model::RunKind::Latency
        );
        assert!(s.delete_run(id).unwrap());
        assert!(s.latency_samples(id).unwrap().is_empty());
    }
}
