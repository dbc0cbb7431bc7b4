//! The iperf3 control connection as two sans-IO state machines: [`ServerControl`] for our
//! server's session and [`ClientControl`] for our client's run.
//!
//! A machine does no I/O and keeps no clock. Its owner reads a state byte or a JSON frame,
//! hands it to the machine, and writes what the machine answers; the machine knows which
//! message may come next in each [`Phase`] and turns everything else into a
//! [`ControlError`] with a kind, so callers act on the kind and never on a message's words.
//!
//! One test, as a stock iperf3 client and server speak it (docs/iperf3-wire.md §2, §3 and §10):
//!
//! | phase | client → server | server → client |
//! |---|---|---|
//! | [`Phase::Cookie`] | 37-byte cookie | PARAM_EXCHANGE (9) |
//! | [`Phase::ParamExchange`] | parameters (JSON) | CREATE_STREAMS (10) |
//! | [`Phase::CreateStreams`] | data connections (TCP: the cookie; UDP: a hello) | TEST_START (1), TEST_RUNNING (2) |
//! | [`Phase::Running`] | TEST_END (4) | — |
//! | [`Phase::TestEnd`] | — (the server may drain a `-n`/`-k` test) | EXCHANGE_RESULTS (13) |
//! | [`Phase::ExchangeResults`] | its results (JSON) | its results (JSON), DISPLAY_RESULTS (14) |
//! | [`Phase::DisplayResults`] | IPERF_DONE (16) | — |
//!
//! At any point the server may say ACCESS_DENIED (−1), SERVER_ERROR (−2, then two 32-bit
//! big-endian integers: the iperf3 error code and errno) or SERVER_TERMINATE (11), and the
//! client CLIENT_TERMINATE (12). The 13 control traces captured from stock iperf3 3.12 (in
//! `tests/vectors/iperf3-3.12/`) are replayed against both machines in this module's tests.

use super::wire::{ierr, ierr_text, State};

/// Where one test's control flow stands; both ends pass through the same phases in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Server: waiting for the 37-byte cookie. Client: cookie sent, PARAM_EXCHANGE next.
    Cookie,
    /// PARAM_EXCHANGE said: the client's parameters (JSON), then CREATE_STREAMS.
    ParamExchange,
    /// CREATE_STREAMS said: the data connections, then TEST_START and TEST_RUNNING.
    CreateStreams,
    /// Client only: TEST_START came (the `-t` and `-O` timers start), TEST_RUNNING next.
    TestStart,
    /// TEST_RUNNING said: data flows until the client says TEST_END.
    Running,
    /// TEST_END said: EXCHANGE_RESULTS next (after the server's drain of a `-n`/`-k` test).
    TestEnd,
    /// EXCHANGE_RESULTS said: the client's results (JSON), then the server's.
    ExchangeResults,
    /// The server's results sent: DISPLAY_RESULTS, then the client's IPERF_DONE.
    DisplayResults,
    /// IPERF_DONE: the test is over.
    Done,
    /// Ended early; the [`ControlError`] that ended it was returned at the time.
    Failed,
}

/// The code and errno after a SERVER_ERROR byte (two 32-bit big-endian integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerErrorCode {
    /// iperf3's error number (`i_errno`, e.g. 109 IESTREAMCONNECT).
    pub code: i32,
    /// The server's `errno` at the time, 0 when none.
    pub errno: i32,
}

/// Why a test's control flow ended before IPERF_DONE. The kind is what callers act on;
/// [`ControlError::text`] gives iperf3's own wording for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlError {
    /// ACCESS_DENIED (−1): the server is busy with another test, or refused this one's set-up.
    AccessDenied,
    /// SERVER_ERROR (−2). `None` until the owner has read the 8 bytes that follow it
    /// ([`ControlError::with_code`]).
    ServerError(Option<ServerErrorCode>),
    /// SERVER_TERMINATE (11): the server was stopped.
    ServerTerminate,
    /// CLIENT_TERMINATE (12): the client was stopped.
    ClientTerminate,
    /// An iperf3 state that does not belong in this phase.
    OutOfOrder {
        /// The phase the machine was in.
        phase: Phase,
        /// The byte that came.
        byte: u8,
    },
    /// A byte that is no iperf3 state at all (an iperf 2 server answers a cookie this way).
    NotAState(u8),
}

