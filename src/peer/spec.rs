//! The test a board asks a peer agent to run: iperf3's client options as JSON, validated with
//! the same rules as the board's own "new test" form (`TestSpec::to_client_spec`).

use crate::engine::iperf3::client::ClientSpec;
use crate::spec::test::{TestDirection, TestSpec};
use serde::{Deserialize, Serialize};

/// One iperf3 client test, as `POST /peer/v1/run` takes it. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerTestSpec {
    /// Server to test to (`iperf3 -c HOST`): a host name or IP address.
    pub host: String,
    /// Server port (`-p`), default 5201.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Duration, seconds (`-t`), default 10, at most 86400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    /// Parallel streams (`-P`), default 1, at most 128.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u32>,
    /// The server sends (`-R`).
    #[serde(default)]
    pub reverse: bool,
    /// Both directions at once (`--bidir`).
    #[serde(default)]
    pub bidir: bool,
    /// UDP instead of TCP (`-u`).
    #[serde(default)]
    pub udp: bool,
    /// Target bitrate per stream, bits/s (`-b`); absent = unlimited for TCP, 1 Mbit/s (iperf3's
    /// default) for UDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// TCP block or UDP datagram size, bytes (`-l`); absent = iperf3's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u32>,
    /// Latency probes beside the test's traffic (RFC 2544 latency): UDP echo requests to the
    /// test's host. Absent = none (an older agent refuses the field by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeRequest>,
    /// Burst mode (RFC 2544 back-to-back): send this many datagrams at the rate, then nothing
    /// until the duration ends (UDP, the agent sending only). Absent = a normal test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// Latency probes a peer test runs beside its traffic: one UDP echo request (netperfd's echo,
/// `crate::engine::echo`, 40-byte payload) to the test's host on `port` every `interval_ms`,
/// from [`PROBE_IDLE`] before the traffic starts to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeRequest {
    /// The host's UDP echo port (netperfd's default 5291).
    pub port: u16,
    /// Time between two requests, ms (1..=1000).
    pub interval_ms: u32,
}

/// How long the probes run before the test's traffic starts (the idle baseline).
pub(crate) const PROBE_IDLE: std::time::Duration = std::time::Duration::from_millis(500);

/// Delays of a set of probes, ms: nearest-rank percentiles of the round trip without the far
/// end's turnaround ((T4 − T1) − (T3 − T2), no clock synchronisation needed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Delays {
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Number of probes.
    pub n: usize,
}

impl Delays {
    /// Of `v`, ms, any order; `None` when empty.
    pub fn of(v: &[f64]) -> Option<Delays> {
        let s = crate::model::stats::sorted_finite(v);
        Some(Delays {
            min: *s.first()?,
            p50: crate::model::stats::percentile(&s, 50.0)?,
            p99: crate::model::stats::percentile(&s, 99.0)?,
            max: *s.last()?,
            n: s.len(),
        })
    }
}

/// What a test's latency probes measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Requests sent.
    pub sent: u64,
    /// Requests answered.
    pub answered: u64,
    /// No reply came within the first second: the host has no UDP echo on the port (stock
    /// iperf3 has none; netperfd's daemon and `netperfd peer` answer).
    pub gave_up: bool,
    /// Round trips of the probes sent before the traffic started.
    pub idle: Option<Delays>,
    /// Round trips of the probes sent while the traffic ran, leaving out its first quarter
    /// (at most 1 s: connection setup and the pacer's start).
    pub loaded: Option<Delays>,
}

impl ProbeSummary {
    /// Summarise `stats` of probes that started [`PROBE_IDLE`] before a test of `time_s` s.
    pub fn of(stats: &crate::engine::echo::EchoStats, time_s: f64) -> ProbeSummary {
        let idle_end = PROBE_IDLE.as_secs_f64();
        let from = idle_end + (time_s / 4.0).min(1.0);
        let to = idle_end + time_s;
        let pick = |lo: f64, hi: f64| -> Vec<f64> {
            stats
                .samples
                .iter()
                .filter(|s| s.t >= lo && s.t < hi)
                .map(|s| s.rtt_ms)
                .collect()
        };
        ProbeSummary {
            sent: stats.sent,
            answered: stats.samples.len() as u64,
            gave_up: stats.gave_up,
            idle: Delays::of(&pick(0.0, idle_end)),
            loaded: Delays::of(&pick(from, to)),
        }
    }
}

impl PeerTestSpec {
    /// The direction from the agent's (the test client's) view: send, receive, bidir.
    pub fn run_direction(&self) -> crate::model::RunDirection {
        use crate::model::RunDirection;
        if self.bidir {
            RunDirection::Bidir
        } else if self.reverse {
            RunDirection::Receive
        } else {
            RunDirection::Send
        }
    }

