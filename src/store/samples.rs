//! Monitor samples stored with a run (CPU per core, port counters, conntrack), run kinds other
//! than iperf3 (their figures and JSON summary), and the legs of multi-port runs.

use super::{run_from_row, Result, RunRow, Store, RUN_COLS};
use crate::model::{RunFigures, RunStatus};
use rusqlite::params;
use serde::{Deserialize, Serialize};

/// Migration 4: run kind, parent run, kind-specific summary, and the sample tables.
pub(super) const SAMPLES_MIGRATION: &str = r#"
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'iperf3';
ALTER TABLE runs ADD COLUMN parent_id INTEGER REFERENCES runs(id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN summary_json TEXT;
CREATE INDEX runs_parent ON runs(parent_id);
CREATE TABLE cpu_samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t REAL NOT NULL,
    cpu INTEGER NOT NULL,
    user REAL NOT NULL,
    system REAL NOT NULL,
    iowait REAL NOT NULL,
    irq REAL NOT NULL,
    softirq REAL NOT NULL,
    steal REAL NOT NULL,
    idle REAL NOT NULL,
    PRIMARY KEY (run_id, t, cpu)
);
CREATE TABLE port_samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t REAL NOT NULL,
    ifname TEXT NOT NULL,
    seconds REAL NOT NULL,
    rx_bytes INTEGER NOT NULL,
    tx_bytes INTEGER NOT NULL,
    rx_packets INTEGER NOT NULL,
    tx_packets INTEGER NOT NULL,
    rx_errors INTEGER NOT NULL,
    tx_errors INTEGER NOT NULL,
    rx_dropped INTEGER NOT NULL,
    tx_dropped INTEGER NOT NULL,
    speed_mbps INTEGER,
    mtu INTEGER,
    PRIMARY KEY (run_id, t, ifname)
);
CREATE TABLE sys_samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t REAL NOT NULL,
    conntrack INTEGER,
    PRIMARY KEY (run_id, t)
);
"#;

/// CPU time shares of one core (or all, `cpu` = -1) over one sample, in percent of that
/// core's time (they add up to 100). Source: the deltas of `/proc/stat` jiffies; `user`
/// includes `nice`, `steal` includes `guest`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuSampleRow {
    /// End of the sample, seconds since the run started.
    pub t: f64,
    /// Core index as in /proc/stat (`cpu0` = 0); -1 for the line of all cores.
    pub cpu: i32,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
    pub idle: f64,
}

impl CpuSampleRow {
    /// Busy share, percent: 100 − idle − iowait.
    pub fn busy(&self) -> f64 {
        (100.0 - self.idle - self.iowait).clamp(0.0, 100.0)
    }
}

/// One port's counter deltas over one sample (from /sys/class/net/IF/statistics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PortSampleRow {
    /// End of the sample, seconds since the run started.
    pub t: f64,
    pub ifname: String,
    /// Length of the sample, seconds.
    pub seconds: f64,
    /// Counter deltas (bytes, packets, errors, drops) over the sample.
    pub rx_bytes: i64,
    pub tx_bytes: i64,
    pub rx_packets: i64,
    pub tx_packets: i64,
    pub rx_errors: i64,
    pub tx_errors: i64,
    pub rx_dropped: i64,
    pub tx_dropped: i64,
    /// Link speed, Mbit/s, when the driver reports one (veth does not).
    pub speed_mbps: Option<i64>,
    /// MTU, bytes.
    pub mtu: Option<i64>,
}

impl PortSampleRow {
    /// Receive rate over the sample, bits/s.
    pub fn rx_bps(&self) -> f64 {
        rate(self.rx_bytes as f64 * 8.0, self.seconds)
    }
    /// Transmit rate over the sample, bits/s.
    pub fn tx_bps(&self) -> f64 {
        rate(self.tx_bytes as f64 * 8.0, self.seconds)
    }
    /// Received packets per second.
    pub fn rx_pps(&self) -> f64 {
        rate(self.rx_packets as f64, self.seconds)
    }
    /// Transmitted packets per second.
    pub fn tx_pps(&self) -> f64 {
        rate(self.tx_packets as f64, self.seconds)
    }
}

fn rate(v: f64, s: f64) -> f64 {
    if s > 0.0 {
        v / s
    } else {
        0.0
    }
}

