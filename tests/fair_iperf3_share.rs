//! Issue 37, item 11: two addresses with six slow (1 kbit/s) tests each made the iperf3 server
//! answer "busy" to everyone else (6 + 2 of its 8 slots, all running). The share rule
//! (`engine::iperf3::server::admission_limits`): while an address asks, an address holding two
//! tests more than it would gives up its newest running test, so two addresses settle at 4 + 4
//! and a third one still gets in. Stock iperf3 clients from distinct loopback source addresses
//! (127.0.0.2, .3, .4) against `netperfd -s` on loopback.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One stock iperf3 client and what it printed so far (stdout and stderr).
struct Client {
    from: &'static str,
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Client {
    /// A 60 s, 1 kbit/s TCP test from source address `from`.
    fn start(from: &'static str, port: u16) -> Client {
        let mut child = Command::new("iperf3")
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-B",
                from,
                "-b",
                "1K",
                // 100-byte blocks: ~1 a second at 1 kbit/s (a 128 KiB block would take
                // 17 min and the server would end the test as stalled).
                "-l",
                "100",
                "-t",
                "60",
                "-i",
                "1",
                "--forceflush",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start iperf3");
        let out = Arc::new(Mutex::new(String::new()));
        let pipes: Vec<Box<dyn std::io::Read + Send>> = vec![
            Box::new(child.stdout.take().expect("stdout")),
            Box::new(child.stderr.take().expect("stderr")),
        ];
        for p in pipes {
            let out = out.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(p).lines().map_while(Result::ok) {
                    let mut o = out.lock().expect("lock");
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        Client { from, child, out }
    }

    fn text(&self) -> String {
        self.out.lock().expect("lock").clone()
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait until the test runs (its first interval line) or the client ended.
    fn wait_started(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.running() && !self.text().contains("bits/sec") {
            assert!(
                Instant::now() < deadline,
                "client from {} neither ran nor ended:\n{}",
                self.from,
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Clients still running per source address, once every client that is to end has ended
/// (the ended ones print their error; wait for `expect_ended` of them).
fn settle(clients: &mut [Client], expect_ended: usize) -> Vec<(&'static str, usize)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ended = clients
            .iter_mut()
            .filter_map(|c| (!c.running()).then_some(()))
            .count();
        if ended >= expect_ended {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {ended} of {expect_ended} clients ended: {:?}",
            clients
                .iter()
                .map(|c| (c.from, c.text()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A client told to stop exits within the server's grace; one more look after it.
    std::thread::sleep(Duration::from_millis(500));
    let mut per: Vec<(&'static str, usize)> = Vec::new();
    for c in clients.iter_mut() {
        let alive = usize::from(c.running());
        match per.iter_mut().find(|(f, _)| *f == c.from) {
            Some((_, n)) => *n += alive,
            None => per.push((c.from, alive)),
        }
    }
    per
}

#[test]
fn two_busy_addresses_share_the_iperf3_server_and_a_third_still_gets_in() {
    let port = free_port();
    let log = std::env::temp_dir().join(format!("netperfd-fair-share-{port}.log"));
    let mut server = Command::new(bin())
        .args(["-s", "-p", &port.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut clients: Vec<Client> = Vec::new();
    // Six tests from .2, one after another: all run (6 ≤ 6 per address, 8 slots).
    for _ in 0..6 {
        let mut c = Client::start("127.0.0.2", port);
        c.wait_started();
        clients.push(c);
    }
    assert_eq!(settle(&mut clients, 0), vec![("127.0.0.2", 6)]);
    // Six from .3: the first two fill the table, the next two each take .2's newest test
    // (6 → 5 → 4), the last two are refused (4 + 4: nobody holds two more).
    for _ in 0..6 {
        let mut c = Client::start("127.0.0.3", port);
        c.wait_started();
        clients.push(c);
    }
    let per = settle(&mut clients, 4);
    assert_eq!(
        per,
        vec![("127.0.0.2", 4), ("127.0.0.3", 4)],
        "server log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let ended: Vec<String> = clients
        .iter_mut()
        .filter_map(|c| (!c.running()).then(|| format!("{} {}", c.from, c.text())))
        .collect();
    let terminated = ended
        .iter()
        .filter(|t| t.starts_with("127.0.0.2") && t.contains("server has terminated"))
        .count();
    let busy = ended
        .iter()
        .filter(|t| t.starts_with("127.0.0.3") && t.contains("busy"))
        .count();
    assert_eq!((terminated, busy), (2, 2), "ended clients: {ended:?}");
    // A third address gets in: it takes one running test of an address holding 4.
    let mut c = Client::start("127.0.0.4", port);
    c.wait_started();
    clients.push(c);
    let per = settle(&mut clients, 5);
    let alive = |from: &str| per.iter().find(|(f, _)| *f == from).map_or(0, |(_, n)| *n);
    assert_eq!(alive("127.0.0.4"), 1, "{per:?}");
    assert_eq!(alive("127.0.0.2") + alive("127.0.0.3"), 7, "{per:?}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("another address needed its fair share"),
        "server log:\n{text}"
    );
    drop(clients);
    let _ = server.kill();
    let _ = server.wait();
}
