//! Test lab: network namespaces joined by veth pairs (the seed topology), processes started
//! inside them, HTTP from inside a namespace, and clean-up on drop — even when a test fails.
//! Needs root. Traffic only flows between namespaces the test created.
#![allow(dead_code)]

pub mod browser;
pub mod http;
pub mod pages;

use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One lab at a time within a test binary: the labs load both cores and measure traffic,
/// and some share fixed ports (the daemon's, the stock servers'). A test that failed while
/// holding it does not stop the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Path of the netperfd binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_netperfd")
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces, `board` (192.0.2.1) and `pc1` (192.0.2.2), on one veth pair; optionally
/// `pc2` (198.51.100.2) behind the board's second port (198.51.100.1).
pub struct Lab {
    pub board: String,
    pub pc1: String,
    pub pc2: Option<String>,
    /// Board's port towards pc1 (inside the board namespace).
    pub board_if: String,
    pub board_if2: Option<String>,
    dir: PathBuf,
    procs: Vec<Child>,
    /// This lab's suffix (namespace names end in it).
    sfx: String,
    /// Namespaces added by [`Lab::add_ns`], deleted with the lab.
    extra: Vec<String>,
}

pub const BOARD_IP: &str = "192.0.2.1";
pub const PC1_IP: &str = "192.0.2.2";
pub const BOARD_IP2: &str = "198.51.100.1";
pub const PC2_IP: &str = "198.51.100.2";

impl Lab {
    /// board — pc1.
    pub fn new() -> Lab {
        Lab::build(false)
    }

    /// pc1 — board — pc2 (seed 000's topology).
    pub fn with_pc2() -> Lab {
        Lab::build(true)
    }

