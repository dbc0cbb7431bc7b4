//! The test a board asks a peer agent to run: iperf3's client options as JSON, validated with
//! the same rules as the board's own "new test" form (`TestRequest::to_spec`).

use crate::engine::iperf3::client::ClientSpec;
use crate::spec::test::TestRequest;
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
}

impl PeerTestSpec {
    /// The direction as a word from the agent's (the test client's) view: send, receive, bidir.
    pub fn direction_word(&self) -> &'static str {
        if self.bidir {
            "bidir"
        } else if self.reverse {
            "receive"
        } else {
            "send"
        }
    }

    /// Validate into a client spec. Errors name the field.
    pub fn to_client_spec(&self) -> Result<ClientSpec, String> {
        if self.reverse && self.bidir {
            return Err("reverse and bidir exclude each other".into());
        }
        let tr = TestRequest {
            host: self.host.clone(),
            protocol: Some(if self.udp { "udp" } else { "tcp" }.into()),
            length: self.length.map(|l| l.to_string()),
            port: self.port.map(|p| p.to_string()),
            duration: self.time.map(|t| t.to_string()),
            parallel: self.parallel.map(|p| p.to_string()),
            direction: Some(self.direction_word().into()),
            bitrate: self.bitrate.map(|b| b.to_string()),
            ..Default::default()
        };
        tr.to_spec(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::iperf3::wire::{Direction, Protocol};

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