impl ControlError {
    /// The error for a byte that is an iperf3 state everywhere (−1, −2, 11, 12), or `None`.
    fn anywhere(b: u8) -> Option<ControlError> {
        Some(match State::from_byte(b)? {
            State::AccessDenied => ControlError::AccessDenied,
            State::ServerError => ControlError::ServerError(None),
            State::ServerTerminate => ControlError::ServerTerminate,
            State::ClientTerminate => ControlError::ClientTerminate,
            _ => return None,
        })
    }

    /// A SERVER_ERROR with the code and errno read after it; other errors unchanged.
    pub(crate) fn with_code(self, code: i32, errno: i32) -> ControlError {
        match self {
            ControlError::ServerError(_) => {
                ControlError::ServerError(Some(ServerErrorCode { code, errno }))
            }
            e => e,
        }
    }

    /// The offending byte of [`ControlError::OutOfOrder`] and [`ControlError::NotAState`].
    #[cfg(test)]
    pub(crate) fn byte(&self) -> Option<u8> {
        match self {
            ControlError::OutOfOrder { byte, .. } | ControlError::NotAState(byte) => Some(*byte),
            _ => None,
        }
    }

    /// iperf3's words for it (`iperf_strerror`), e.g. "the server is busy running a test.
    /// try again later"; a protocol error names the byte ("… (got byte 0x10)").
    pub(crate) fn text(&self) -> String {
        match self {
            ControlError::AccessDenied => ierr_text(ierr::IEACCESSDENIED),
            ControlError::ServerError(None) => ierr_text(ierr::IEMESSAGE),
            ControlError::ServerError(Some(c)) => {
                let msg = ierr_text(c.code);
                if c.errno != 0 {
                    format!("{msg}: {}", std::io::Error::from_raw_os_error(c.errno))
                } else {
                    msg
                }
            }
            ControlError::ServerTerminate => ierr_text(ierr::IESERVERTERM),
            ControlError::ClientTerminate => ierr_text(ierr::IECLIENTTERM),
            ControlError::OutOfOrder { byte, .. } | ControlError::NotAState(byte) => {
                format!("{} (got byte 0x{byte:02x})", ierr_text(ierr::IEMESSAGE))
            }
        }
    }
}

/// What the client does on a state byte from the server ([`ClientControl::on_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientStep {
    /// PARAM_EXCHANGE: send the parameters (JSON).
    SendParams,
    /// CREATE_STREAMS: connect the data streams.
    ConnectStreams,
    /// TEST_START: start the `-t`/`-O` timers (a stock client's `create_client_timers`).
    StartTimers,
    /// TEST_RUNNING: start the data.
    StartData,
    /// EXCHANGE_RESULTS: send our results (JSON), then read the server's.
    SendResults,
    /// DISPLAY_RESULTS: show the results and say IPERF_DONE; the test is over.
    SendIperfDone,
}

/// What `refuse` says of byte `b`, which came where none is expected: the machine's own
/// error (`taken`, what it made of the byte in phase `before`), or, when that phase would have
/// taken it, out of order all the same; `phase` is then [`Phase::Failed`].
fn refusal(
    phase: &mut Phase,
    before: Phase,
    taken: Result<(), ControlError>,
    b: u8,
) -> ControlError {
    taken.err().unwrap_or_else(|| {
        *phase = Phase::Failed;
        ControlError::OutOfOrder {
            phase: before,
            byte: b,
        }
    })
}

/// The client's side of one test's control flow.
#[derive(Debug, Clone)]
pub(crate) struct ClientControl {
    phase: Phase,
}

impl Default for ClientControl {
    fn default() -> Self {
        ClientControl::new()
    }
}