/// Board-wide figures of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct SysSampleRow {
    /// End of the sample, seconds since the run started.
    pub t: f64,
    /// Entries in the conntrack table (`nf_conntrack_count`), when the module is loaded.
    pub conntrack: Option<i64>,
}

impl Store {
    /// Store one monitor sample for a run: CPU lines, port deltas and board figures.
    pub fn add_samples(
        &self,
        run_id: i64,
        cpus: &[CpuSampleRow],
        ports: &[PortSampleRow],
        sys: Option<&SysSampleRow>,
    ) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO cpu_samples (run_id, t, cpu, user, system, iowait, irq, softirq, steal, idle)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for s in cpus {
                st.execute(params![
                    run_id, s.t, s.cpu, s.user, s.system, s.iowait, s.irq, s.softirq, s.steal,
                    s.idle
                ])?;
            }
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO port_samples (run_id, t, ifname, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, rx_errors, tx_errors, rx_dropped, tx_dropped, speed_mbps, mtu)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )?;
            for p in ports {
                st.execute(params![
                    run_id,
                    p.t,
                    p.ifname,
                    p.seconds,
                    p.rx_bytes,
                    p.tx_bytes,
                    p.rx_packets,
                    p.tx_packets,
                    p.rx_errors,
                    p.tx_errors,
                    p.rx_dropped,
                    p.tx_dropped,
                    p.speed_mbps,
                    p.mtu
                ])?;
            }
            if let Some(s) = sys {
                tx.execute(
                    "INSERT OR REPLACE INTO sys_samples (run_id, t, conntrack) VALUES (?1, ?2, ?3)",
                    params![run_id, s.t, s.conntrack],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// A run's CPU samples, by time then core (-1, the all-cores line, first).
    pub fn cpu_samples(&self, run_id: i64) -> Result<Vec<CpuSampleRow>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT t, cpu, user, system, iowait, irq, softirq, steal, idle FROM cpu_samples WHERE run_id=?1 ORDER BY t, cpu",
        )?;
        let rows = st.query_map(params![run_id], |r| {
            Ok(CpuSampleRow {
                t: r.get(0)?,
                cpu: r.get(1)?,
                user: r.get(2)?,
                system: r.get(3)?,
                iowait: r.get(4)?,
                irq: r.get(5)?,
                softirq: r.get(6)?,
                steal: r.get(7)?,
                idle: r.get(8)?,
            })
        })?;
        Ok(super::readable("samples", rows)?)
    }

    /// A run's port samples, by time then port name.
    pub fn port_samples(&self, run_id: i64) -> Result<Vec<PortSampleRow>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT t, ifname, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, rx_errors, tx_errors, rx_dropped, tx_dropped, speed_mbps, mtu
             FROM port_samples WHERE run_id=?1 ORDER BY t, ifname",
        )?;
        let rows = st.query_map(params![run_id], |r| {
            Ok(PortSampleRow {
                t: r.get(0)?,
                ifname: r.get(1)?,
                seconds: r.get(2)?,
                rx_bytes: r.get(3)?,
                tx_bytes: r.get(4)?,
                rx_packets: r.get(5)?,
                tx_packets: r.get(6)?,
                rx_errors: r.get(7)?,
                tx_errors: r.get(8)?,
                rx_dropped: r.get(9)?,
                tx_dropped: r.get(10)?,
                speed_mbps: r.get(11)?,
                mtu: r.get(12)?,
            })
        })?;
        Ok(super::readable("samples", rows)?)
    }

    /// A run's board-wide samples, by time.
    pub fn sys_samples(&self, run_id: i64) -> Result<Vec<SysSampleRow>> {
        let c = self.r();
        let mut st =
            c.prepare("SELECT t, conntrack FROM sys_samples WHERE run_id=?1 ORDER BY t")?;
        let rows = st.query_map(params![run_id], |r| {
            Ok(SysSampleRow {
                t: r.get(0)?,
                conntrack: r.get(1)?,
            })
        })?;
        Ok(super::readable("samples", rows)?)
    }

    /// Close a run that has no iperf3 report: status, figures, kind-specific summary (JSON
    /// object, kept as is) and error text.
    pub fn finish_run_with(
        &self,
        id: i64,
        status: RunStatus,
        f: &RunFigures,
        summary: Option<&serde_json::Value>,
        error: Option<&str>,
        ended_at: i64,
    ) -> Result<()> {
        let summary = match summary {
            Some(v) => Some(serde_json::to_string(v)?),
            None => None,
        };
        self.c().execute(
            "UPDATE runs SET status=?2, ended_at=?3, error=?4, sender_bps=?5, receiver_bps=?6, bytes=?7, retransmits=?8,
                 lost_packets=?9, total_packets=?10, lost_percent=?11, jitter_ms=?12, summary_json=COALESCE(?13, summary_json) WHERE id=?1",
            params![id, status.as_str(), ended_at, error, f.sender_bps, f.receiver_bps, f.bytes, f.retransmits,
                f.lost_packets, f.total_packets, f.lost_percent, f.jitter_ms, summary],
        )?;
        Ok(())
    }

    /// Replace a run's kind-specific summary (e.g. the verdict computed at its end).
    pub fn set_run_summary(&self, id: i64, summary: &serde_json::Value) -> Result<()> {
        self.c().execute(
            "UPDATE runs SET summary_json=?2 WHERE id=?1",
            params![id, serde_json::to_string(summary)?],
        )?;
        Ok(())
    }

    /// The legs of a multi-port run, in order.
    pub fn children(&self, parent_id: i64) -> Result<Vec<RunRow>> {
        let c = self.r();
        let mut st = c.prepare(&format!(
            "SELECT {RUN_COLS} FROM runs WHERE parent_id=?1 ORDER BY id"
        ))?;
        let rows = st.query_map(params![parent_id], run_from_row)?;
        Ok(super::readable("samples", rows)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunProtocol, RunRole};
    use crate::store::NewRun;

    #[test]
    fn samples_round_trip_and_cascade() {
        let dir = tempfile_dir();
        let s = Store::open_dir(&dir).unwrap();
        let parent = s
            .create_run(&NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                kind: crate::model::RunKind::Multi,
                ..Default::default()
            })
            .unwrap();
        let leg = s
            .create_run(&NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                parent_id: Some(parent),
                ..Default::default()
            })
            .unwrap();
        let cpu = CpuSampleRow {
            t: 1.0,
            cpu: 0,
            user: 10.0,
            system: 20.0,
            softirq: 45.0,
            idle: 25.0,
            ..Default::default()
        };
        let port = PortSampleRow {
            t: 1.0,
            ifname: "eth0".into(),
            seconds: 0.5,
            rx_bytes: 1_000_000,
            tx_packets: 100,
            ..Default::default()
        };
        s.add_samples(
            parent,
            &[cpu],
            std::slice::from_ref(&port),
            Some(&SysSampleRow {
                t: 1.0,
                conntrack: Some(7),
            }),
        )
        .unwrap();
        assert_eq!(s.cpu_samples(parent).unwrap(), vec![cpu]);
        assert_eq!(cpu.busy(), 75.0);
        let ps = s.port_samples(parent).unwrap();
        assert_eq!(ps, vec![port]);
        assert_eq!(ps[0].rx_bps(), 16_000_000.0);
        assert_eq!(ps[0].tx_pps(), 200.0);
        assert_eq!(s.sys_samples(parent).unwrap()[0].conntrack, Some(7));
        let kids = s.children(parent).unwrap();
        assert_eq!(kids.len(), 1);
        assert_eq!(kids[0].id, leg);
        assert_eq!(kids[0].kind, crate::model::RunKind::Iperf3);
        assert_eq!(
            s.get_run(parent).unwrap().unwrap().kind,
            crate::model::RunKind::Multi
        );
        s.finish_run_with(
            parent,
            RunStatus::Completed,
            &RunFigures {
                receiver_bps: Some(9.5e8),
                bytes: Some(42),
                ..Default::default()
            },
            Some(&serde_json::json!({"legs": 1})),
            None,
            1_700_000_000_000,
        )
        .unwrap();
        let r = s.get_run(parent).unwrap().unwrap();
        assert_eq!(r.status, RunStatus::Completed);
        assert_eq!(r.ended_at, Some(1_700_000_000_000));
        assert_eq!(r.receiver_bps, Some(9.5e8));
        assert_eq!(r.summary["legs"], 1);
        assert!(s.delete_run(parent).unwrap());
        assert!(s.get_run(leg).unwrap().is_none(), "legs go with their run");
        assert!(s.cpu_samples(parent).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = crate::scratch::dir("samples");
        let _ = std::fs::remove_dir_all(&d);
        d
    }
}