    /// The test it asks for, typed, with the board form's rules still to check
    /// ([`TestSpec::to_client_spec`]).
    pub fn test(&self) -> TestSpec {
        TestSpec {
            port: self.port,
            udp: self.udp,
            length: self.length.map(u64::from),
            duration: self.time.map(u64::from),
            parallel: self.parallel.map(u64::from),
            direction: if self.bidir {
                TestDirection::Bidir
            } else if self.reverse {
                TestDirection::Receive
            } else {
                TestDirection::Send
            },
            bitrate: self.bitrate,
            ..TestSpec::new(self.host.clone())
        }
    }

    /// The agent's spec for `t`, an iperf3 test (its iperf3-only settings other than these
    /// and the board port are not sent: the agent runs with its own defaults).
    pub fn of_test(t: &TestSpec) -> PeerTestSpec {
        PeerTestSpec {
            host: t.host.clone(),
            port: t.port,
            time: t.duration.map(|d| d.min(u32::MAX as u64) as u32),
            parallel: t.parallel.map(|p| p.min(u32::MAX as u64) as u32),
            reverse: t.direction == TestDirection::Receive,
            bidir: t.direction == TestDirection::Bidir,
            udp: t.udp,
            bitrate: t.bitrate,
            length: t.length.map(|l| l.min(u32::MAX as u64) as u32),
            probe: None,
            burst: None,
        }
    }