impl ClientControl {
    /// A client that has just sent its cookie ([`Phase::Cookie`]).
    pub(crate) fn new() -> ClientControl {
        ClientControl {
            phase: Phase::Cookie,
        }
    }

    /// Where the test stands.
    #[cfg(test)]
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// A state byte from the server: the step it calls for, or why the test ends.
    ///
    /// Errors: ACCESS_DENIED, SERVER_ERROR (its code still to be read) and SERVER_TERMINATE
    /// in any phase; [`ControlError::OutOfOrder`] for a state the phase does not expect
    /// (any byte at all while data flows, or where JSON is due); [`ControlError::NotAState`].
    /// After an error the phase is [`Phase::Failed`], and every later byte is out of order.
    pub(crate) fn on_state(&mut self, b: u8) -> Result<ClientStep, ControlError> {
        let next = match (self.phase, State::from_byte(b)) {
            (Phase::Cookie, Some(State::ParamExchange)) => {
                Some((Phase::ParamExchange, ClientStep::SendParams))
            }
            (Phase::ParamExchange, Some(State::CreateStreams)) => {
                Some((Phase::CreateStreams, ClientStep::ConnectStreams))
            }
            (Phase::CreateStreams, Some(State::TestStart)) => {
                Some((Phase::TestStart, ClientStep::StartTimers))
            }
            (Phase::TestStart, Some(State::TestRunning)) => {
                Some((Phase::Running, ClientStep::StartData))
            }
            (Phase::TestEnd, Some(State::ExchangeResults)) => {
                Some((Phase::ExchangeResults, ClientStep::SendResults))
            }
            (Phase::DisplayResults, Some(State::DisplayResults)) => {
                Some((Phase::Done, ClientStep::SendIperfDone))
            }
            _ => None,
        };
        match next {
            Some((phase, step)) => {
                self.phase = phase;
                Ok(step)
            }
            None => Err(self.fail(b)),
        }
    }

    /// The error for byte `b` in this phase; the machine is then [`Phase::Failed`].
    fn fail(&mut self, b: u8) -> ControlError {
        let e = ControlError::anywhere(b)
            .filter(|e| *e != ControlError::ClientTerminate)
            .unwrap_or(match State::from_byte(b) {
                Some(_) => ControlError::OutOfOrder {
                    phase: self.phase,
                    byte: b,
                },
                None => ControlError::NotAState(b),
            });
        self.phase = Phase::Failed;
        e
    }

    /// A byte where the owner expects none (while data flows, during a drain, while streams
    /// are created): the machine's error for it, and the machine is then [`Phase::Failed`].
    /// A byte this phase would take is out of order all the same.
    pub(crate) fn refuse(&mut self, b: u8) -> ControlError {
        let before = self.phase;
        let taken = self.on_state(b).map(|_| ());
        refusal(&mut self.phase, before, taken, b)
    }

    /// The client ends the data phase (its `-t` timer fired, or `-n`/`-k` was reached):
    /// the state to send, TEST_END. [`Phase::Running`] → [`Phase::TestEnd`].
    pub(crate) fn end_test(&mut self) -> State {
        debug_assert_eq!(self.phase, Phase::Running);
        self.phase = Phase::TestEnd;
        State::TestEnd
    }

    /// The client gives up (the user stopped it, or its streams failed): the state to send,
    /// CLIENT_TERMINATE. The machine is then [`Phase::Failed`].
    pub(crate) fn terminate(&mut self) -> State {
        self.phase = Phase::Failed;
        State::ClientTerminate
    }

    /// The server's results (JSON) were read. [`Phase::ExchangeResults`] →
    /// [`Phase::DisplayResults`].
    pub(crate) fn on_results(&mut self) {
        debug_assert_eq!(self.phase, Phase::ExchangeResults);
        self.phase = Phase::DisplayResults;
    }
}

