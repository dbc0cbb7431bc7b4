//! The server's end of a byte- or block-limited TCP test (`-n` / `-k`): after TEST_END it keeps
//! reading its receiving streams until what the client sent has arrived, so the receiver's
//! totals cover the bytes still in flight (socket buffers, a queue on the path) when the client
//! sent TEST_END — a stock client sends it as soon as it has *written* its total. Stock iperf3
//! servers stop counting at TEST_END and report less than the client sent.
//! `docs/iperf3-wire.md` §8.4.
//! Not for: UDP and time-limited (`-t`) tests, `-R` (the server sends) — counting ends at
//! TEST_END there, as before; the client side (a receiving client ends on its own count).

use crate::engine::iperf3::wire::{Params, Protocol, Results};
use crate::engine::session::DataPhase;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A drain ends after this long without a byte on any receiving stream.
pub(crate) const QUIET: Duration = Duration::from_millis(250);
/// The whole drain, counted from TEST_END, never takes longer than this.
pub(crate) const BOUND: Duration = Duration::from_secs(2);
/// How often the drain looks at the counters; the stream threads do the reading.
const POLL: Duration = Duration::from_millis(1);

/// Why a drain step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Everything expected has arrived.
    Reached,
    /// No byte for [`QUIET`].
    Quiet,
    /// [`BOUND`] after TEST_END.
    Bound,
    /// Every receiving stream has ended (EOF or a socket error): nothing more can come.
    StreamsClosed,
}

/// The control connection spoke during the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupted {
    /// It closed or failed.
    Closed,
    /// A state byte arrived (after TEST_END the client has nothing to say until
    /// EXCHANGE_RESULTS, so the caller ends the session on it).
    Byte(u8),
}

/// The drain of one test, started when its TEST_END arrived.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drain {
    test_end: Instant,
    total: u64,
    /// [`QUIET`], longer in tests that must not end on a stall of a loaded machine.
    quiet: Duration,
}

impl Drain {
    /// The drain of a test whose TEST_END arrived at `test_end`: `Some` for a TCP test in which
    /// the server receives (client → server streams: normal mode and the client's leg of
    /// `--bidir`) and the client set `-n` (`num`, bytes) or `-k` (`blockcount` × `len`
    /// bytes), over all streams as iperf3 counts them; `None` otherwise.
    pub(super) fn new(params: &Params, test_end: Instant) -> Option<Drain> {
        if params.protocol != Protocol::Tcp || params.client_send_streams() == 0 {
            return None;
        }
        let total = if params.num > 0 {
            params.num
        } else {
            params.blockcount.saturating_mul(params.len as u64)
        };
        (total > 0).then_some(Drain {
            test_end,
            total,
            quiet: QUIET,
        })
    }

    /// The total the client's parameters promise, bytes.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Step 1, before EXCHANGE_RESULTS: wait until the receiving streams together hold the
    /// promised total (after omit), [`QUIET`], [`BOUND`] or every stream ended. A control
    /// connection that closes or speaks interrupts it.
    pub(crate) async fn until_total(
        &self,
        phase: &DataPhase,
        ctrl: &mut TcpStream,
    ) -> Result<Ended, Interrupted> {
        let total = self.total;
        self.wait(phase, Some(ctrl), || phase.received_after_omit() >= total)
            .await
    }

    /// Step 2, after the client's results arrived and before ours go out: the client may have
    /// sent more than the promised total (a stock client writes whole blocks and checks its
    /// count after each round over its streams; `-k 100` sometimes sends 101 blocks), or less
    /// (`--bidir` ends when either leg reaches it). Wait until every receiving stream holds
    /// what the client says it sent on it, within the same [`QUIET`] and [`BOUND`]. Ids that
    /// are not our receiving streams are left to the results merge.
    pub(crate) async fn until_client_counts(&self, phase: &DataPhase, theirs: &Results) -> Ended {
        let want: Vec<(u32, u64)> = theirs
            .streams
            .iter()
            .filter(|r| phase.stream_received_after_omit(r.id).is_some())
            .map(|r| (r.id, r.bytes))
            .collect();
        let done = || {
            want.iter().all(|(id, bytes)| {
                phase
                    .stream_received_after_omit(*id)
                    .is_none_or(|got| got >= *bytes)
            })
        };
        match self.wait(phase, None, done).await {
            Ok(e) => e,
            Err(_) => Ended::StreamsClosed,
        }
    }