    /// Validate into a client spec. Errors name the field.
    pub fn to_client_spec(&self) -> Result<ClientSpec, String> {
        if self.reverse && self.bidir {
            return Err("reverse and bidir exclude each other".into());
        }
        if let Some(p) = &self.probe {
            if p.port == 0 || !(1..=1000).contains(&p.interval_ms) {
                return Err(format!(
                    "probe: port {} / interval {} ms out of range (1..65535, 1..1000 ms)",
                    p.port, p.interval_ms
                ));
            }
        }
        let mut cs = self.test().to_client_spec(&[])?;
        cs.burst = self.burst;
        cs.validate()?;
        Ok(cs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::iperf3::wire::{Direction, Protocol};

    #[test]
    fn the_agent_spec_and_the_board_form_give_one_test() {
        // The same test typed into the board's form and sent to an agent as JSON.
        let form = crate::spec::test::TestRequest {
            host: "198.51.100.2".into(),
            protocol: Some("udp".into()),
            length: Some("1200".into()),
            port: Some("5202".into()),
            duration: Some("3".into()),
            parallel: Some("2".into()),
            direction: Some("bidir".into()),
            bitrate: Some("50M".into()),
            ..Default::default()
        };
        let agent: PeerTestSpec = serde_json::from_str(
            r#"{"host":"198.51.100.2","port":5202,"time":3,"parallel":2,"bidir":true,"udp":true,"bitrate":50000000,"length":1200}"#,
        )
        .unwrap();
        assert_eq!(form.parse().unwrap(), agent.test());
        let (a, b) = (form.to_spec(&[]).unwrap(), agent.to_client_spec().unwrap());
        assert_eq!((a.host, a.port), (b.host, b.port));
        assert_eq!(a.params, b.params);
        assert_eq!(PeerTestSpec::of_test(&agent.test()), agent);
        // Out-of-range values get the form's messages.
        let bad = |s: PeerTestSpec, want: &str| {
            let e = s.to_client_spec().unwrap_err();
            assert!(e.contains(want), "{e} should say {want}");
        };
        let base = || PeerTestSpec {
            host: "pc2".into(),
            ..Default::default()
        };
        bad(
            PeerTestSpec {
                time: Some(0),
                ..base()
            },
            "duration must be 1..86400, got 0",
        );
        bad(
            PeerTestSpec {
                port: Some(0),
                ..base()
            },
            "port must be 1..65535, got 0",
        );
        bad(
            PeerTestSpec {
                parallel: Some(200),
                ..base()
            },
            "parallel streams must be 1..128, got 200",
        );
        bad(
            PeerTestSpec {
                udp: true,
                length: Some(8),
                ..base()
            },
            "length must be 16..65527 bytes, got 8",
        );
        bad(
            PeerTestSpec {
                bitrate: Some(200_000_000_000),
                ..base()
            },
            "above the maximum of 100G",
        );
        bad(
            PeerTestSpec {
                host: "a b".into(),
                ..base()
            },
            "peer 'a b' is not a host name",
        );
    }

    #[test]
    fn a_spec_becomes_iperf3_parameters() {
        let s: PeerTestSpec = serde_json::from_str(
            r#"{"host":"198.51.100.2","port":5202,"time":3,"parallel":2,"reverse":true,"udp":true,"bitrate":50000000,"length":1200}"#,
        )
        .unwrap();
        let c = s.to_client_spec().unwrap();
        assert_eq!(c.host, "198.51.100.2");
        assert_eq!(c.port, 5202);
        assert_eq!(c.params.time, 3);
        assert_eq!(c.params.parallel, 2);
        assert_eq!(c.params.direction, Direction::Receive);
        assert_eq!(c.params.protocol, Protocol::Udp);
        assert_eq!(c.params.bandwidth, 50_000_000);
        assert_eq!(c.params.len, 1200);
        let d = PeerTestSpec {
            host: "pc2".into(),
            ..Default::default()
        }
        .to_client_spec()
        .unwrap();
        assert_eq!((d.port, d.params.time), (5201, 10));
        assert_eq!(d.params.direction, Direction::Send);
        assert_eq!(d.burst, None);
        // A burst stays on the agent's side: the parameters the server sees have no -k.
        let b: PeerTestSpec = serde_json::from_str(
            r#"{"host":"pc2","time":3,"udp":true,"bitrate":1000000000,"length":1472,"burst":108}"#,
        )
        .unwrap();
        let c = b.to_client_spec().unwrap();
        assert_eq!(
            (c.burst, c.params.blockcount, c.params.time),
            (Some(108), 0, 3)
        );
    }

    /// The idle window is the first 0.5 s; the loaded one leaves out the traffic's first
    /// quarter (at most 1 s) and ends with it.
    #[test]
    fn probe_summary_splits_idle_and_loaded() {
        use crate::engine::echo::{EchoSample, EchoStats};
        let at = |t: f64, rtt_ms: f64| EchoSample {
            seq: 0,
            t,
            up_ns: 0,
            down_ns: 0,
            rtt_ms,
        };
        let stats = EchoStats {
            port: 5291,
            sent: 9,
            samples: vec![
                at(0.0, 0.2),
                at(0.4, 0.1),
                at(0.6, 50.0), // setup: left out
                at(1.0, 8.0),  // 2 s test: loaded from 0.5 + 0.5 s
                at(1.5, 10.0),
                at(2.4, 12.0),
                at(2.6, 0.3), // after the traffic
            ],
            gave_up: false,
            stray: 0,
        };
        let s = ProbeSummary::of(&stats, 2.0);
        assert_eq!((s.sent, s.answered), (9, 7));
        let idle = s.idle.unwrap();
        assert_eq!((idle.min, idle.max, idle.n), (0.1, 0.2, 2));
        let l = s.loaded.unwrap();
        assert_eq!((l.min, l.p50, l.max, l.n), (8.0, 10.0, 12.0, 3));
        let bad = PeerTestSpec {
            host: "pc2".into(),
            probe: Some(ProbeRequest {
                port: 5291,
                interval_ms: 0,
            }),
            ..Default::default()
        };
        assert!(bad.to_client_spec().unwrap_err().contains("probe"));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let bad = |s: PeerTestSpec, want: &str| {
            let e = s.to_client_spec().unwrap_err();
            assert!(e.contains(want), "{e} should mention {want}");
        };
        let base = PeerTestSpec {
            host: "198.51.100.2".into(),
            ..Default::default()
        };
        bad(
            PeerTestSpec {
                host: "-c /etc/passwd".into(),
                ..base.clone()
            },
            "not a host",
        );
        bad(
            PeerTestSpec {
                time: Some(0),
                ..base.clone()
            },
            "duration",
        );
        bad(
            PeerTestSpec {
                parallel: Some(500),
                ..base.clone()
            },
            "parallel",
        );
        bad(
            PeerTestSpec {
                port: Some(0),
                ..base.clone()
            },
            "port",
        );
        bad(
            PeerTestSpec {
                reverse: true,
                bidir: true,
                ..base.clone()
            },
            "exclude",
        );
        let udp = PeerTestSpec {
            udp: true,
            burst: Some(100),
            ..base.clone()
        };
        for s in [
            PeerTestSpec {
                udp: false,
                ..udp.clone()
            },
            PeerTestSpec {
                reverse: true,
                ..udp.clone()
            },
            PeerTestSpec {
                bidir: true,
                ..udp.clone()
            },
            PeerTestSpec {
                burst: Some(0),
                ..udp.clone()
            },
        ] {
            bad(s, "a burst needs a UDP test");
        }
        assert!(udp.to_client_spec().is_ok());
        bad(
            PeerTestSpec {
                udp: true,
                length: Some(70000),
                ..base.clone()
            },
            "length",
        );
        assert!(serde_json::from_str::<PeerTestSpec>(r#"{"host":"h","shell":"rm"}"#).is_err());
    }
}