/// What the server does on a state byte from the client ([`ServerControl::on_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerStep {
    /// TEST_END: stop counting, drain a `-n`/`-k` test, then [`ServerControl::exchange_results`].
    EndTest,
    /// A repeated TEST_START while data flows (harmless; ignored, as before).
    Ignore,
    /// IPERF_DONE: the test is over.
    Done,
}

/// The server's side of one test's control flow.
#[derive(Debug, Clone)]
pub(crate) struct ServerControl {
    phase: Phase,
}

impl Default for ServerControl {
    fn default() -> Self {
        ServerControl::new()
    }
}

impl ServerControl {
    /// A session waiting for its cookie ([`Phase::Cookie`]).
    pub(crate) fn new() -> ServerControl {
        ServerControl {
            phase: Phase::Cookie,
        }
    }

    /// Where the test stands.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// From phase `from` (the caller's order; checked in debug builds) to `to`, saying `say`.
    fn advance<T>(&mut self, from: Phase, to: Phase, say: T) -> T {
        debug_assert_eq!(self.phase, from);
        self.phase = to;
        say
    }

    /// The cookie arrived and the session was admitted: the state to send, PARAM_EXCHANGE.
    pub(crate) fn on_cookie(&mut self) -> State {
        self.advance(Phase::Cookie, Phase::ParamExchange, State::ParamExchange)
    }

    /// The parameters were read and accepted: the state to send, CREATE_STREAMS.
    pub(crate) fn on_params(&mut self) -> State {
        self.advance(
            Phase::ParamExchange,
            Phase::CreateStreams,
            State::CreateStreams,
        )
    }

    /// Every data stream is connected: the states to send in one write, TEST_START and
    /// TEST_RUNNING. [`Phase::CreateStreams`] → [`Phase::Running`].
    pub(crate) fn streams_ready(&mut self) -> [State; 2] {
        self.advance(Phase::CreateStreams, Phase::Running, ());
        [State::TestStart, State::TestRunning]
    }

    /// A state byte from the client: the step it calls for, or why the session ends.
    ///
    /// Errors: [`ControlError::ClientTerminate`] in any phase; [`ControlError::OutOfOrder`]
    /// for a state the phase does not expect (any byte while streams are created, after
    /// TEST_END, or where JSON is due); [`ControlError::NotAState`]. After an error the
    /// phase is [`Phase::Failed`].
    pub(crate) fn on_state(&mut self, b: u8) -> Result<ServerStep, ControlError> {
        match (self.phase, State::from_byte(b)) {
            (Phase::Running, Some(State::TestEnd)) => {
                self.phase = Phase::TestEnd;
                Ok(ServerStep::EndTest)
            }
            (Phase::Running, Some(State::TestStart)) => Ok(ServerStep::Ignore),
            (Phase::DisplayResults, Some(State::IperfDone)) => {
                self.phase = Phase::Done;
                Ok(ServerStep::Done)
            }
            (phase, s) => {
                self.phase = Phase::Failed;
                Err(match s {
                    Some(State::ClientTerminate) => ControlError::ClientTerminate,
                    Some(_) => ControlError::OutOfOrder { phase, byte: b },
                    None => ControlError::NotAState(b),
                })
            }
        }
    }

    /// A byte where the owner expects none (while data flows, during a drain, while streams
    /// are created): the machine's error for it, and the machine is then [`Phase::Failed`].
    /// A byte this phase would take is out of order all the same.
    pub(crate) fn refuse(&mut self, b: u8) -> ControlError {
        let before = self.phase;
        let taken = self.on_state(b).map(|_| ());
        refusal(&mut self.phase, before, taken, b)
    }

    /// The test's totals are final (after a drain): the state to send, EXCHANGE_RESULTS.
    /// [`Phase::TestEnd`] → [`Phase::ExchangeResults`].
    pub(crate) fn exchange_results(&mut self) -> State {
        self.advance(
            Phase::TestEnd,
            Phase::ExchangeResults,
            State::ExchangeResults,
        )
    }