    /// Where the receiver's measurement ends: when its last byte arrived, or at TEST_END if
    /// that came later (nothing was left in flight; as a stock server, which ends at TEST_END).
    pub(crate) fn end_time(&self, phase: &DataPhase) -> Instant {
        phase
            .shared
            .last_recv()
            .map_or(self.test_end, |t| t.max(self.test_end))
    }

    async fn wait(
        &self,
        phase: &DataPhase,
        mut ctrl: Option<&mut TcpStream>,
        done: impl Fn() -> bool,
    ) -> Result<Ended, Interrupted> {
        let deadline = self.test_end + BOUND;
        let mut b = [0u8; 1];
        loop {
            if done() {
                return Ok(Ended::Reached);
            }
            if phase
                .streams
                .iter()
                .filter(|s| !s.sender)
                .all(|s| s.thread_done())
            {
                return Ok(Ended::StreamsClosed);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Ended::Bound);
            }
            if now.saturating_duration_since(self.end_time(phase)) >= self.quiet {
                return Ok(Ended::Quiet);
            }
            match ctrl.as_deref_mut() {
                Some(c) => tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    r = c.read(&mut b) => return Err(match r {
                        Ok(0) | Err(_) => Interrupted::Closed,
                        Ok(_) => Interrupted::Byte(b[0]),
                    }),
                },
                None => tokio::time::sleep(POLL).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::iperf3::wire::{Direction, StreamResult};
    use crate::engine::session::DataStream;
    use std::io::Write;

    fn params(num: u64, blockcount: u64, len: u32) -> Params {
        Params {
            time: 0,
            num,
            blockcount,
            len,
            ..Default::default()
        }
    }

    /// A drain that only ends on its total, the bound or a closed stream (a loaded test
    /// machine can stall a writer thread for longer than [`QUIET`]).
    fn patient(p: &Params, test_end: Instant) -> Drain {
        Drain {
            quiet: Duration::from_secs(60),
            ..Drain::new(p, test_end).unwrap()
        }
    }

    #[test]
    fn applies_to_tcp_tests_the_server_receives_with_n_or_k() {
        let t = Instant::now();
        assert_eq!(
            Drain::new(&params(5000, 0, 1000), t).map(|d| d.total()),
            Some(5000)
        );
        assert_eq!(
            Drain::new(&params(0, 7, 1000), t).map(|d| d.total()),
            Some(7000)
        );
        let bidir = Params {
            direction: Direction::Bidir,
            ..params(5000, 0, 1000)
        };
        assert_eq!(Drain::new(&bidir, t).map(|d| d.total()), Some(5000));
        // -t, -R and UDP: unchanged.
        assert!(Drain::new(&params(0, 0, 1000), t).is_none());
        let reverse = Params {
            direction: Direction::Receive,
            ..params(5000, 0, 1000)
        };
        assert!(Drain::new(&reverse, t).is_none());
        let udp = Params {
            protocol: Protocol::Udp,
            ..params(5000, 0, 1000)
        };
        assert!(Drain::new(&udp, t).is_none());
    }

    /// A server-side phase with one receiving stream on loopback, started; the client's end
    /// of the connection and a control connection pair (server end, client end).
    async fn setup(p: Params) -> (DataPhase, std::net::TcpStream, TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        let ds = DataStream::new(1, false, server).unwrap();
        let mut phase = DataPhase::new(p, vec![ds], 1.0);
        phase.start(false).unwrap();
        let cl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cc = TcpStream::connect(cl.local_addr().unwrap()).await.unwrap();
        let (cs, _) = cl.accept().await.unwrap();
        (phase, client, cs, cc)
    }

    /// Write `chunks` blocks of `len` bytes, one every `gap`.
    fn trickle(mut s: std::net::TcpStream, chunks: usize, len: usize, gap: Duration) {
        std::thread::spawn(move || {
            let b = vec![7u8; len];
            for _ in 0..chunks {
                std::thread::sleep(gap);
                if s.write_all(&b).is_err() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_secs(5));
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_to_the_total_and_ends_at_the_last_byte() {
        let (mut phase, client, mut ctrl, _cc) = setup(params(20_000, 0, 1000)).await;
        let d = patient(&phase.params, Instant::now());
        // 20 blocks of 1000 bytes, 20 ms apart: all of them arrive after "TEST_END".
        trickle(client, 20, 1000, Duration::from_millis(20));
        assert_eq!(d.until_total(&phase, &mut ctrl).await, Ok(Ended::Reached));
        assert_eq!(phase.received_after_omit(), 20_000);
        let end = d.end_time(&phase);
        assert!(end > d.test_end, "the last byte came after TEST_END");
        phase.finish_at(end).await;
        let sum = &phase.local_summaries()[0];
        let got = sum.receiver.unwrap();
        assert_eq!(got.bytes, 20_000);
        // The measurement ends at the last byte: its duration is the phase start to then.
        let want = end.duration_since(phase.started).as_secs_f64();
        assert!(
            (got.seconds - want).abs() < 1e-9,
            "{} vs {want}",
            got.seconds
        );
        phase.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_stops_short_ends_the_drain_after_the_quiet_time() {
        let (mut phase, client, mut ctrl, _cc) = setup(params(20_000, 0, 1000)).await;
        let d = Drain::new(&phase.params, Instant::now()).unwrap();
        trickle(client, 5, 1000, Duration::from_millis(10));
        assert_eq!(d.until_total(&phase, &mut ctrl).await, Ok(Ended::Quiet));
        assert_eq!(phase.received_after_omit(), 5000);
        // Quiet is counted from the last byte.
        let last = phase.shared.last_recv().unwrap();
        assert!(last.elapsed() >= QUIET);
        phase.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_trickling_client_is_cut_off_at_the_bound() {
        let (mut phase, client, mut ctrl, _cc) = setup(params(1_000_000, 0, 1000)).await;
        let t0 = Instant::now();
        let d = patient(&phase.params, t0);
        // One byte every 100 ms: never quiet, never done.
        trickle(client, 100, 1, Duration::from_millis(100));
        assert_eq!(d.until_total(&phase, &mut ctrl).await, Ok(Ended::Bound));
        assert!(t0.elapsed() >= BOUND);
        let got = phase.received_after_omit();
        assert!((1..=30).contains(&got), "{got} bytes in 2 s");
        phase.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_control_connection_interrupts_the_drain() {
        let (mut phase, client, mut ctrl, cc) = setup(params(1_000_000, 0, 1000)).await;
        let d = patient(&phase.params, Instant::now());
        trickle(client, 100, 1, Duration::from_millis(10));
        drop(cc);
        assert_eq!(
            d.until_total(&phase, &mut ctrl).await,
            Err(Interrupted::Closed)
        );
        phase.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_data_stream_ends_the_drain() {
        let (mut phase, client, mut ctrl, _cc) = setup(params(1_000_000, 0, 1000)).await;
        let d = patient(&phase.params, Instant::now());
        drop(client);
        assert_eq!(
            d.until_total(&phase, &mut ctrl).await,
            Ok(Ended::StreamsClosed)
        );
        phase.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn step_two_reads_what_the_client_sent_beyond_the_total() {
        // -k 10 of 1000 bytes, but the client wrote 11 blocks (as stock sometimes does).
        let (mut phase, client, mut ctrl, _cc) = setup(params(0, 10, 1000)).await;
        let d = patient(&phase.params, Instant::now());
        trickle(client, 11, 1000, Duration::from_millis(15));
        assert_eq!(d.until_total(&phase, &mut ctrl).await, Ok(Ended::Reached));
        let theirs = Results {
            streams: vec![StreamResult {
                id: 1,
                bytes: 11_000,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(d.until_client_counts(&phase, &theirs).await, Ended::Reached);
        assert_eq!(phase.received_after_omit(), 11_000);
        // An id that is not one of our receiving streams is not waited for.
        let stray = Results {
            streams: vec![StreamResult {
                id: 9,
                bytes: 1 << 40,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(d.until_client_counts(&phase, &stray).await, Ended::Reached);
        phase.stop();
    }
}