    fn build(pc2: bool) -> Lab {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let sfx = format!("{}{}", std::process::id() % 100_000, n);
        let board = format!("npt-b{sfx}");
        let pc1 = format!("npt-p{sfx}");
        let dir = std::env::temp_dir().join(format!("netperfd-test-{sfx}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let mut lab = Lab {
            board: board.clone(),
            pc1: pc1.clone(),
            pc2: None,
            board_if: "eth0".into(),
            board_if2: None,
            dir,
            procs: Vec::new(),
            sfx: sfx.clone(),
            extra: Vec::new(),
        };
        ip(&["netns", "add", &board]);
        ip(&["netns", "add", &pc1]);
        let (a, b) = (format!("vb{sfx}"), format!("vp{sfx}"));
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        ip(&["link", "set", &a, "netns", &board, "name", "eth0"]);
        ip(&["link", "set", &b, "netns", &pc1, "name", "eth0"]);
        for (ns, addr) in [(&board, "192.0.2.1/24"), (&pc1, "192.0.2.2/24")] {
            ip(&["-n", ns, "addr", "add", addr, "dev", "eth0"]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        if pc2 {
            let p2 = format!("npt-q{sfx}");
            ip(&["netns", "add", &p2]);
            let (a, b) = (format!("wb{sfx}"), format!("wp{sfx}"));
            ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
            ip(&["link", "set", &a, "netns", &board, "name", "eth1"]);
            ip(&["link", "set", &b, "netns", &p2, "name", "eth0"]);
            ip(&[
                "-n",
                &board,
                "addr",
                "add",
                "198.51.100.1/24",
                "dev",
                "eth1",
            ]);
            ip(&["-n", &board, "link", "set", "eth1", "up"]);
            ip(&["-n", &p2, "addr", "add", "198.51.100.2/24", "dev", "eth0"]);
            ip(&["-n", &p2, "link", "set", "eth0", "up"]);
            ip(&["-n", &p2, "link", "set", "lo", "up"]);
            lab.pc2 = Some(p2);
            lab.board_if2 = Some("eth1".into());
        }
        lab
    }

    /// Seed 000's lab with the peer agent: pc1 routes through the board, `netperfd peer`
    /// listens on pc1:5280 with `token` (written to a file in the lab's directory, whose path
    /// is returned), stock `iperf3 -s` on pc2 (with no route back: only NAT on the board makes
    /// replies find pc1). Forwarding on the board is off.
    pub fn with_agent(token: &str) -> (Lab, String) {
        let mut lab = Lab::with_pc2();
        let (pc1, pc2) = (lab.pc1.clone(), lab.pc2.clone().expect("pc2"));
        ip(&["-n", &pc1, "route", "add", "default", "via", BOARD_IP]);
        let tf = lab.token_file(token);
        lab.spawn(
            &pc1,
            "agent",
            bin(),
            &[
                "peer",
                "--listen",
                "192.0.2.2:5280",
                "--plain-http",
                "--token-file",
                &tf,
            ],
        );
        lab.wait_port(&pc1, PC1_IP, 5280);
        lab.spawn(&pc2, "iperf3-s", "iperf3", &["-s"]);
        lab.wait_port(&pc2, PC2_IP, 5201);
        (lab, tf)
    }

    /// `token` in a file of the lab's directory (named by its length); the file's path.
    pub fn token_file(&self, token: &str) -> String {
        let p = self.dir.join(format!("token-{}", token.len()));
        std::fs::write(&p, format!("{token}\n")).expect("token file");
        p.to_str().expect("utf-8").to_string()
    }

    /// A further namespace `npt-<tag><suffix>` (a router, a second PC), with `lo` up; deleted
    /// with the lab (also when a test fails).
    pub fn add_ns(&mut self, tag: &str) -> String {
        let ns = format!("npt-{tag}{}", self.sfx);
        ip(&["netns", "add", &ns]);
        self.extra.push(ns.clone());
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// A veth pair between `a` (port `a_if`, address `a_addr` as `x.x.x.x/len`) and `b`
    /// (`b_if`, `b_addr`), both up.
    pub fn link(&self, a: &str, a_if: &str, a_addr: &str, b: &str, b_if: &str, b_addr: &str) {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let (x, y) = (format!("vx{}{n}", self.sfx), format!("vy{}{n}", self.sfx));
        ip(&["link", "add", &x, "type", "veth", "peer", "name", &y]);
        for (ns, dev, ifname, addr) in [(a, &x, a_if, a_addr), (b, &y, b_if, b_addr)] {
            ip(&["link", "set", dev, "netns", ns, "name", ifname]);
            ip(&["-n", ns, "addr", "add", addr, "dev", ifname]);
            ip(&["-n", ns, "link", "set", ifname, "up"]);
        }
    }

    /// Start `prog args` in namespace `ns` as a member of cgroup (v1) directory `cgroup`: the
    /// process joins it before `ip netns exec` (which mounts its own /sys, hiding the
    /// cgroup file system). Output as [`Lab::spawn`].
    pub fn spawn_in_cgroup(
        &mut self,
        cgroup: &std::path::Path,
        ns: &str,
        name: &str,
        prog: &str,
        args: &[&str],
    ) -> usize {
        let out = File::create(self.dir.join(format!("{name}.out"))).expect("out file");
        let err = File::create(self.dir.join(format!("{name}.err"))).expect("err file");
        let child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec ip netns exec \"$@\"")
            .arg(cgroup)
            .arg(ns)
            .arg(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn in a cgroup");
        self.procs.push(child);
        self.procs.len() - 1
    }

    /// A scratch directory removed with the lab.
    pub fn dir(&self) -> &PathBuf {
        &self.dir
    }

    /// Start `prog args` in namespace `ns`; stdout/stderr go to files named `name.out/.err`.
    pub fn spawn(&mut self, ns: &str, name: &str, prog: &str, args: &[&str]) -> usize {
        self.spawn_env(ns, name, prog, args, &[])
    }

    /// dnsmasq as the upstream router's DHCP server on `ns`'s eth0 (DHCP only, no DNS):
    /// addresses 198.51.100.50–59/24 leased for 2 min, its leases in `leases`, then
    /// `options` (`--dhcp-option=…`: the router, DNS servers, forced options). Returns the
    /// process's index for [`Lab::kill`].
    pub fn dhcp_server(
        &mut self,
        ns: &str,
        name: &str,
        leases: &std::path::Path,
        options: &[&str],
    ) -> usize {
        let lf = format!("--dhcp-leasefile={}", leases.display());
        let mut args = vec![
            "--no-daemon",
            "--conf-file=/dev/null",
            "--port=0",
            "--interface=eth0",
            "--bind-interfaces",
            "--dhcp-range=198.51.100.50,198.51.100.59,255.255.255.0,2m",
            "--dhcp-authoritative",
            "--no-ping",
            "--user=root",
            &lf,
        ];
        args.extend_from_slice(options);
        self.spawn(ns, name, "dnsmasq", &args)
    }

    /// Like [`Lab::spawn`] with extra environment variables.
    pub fn spawn_env(
        &mut self,
        ns: &str,
        name: &str,
        prog: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> usize {
        let out = File::create(self.dir.join(format!("{name}.out"))).expect("out file");
        let err = File::create(self.dir.join(format!("{name}.err"))).expect("err file");
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, prog]).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn in namespace");
        self.procs.push(child);
        self.procs.len() - 1
    }

    /// PID of a spawned process.
    pub fn pid(&self, idx: usize) -> u32 {
        self.procs[idx].id()
    }

    /// Wait for a spawned process to exit (bounded); returns its exit code, None on timeout.
    pub fn wait(&mut self, idx: usize, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            match self.procs[idx].try_wait() {
                Ok(Some(st)) => return Some(st.code().unwrap_or(-1)),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => return None,
            }
        }
    }

    /// Whether a spawned process is still running.
    pub fn alive(&mut self, idx: usize) -> bool {
        matches!(self.procs[idx].try_wait(), Ok(None))
    }

    /// Send SIGKILL to a spawned process.
    pub fn kill(&mut self, idx: usize) {
        let _ = self.procs[idx].kill();
        let _ = self.procs[idx].wait();
    }

    /// What a spawned process wrote so far.
    pub fn output(&self, name: &str) -> (String, String) {
        let r = |ext: &str| {
            std::fs::read_to_string(self.dir.join(format!("{name}.{ext}"))).unwrap_or_default()
        };
        (r("out"), r("err"))
    }

    /// Run a command in a namespace to completion (killed after `limit`).
    pub fn run(
        &mut self,
        ns: &str,
        name: &str,
        prog: &str,
        args: &[&str],
        limit: Duration,
    ) -> (Option<i32>, String, String) {
        let i = self.spawn(ns, name, prog, args);
        let code = self.wait(i, limit);
        if code.is_none() {
            self.kill(i);
        }
        let (o, e) = self.output(name);
        (code, o, e)
    }

    /// Wait until something listens on TCP `port` in `ns` (bounded). Reads the namespace's
    /// socket table instead of connecting, so a one-off (`-1`) server is not used up.
    pub fn wait_port(&self, ns: &str, _addr: &str, port: u16) {
        let found = poll_until(Duration::from_secs(10), || {
            sockets(ns, "tcp")
                .iter()
                .any(|s| s.local_port == port && s.state == TCP_LISTEN)
        });
        assert!(found, "nothing listens on port {port} in {ns}");
    }

    /// Wait until a UDP socket is bound on `port` in `ns` (bounded): a UDP server has no
    /// listening socket to wait for.
    pub fn wait_udp(&self, ns: &str, port: u16) {
        let found = poll_until(Duration::from_secs(10), || {
            sockets(ns, "udp").iter().any(|s| s.local_port == port)
        });
        assert!(found, "nothing bound on UDP port {port} in {ns}");
    }

    /// Wait until what process `name` wrote (stdout and stderr) contains `needle`; returns
    /// both. Fails the test with the output after `limit`.
    pub fn wait_output(&self, name: &str, needle: &str, limit: Duration) -> (String, String) {
        let found = poll_until(limit, || {
            let (o, e) = self.output(name);
            o.contains(needle) || e.contains(needle)
        });
        let (o, e) = self.output(name);
        assert!(
            found,
            "{name} did not write {needle:?} within {limit:?}:\n{o}{e}"
        );
        (o, e)
    }
}

/// `st` of a listening TCP socket in /proc/net/tcp.
pub const TCP_LISTEN: u8 = 0x0A;
/// `st` of an established TCP connection.
pub const TCP_ESTABLISHED: u8 = 0x01;
/// `st` of a TCP connection the peer has closed and this end not yet.
pub const TCP_CLOSE_WAIT: u8 = 0x08;

/// One socket of a namespace's table (/proc/net/{tcp,tcp6,udp,udp6}): its local port, its
/// state (`st`, e.g. [`TCP_LISTEN`]), and the bytes queued to send and to read (for a
/// listening socket, `rx_queue` is the number of connections waiting to be accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sock {
    pub local_port: u16,
    pub remote_port: u16,
    pub state: u8,
    pub tx_queue: u64,
    pub rx_queue: u64,
}

/// The TCP (`proto` "tcp") or UDP ("udp") sockets of namespace `ns`, IPv4 and IPv6.
pub fn sockets(ns: &str, proto: &str) -> Vec<Sock> {
    let proto = proto.to_string();
    in_ns(ns, move || {
        let mut out = Vec::new();
        for f in [proto.clone(), format!("{proto}6")] {
            // /proc/self/net follows the reading thread's namespace only for the main thread;
            // read the task's own entry instead.
            let f = format!("/proc/self/task/{}/net/{f}", nix::unistd::gettid());
            let t = std::fs::read_to_string(&f).unwrap_or_default();
            for l in t.lines().skip(1) {
                let c: Vec<&str> = l.split_whitespace().collect();
                if c.len() < 5 {
                    continue;
                }
                let port = |a: &str| {
                    a.rsplit(':')
                        .next()
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                        .unwrap_or(0)
                };
                let (tx, rx) = c[4].split_once(':').unwrap_or(("0", "0"));
                out.push(Sock {
                    local_port: port(c[1]),
                    remote_port: port(c[2]),
                    state: u8::from_str_radix(c[3], 16).unwrap_or(0),
                    tx_queue: u64::from_str_radix(tx, 16).unwrap_or(0),
                    rx_queue: u64::from_str_radix(rx, 16).unwrap_or(0),
                });
            }
        }
        out
    })
}

/// Wait (bounded) until no connection to local TCP `port` in `ns` is open on the server's
/// side (established, or closed by the client and not yet by the server): the server has
/// let go of every connection it had on that port.
pub fn wait_conns_closed(ns: &str, port: u16, limit: Duration) {
    wait_until(
        limit,
        &format!("the connections to port {port} in {ns} to close"),
        || {
            !sockets(ns, "tcp").iter().any(|s| {
                s.local_port == port && matches!(s.state, TCP_ESTABLISHED | TCP_CLOSE_WAIT)
            })
        },
    );
}

/// Poll `f` (every 50 ms) until it holds or `limit` has passed; whether it held.
pub fn poll_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait for an event: poll `f` (every 50 ms) until it holds; fails the test with "timed out
/// after LIMIT waiting for WHAT" when it has not within `limit`. Returns how long it took.
pub fn wait_until(limit: Duration, what: &str, f: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    assert!(
        poll_until(limit, f),
        "timed out after {limit:?} waiting for {what}"
    );
    t.elapsed()
}

/// Whether `eth` in `ns` is up with its carrier (`ip link`'s LOWER_UP): a veth whose both
/// ends are up.
pub fn link_up(ns: &str, eth: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", eth])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.contains("LOWER_UP") && out.contains("state UP")
}

impl Drop for Lab {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
        for ns in [Some(&self.board), Some(&self.pc1), self.pc2.as_ref()]
            .into_iter()
            .flatten()
            .chain(&self.extra)
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if std::env::var_os("NETPERFD_KEEP_TEST_FILES").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A cgroup v1 `cpu` group with a CFS quota (`quota_us` of CPU time per 100 ms period),
/// removed when dropped (after the processes in it ended: drop it after the lab).
pub struct CpuCgroup(PathBuf);

impl CpuCgroup {
    pub fn new(tag: &str, quota_us: u32) -> CpuCgroup {
        let p = PathBuf::from("/sys/fs/cgroup/cpu").join(format!(
            "npt-{tag}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let g = CpuCgroup(p);
        std::fs::write(g.0.join("cpu.cfs_period_us"), "100000").expect("cfs period");
        std::fs::write(g.0.join("cpu.cfs_quota_us"), quota_us.to_string()).expect("cfs quota");
        g
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Move process `pid` (all its threads) into the group.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).expect("join the cgroup");
    }

    /// Move process `pid` back to the root group.
    pub fn leave(&self, pid: u32) {
        let _ = std::fs::write("/sys/fs/cgroup/cpu/cgroup.procs", pid.to_string());
    }

    /// Times the group was held back by its quota, and for how long in all (ns): `cpu.stat`'s
    /// `nr_throttled` and `throttled_time`.
    pub fn throttled(&self) -> (u64, u64) {
        let t = std::fs::read_to_string(self.0.join("cpu.stat")).unwrap_or_default();
        let get = |k: &str| {
            t.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
                .unwrap_or(0)
        };
        (get("nr_throttled "), get("throttled_time "))
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        // Whatever is left in it (a process that outlived its lab) goes back to the root.
        let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write("/sys/fs/cgroup/cpu/cgroup.procs", pid);
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Run `f` on a thread that has joined network namespace `ns` (sockets it opens, and
/// processes it starts, live there).
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = File::open(&path).expect("open netns");
        nix::sched::setns(fd.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("namespace thread panicked")
}

/// The newest stock iperf3 Debian has (`scripts/stock-peers.sh`: forky's, 3.22 in December
/// 2026), as the other stock versions are: required (the test fails naming the script).
pub fn newest_stock() -> String {
    let dir = std::env::var("NETPERFD_STOCK_PEERS")
        .unwrap_or_else(|_| "/var/cache/netperfd-stock-peers".into());
    let path = format!("{dir}/bin/iperf3-newest");
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: run scripts/stock-peers.sh {dir}"
    );
    path
}

/// Parse a JSON document printed by a tool, with a clear failure.
pub fn json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{what} is not one JSON document ({e}):\n{text}"))
}

/// Read a number at a JSON pointer.
pub fn num(v: &serde_json::Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("no number at {ptr} in {v}"))
}

/// A TCP port that is free on loopback right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A bitrate as the pages write it from 10 Mbit/s up (src/model/display.rs): one decimal,
/// thousands grouped with a comma — 9154.83e6 → "9,154.8 Mbit/s".
pub fn mbit_text(bps: f64) -> String {
    let t = format!("{:.1}", bps / 1e6);
    let (whole, frac) = t.split_once('.').unwrap_or((&t, "0"));
    let mut g = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            g.push(',');
        }
        g.push(c);
    }
    format!("{g}.{frac} Mbit/s")
}

/// Key paths of `v` under the JSON pointer `ptr`, `depth` levels down (arrays entered at
/// their first element), e.g. "/end/sum_sent/bytes".
pub fn key_paths(v: &serde_json::Value, ptr: &str, depth: usize) -> Vec<String> {
    fn walk(v: &serde_json::Value, prefix: &str, depth: usize, out: &mut Vec<String>) {
        if depth == 0 {
            return;
        }
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{prefix}/{k}");
                    out.push(p.clone());
                    walk(x, &p, depth - 1, out);
                }
            }
            serde_json::Value::Array(a) => {
                if let Some(x) = a.first() {
                    walk(x, &format!("{prefix}/0"), depth - 1, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let at = v.pointer(ptr).unwrap_or(&serde_json::Value::Null);
    walk(at, ptr, depth, &mut out);
    out
}

/// Key paths under `ptr` (`depth` levels) that `stock` has and `ours` lacks: netperfd may
/// add keys to a stock layout, never drop one.
pub fn missing_keys(
    stock: &serde_json::Value,
    ours: &serde_json::Value,
    ptr: &str,
    depth: usize,
) -> Vec<String> {
    let have = key_paths(ours, ptr, depth);
    key_paths(stock, ptr, depth)
        .into_iter()
        .filter(|k| !have.contains(k))
        .collect()
}

/// Peak resident memory of a process in KiB (`VmHWM` of /proc/PID/status).
pub fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Resident memory of a process now in KiB (`VmRSS` of /proc/PID/status).
pub fn vm_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A tmpfs of `mib` MiB mounted on `dir`, unmounted when dropped (also on a failed test).
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path, mib: u32) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("dir");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount")
            .success();
        assert!(ok, "cannot mount a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system of `dir` to the last byte (a file `fill` there).
pub fn fill(dir: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("fill")).expect("fill file");
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let mut b = [0u8; 1];
    while f.write_all(&b[..]).is_ok() {
        b[0] = 1;
    }
    let _ = f.sync_all();
}

/// Run `args` in namespace `ns` to completion and return its stdout (fails the test when the
/// command fails).
pub fn ns_sh(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("run in namespace");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A root qdisc's own counters as `tc -s qdisc show dev DEV` prints them, in the kernel's
/// units: `dropped` counts skbs (one GSO batch is one), `sent_pkt` counts segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcStats {
    pub sent_bytes: u64,
    pub sent_pkt: u64,
    pub dropped: u64,
}

/// [`TcStats`] of the root qdisc of `dev` in `ns` (the first "Sent … (dropped …" line).
pub fn tc_stats(ns: &str, dev: &str) -> TcStats {
    let t = ns_sh(ns, &["tc", "-s", "qdisc", "show", "dev", dev]);
    let after = |key: &str| -> u64 {
        let i = t.find(key).unwrap_or_else(|| panic!("no {key:?} in {t}")) + key.len();
        let n: String = t[i..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        n.parse().unwrap_or_else(|_| panic!("{key:?} in {t}"))
    };
    let sent = t.find(" Sent ").map(|i| &t[i..]).unwrap_or("");
    let pkt: u64 = sent
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no Sent … pkt in {t}"));
    TcStats {
        sent_bytes: after(" Sent "),
        sent_pkt: pkt,
        dropped: after("dropped "),
    }
}