    /// The client's results were read; ours (JSON) go out, then the state this returns,
    /// DISPLAY_RESULTS. [`Phase::ExchangeResults`] → [`Phase::DisplayResults`].
    pub(crate) fn on_results(&mut self) -> State {
        self.advance(
            Phase::ExchangeResults,
            Phase::DisplayResults,
            State::DisplayResults,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::{Params, Protocol, Results};

    /// One control message of a captured trace.
    #[derive(Debug, Clone, PartialEq)]
    enum Msg {
        Cookie,
        State(u8),
        Json(String),
    }

    /// The control messages of a capture, `(client_to_server, message)` in order.
    fn parse_trace(text: &str) -> Vec<(bool, Msg)> {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(_time), Some(dir), Some(kind)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            let c2s = match dir {
                "C->S" => true,
                "S->C" => false,
                _ => continue,
            };
            let msg = if kind == "cookie" {
                Msg::Cookie
            } else if kind == "state" {
                let n: i8 = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .expect("state number");
                Msg::State(n as u8)
            } else if kind.starts_with("json(") {
                let at = line.find('{').expect("JSON body");
                Msg::Json(line[at..].to_string())
            } else {
                panic!("unknown trace line {line:?}");
            };
            out.push((c2s, msg));
        }
        out
    }

    fn traces() -> Vec<(&'static str, &'static str)> {
        macro_rules! t {
            ($($n:literal),*) => { vec![$(($n, include_str!(concat!("../../../tests/vectors/iperf3-3.12/control-trace-", $n, ".txt")))),*] };
        }
        t!(
            "bidir-P2",
            "blocks-k100",
            "bytes-n10M",
            "get-server-output-json",
            "get-server-output-text",
            "many-flags",
            "reverse-n50M",
            "reverse",
            "tcp",
            "udp-64bit",
            "udp-b100M",
            "udp-bidir-P2",
            "udp-reverse-omit"
        )
    }

    fn st(s: State) -> Msg {
        Msg::State(s.byte())
    }

    /// Our server machine fed the stock client's half of each trace answers exactly the stock
    /// server's half, in order, each answer only after the message that calls for it.
    #[test]
    fn every_captured_trace_replays_against_the_server_machine() {
        let all = traces();
        assert_eq!(all.len(), 13);
        for (name, text) in all {
            let trace = parse_trace(text);
            assert_eq!(trace.len(), 12, "{name}: 12 control messages");
            let mut ctl = ServerControl::new();
            let mut said: std::collections::VecDeque<Msg> = Default::default();
            let mut udp = None;
            for (i, (c2s, msg)) in trace.into_iter().enumerate() {
                if !c2s {
                    // A JSON answer stands for any JSON: the kinds and order are compared.
                    let msg = match msg {
                        Msg::Json(_) => Msg::Json(String::new()),
                        m => m,
                    };
                    assert_eq!(said.pop_front(), Some(msg), "{name}: message {i}");
                    continue;
                }
                match msg {
                    Msg::Cookie => said.push_back(st(ctl.on_cookie())),
                    Msg::Json(j) if ctl.phase() == Phase::ParamExchange => {
                        let v: serde_json::Value = serde_json::from_str(&j).expect("params JSON");
                        let p = Params::from_json(&v).expect("stock params accepted");
                        udp = Some(p.protocol == Protocol::Udp);
                        said.push_back(st(ctl.on_params()));
                        // The data connections (not on the control connection) complete.
                        said.extend(ctl.streams_ready().map(st));
                    }
                    Msg::Json(j) => {
                        assert_eq!(ctl.phase(), Phase::ExchangeResults, "{name}");
                        let r = Results::from_slice(j.as_bytes()).expect("stock results");
                        assert!(!r.streams.is_empty(), "{name}");
                        // Our results (JSON), then DISPLAY_RESULTS.
                        said.push_back(Msg::Json(String::new()));
                        said.push_back(st(ctl.on_results()));
                    }
                    Msg::State(b) => match ctl.on_state(b) {
                        Ok(ServerStep::EndTest) => said.push_back(st(ctl.exchange_results())),
                        Ok(ServerStep::Done) => {}
                        other => panic!("{name}: byte {b} gave {other:?}"),
                    },
                }
            }
            assert!(said.is_empty(), "{name}: left unsaid {said:?}");
            assert_eq!(ctl.phase(), Phase::Done, "{name}");
            assert_eq!(udp, Some(name.starts_with("udp")), "{name}");
        }
    }

    /// Our client machine fed the stock server's half of each trace sends exactly the stock
    /// client's half, in order.
    #[test]
    fn every_captured_trace_replays_against_the_client_machine() {
        for (name, text) in traces() {
            let mut ctl = ClientControl::new();
            let mut said: std::collections::VecDeque<Msg> = [Msg::Cookie].into();
            let mut steps = Vec::new();
            for (i, (c2s, msg)) in parse_trace(text).into_iter().enumerate() {
                if c2s {
                    let msg = match msg {
                        Msg::Json(_) => Msg::Json(String::new()),
                        m => m,
                    };
                    assert_eq!(said.pop_front(), Some(msg), "{name}: message {i}");
                    continue;
                }
                match msg {
                    Msg::State(b) => {
                        let step = ctl.on_state(b).unwrap_or_else(|e| panic!("{name}: {e:?}"));
                        steps.push(step);
                        match step {
                            ClientStep::SendParams | ClientStep::SendResults => {
                                said.push_back(Msg::Json(String::new()))
                            }
                            // The test runs to its end, then the client says so.
                            ClientStep::StartData => said.push_back(st(ctl.end_test())),
                            ClientStep::SendIperfDone => said.push_back(st(State::IperfDone)),
                            ClientStep::ConnectStreams | ClientStep::StartTimers => {}
                        }
                    }
                    Msg::Json(j) => {
                        Results::from_slice(j.as_bytes()).expect("stock server results");
                        ctl.on_results();
                    }
                    Msg::Cookie => panic!("{name}: a cookie from the server"),
                }
            }
            assert!(said.is_empty(), "{name}: left unsaid {said:?}");
            assert_eq!(ctl.phase(), Phase::Done, "{name}");
            use ClientStep::*;
            assert_eq!(
                steps,
                [
                    SendParams,
                    ConnectStreams,
                    StartTimers,
                    StartData,
                    SendResults,
                    SendIperfDone
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn the_client_ends_on_a_refusal_with_its_kind_in_every_phase() {
        let walk = [
            State::ParamExchange,
            State::CreateStreams,
            State::TestStart,
            State::TestRunning,
        ];
        for k in 0..=walk.len() {
            for (b, want) in [
                (State::AccessDenied.byte(), ControlError::AccessDenied),
                (State::ServerError.byte(), ControlError::ServerError(None)),
                (State::ServerTerminate.byte(), ControlError::ServerTerminate),
            ] {
                let mut c = ClientControl::new();
                for s in &walk[..k] {
                    c.on_state(s.byte()).expect("in order");
                }
                assert_eq!(c.on_state(b), Err(want), "after {k} states");
                assert_eq!(c.phase(), Phase::Failed);
                // Nothing more is accepted.
                assert!(c.on_state(State::ParamExchange.byte()).is_err());
            }
        }
    }

    #[test]
    fn the_client_refuses_bytes_out_of_order_and_bytes_that_are_no_state() {
        let mut c = ClientControl::new();
        assert_eq!(
            c.on_state(State::CreateStreams.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::Cookie,
                byte: 10
            })
        );
        // An iperf 2 server's answer to a cookie: not a state.
        let mut c = ClientControl::new();
        assert_eq!(c.on_state(0x30), Err(ControlError::NotAState(0x30)));
        assert_eq!(
            ControlError::NotAState(0x30).text(),
            format!("{} (got byte 0x30)", ierr_text(ierr::IEMESSAGE))
        );
        // Anything while data flows is an error; a server cannot say CLIENT_TERMINATE.
        let mut c = ClientControl::new();
        for s in [9, 10, 1, 2] {
            c.on_state(s).expect("in order");
        }
        assert_eq!(c.phase(), Phase::Running);
        assert_eq!(
            c.clone().on_state(State::ClientTerminate.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::Running,
                byte: 12
            })
        );
        assert_eq!(
            c.clone().on_state(State::ExchangeResults.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::Running,
                byte: 13
            })
        );
        assert_eq!(c.end_test(), State::TestEnd);
        // DISPLAY_RESULTS before the results exchange.
        assert_eq!(
            c.on_state(State::DisplayResults.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::TestEnd,
                byte: 14
            })
        );
    }

    #[test]
    fn the_server_ends_on_terminate_and_on_bytes_out_of_order() {
        let running = || {
            let mut s = ServerControl::new();
            s.on_cookie();
            s.on_params();
            s.streams_ready();
            s
        };
        let mut s = running();
        assert_eq!(s.on_state(State::TestStart.byte()), Ok(ServerStep::Ignore));
        assert_eq!(
            s.on_state(State::ClientTerminate.byte()),
            Err(ControlError::ClientTerminate)
        );
        assert_eq!(s.phase(), Phase::Failed);
        // IPERF_DONE mid-test (harden.rs's hostile client) is out of order.
        assert_eq!(
            running().on_state(State::IperfDone.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::Running,
                byte: 16
            })
        );
        // ACCESS_DENIED is the server's word: from a client it is out of order.
        assert_eq!(
            running().on_state(0xff),
            Err(ControlError::OutOfOrder {
                phase: Phase::Running,
                byte: 0xff
            })
        );
        assert_eq!(running().on_state(0x07), Err(ControlError::NotAState(0x07)));
        // Where the owner expects no byte at all, even one the phase takes is refused.
        let mut s = running();
        assert_eq!(
            s.refuse(State::TestStart.byte()),
            ControlError::OutOfOrder {
                phase: Phase::Running,
                byte: 1
            }
        );
        assert_eq!(s.phase(), Phase::Failed);
        assert_eq!(
            running().refuse(State::ClientTerminate.byte()),
            ControlError::ClientTerminate
        );
        // After TEST_END, during the drain, the client has nothing to say.
        let mut s = running();
        assert_eq!(s.on_state(State::TestEnd.byte()), Ok(ServerStep::EndTest));
        assert_eq!(s.phase(), Phase::TestEnd);
        assert_eq!(
            s.clone().on_state(State::TestEnd.byte()),
            Err(ControlError::OutOfOrder {
                phase: Phase::TestEnd,
                byte: 4
            })
        );
        assert_eq!(
            s.clone().on_state(State::ClientTerminate.byte()),
            Err(ControlError::ClientTerminate)
        );
        assert_eq!(s.exchange_results(), State::ExchangeResults);
        assert_eq!(s.on_results(), State::DisplayResults);
        assert_eq!(s.on_state(State::IperfDone.byte()), Ok(ServerStep::Done));
        assert_eq!(s.phase(), Phase::Done);
    }

    #[test]
    fn server_error_text_carries_iperf3_s_code_and_errno() {
        let e = ControlError::ServerError(None).with_code(ierr::IESTREAMID, 0);
        assert_eq!(
            e,
            ControlError::ServerError(Some(ServerErrorCode {
                code: ierr::IESTREAMID,
                errno: 0
            }))
        );
        assert_eq!(e.text(), ierr_text(ierr::IESTREAMID));
        let e = ControlError::ServerError(None).with_code(ierr::IERECVPARAMS, 104);
        assert_eq!(
            e.text(),
            format!(
                "{}: {}",
                ierr_text(ierr::IERECVPARAMS),
                std::io::Error::from_raw_os_error(104)
            )
        );
        // Other kinds keep theirs.
        assert_eq!(
            ControlError::AccessDenied.with_code(1, 2),
            ControlError::AccessDenied
        );
        assert_eq!(ControlError::NotAState(0x30).byte(), Some(0x30));
        assert_eq!(ControlError::AccessDenied.byte(), None);
    }
}
