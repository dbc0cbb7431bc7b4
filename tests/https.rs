//! HTTPS by default (issue 41), end to end: the daemon in the board namespace listens on
//! 0.0.0.0:443 with `http_redirect = "0.0.0.0:80"`, as the shipped config. A PC in pc1:
//! * reaches the page over TLS only with the certificate whose SHA-256 the daemon logged (a
//!   client that pins that fingerprint; the same fingerprint is in the login prompt's snippet
//!   and is the SHA-256 of the PEM file in the data directory, computed here);
//! * gets no page on 443 in plain HTTP;
//! * on port 80 gets a redirect to https:// for pages, a 400 naming the https:// URL for the
//!   API and for a posted login form, and never a password field;
//! * sets the password over HTTPS and gets a `Secure` session cookie.
//!
//! A restart reuses the certificate (same fingerprint logged).

mod common;
use common::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::sync::Arc;

/// A verifier that accepts exactly the certificate whose SHA-256 is `pin` (colon hex),
/// checking the handshake's signatures with ring as usual.
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

fn colon_hex(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if colon_hex(end_entity.as_ref()) == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            m,
            c,
            d,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            m,
            c,
            d,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Send `request` over TLS to `addr:port` from namespace `ns`, accepting only the certificate
/// `pin`; the raw response, or the error text.
fn https(ns: &str, addr: &str, port: u16, pin: &str, request: String) -> Result<String, String> {
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        pin: pin.to_string(),
        provider: provider.clone(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let addr = addr.to_string();
    in_ns(ns, move || {
        let name = ServerName::try_from(addr.clone()).map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(Arc::new(config), name.to_owned())
            .map_err(|e| e.to_string())?;
        let sock =
            std::net::TcpStream::connect((addr.as_str(), port)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let mut tls = rustls::StreamOwned::new(conn, sock);
        tls.write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        match tls.read_to_end(&mut out) {
            Ok(_) => {}
            // actix closes without close_notify: what was read is the answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
            Err(e) => return Err(e.to_string()),
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    })
}

/// Plain HTTP: send `request` to `addr:port` from `ns`; the raw response (maybe empty).
fn plain(ns: &str, addr: &str, port: u16, request: String) -> String {
    let addr = addr.to_string();
    in_ns(ns, move || {
        let mut s = std::net::TcpStream::connect((addr.as_str(), port)).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("timeout");
        s.write_all(request.as_bytes()).expect("send");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {BOARD_IP}\r\nConnection: close\r\n\r\n")
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {BOARD_IP}\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn header<'a>(resp: &'a str, name: &str) -> Vec<&'a str> {
    let head = resp.split("\r\n\r\n").next().unwrap_or("");
    head.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then_some(v.trim())
        })
        .collect()
}

/// The fingerprint the daemon logged at start.
fn logged_fingerprint(log: &str) -> String {
    let i = log
        .find("web UI certificate SHA-256 ")
        .unwrap_or_else(|| panic!("no certificate line in {log}"))
        + "web UI certificate SHA-256 ".len();
    log[i..].chars().take(95).collect()
}

#[test]
fn the_board_serves_https_with_the_logged_certificate_and_port_80_only_redirects() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let issue = lab.dir().join("netperfd.issue");
    let data = lab.dir().join("data");
    let conf = lab.dir().join("netperfd.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"0.0.0.0:443\"\nhttp_redirect = \"0.0.0.0:80\"\ndata_dir = \"{}\"\nsetup_issue_file = \"{}\"\niperf3_ports = [5201]\n",
            data.display(),
            issue.display()
        ),
    )
    .expect("config");
    let conf_s = conf.display().to_string();
    let args = ["daemon", "--config", &conf_s];
    let d = lab.spawn(&board, "daemon", bin(), &args);
    lab.wait_port(&board, BOARD_IP, 443);
    lab.wait_port(&board, BOARD_IP, 80);

    // The fingerprint: logged, on the login prompt with the setup code, and the SHA-256 of
    // the certificate file the daemon made (computed here).
    let (_, log) = lab.output("daemon");
    let fp = logged_fingerprint(&log);
    eprintln!("fingerprint {fp}");
    let pem = std::fs::read(data.join("tls-cert.pem")).expect("the certificate file");
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(&pem).expect("PEM");
    let der: CertificateDer = der;
    assert_eq!(colon_hex(der.as_ref()), fp);
    let setup_line = log
        .lines()
        .find(|l| l.contains("no admin password yet"))
        .unwrap_or_else(|| panic!("no setup line in {log}"));
    assert!(
        setup_line.contains(&format!(
            "open https://{BOARD_IP}/setup (certificate SHA-256 {fp})"
        )),
        "{setup_line}"
    );
    let snippet = std::fs::read_to_string(&issue).expect("the login prompt's snippet");
    assert!(
        snippet.contains(&format!("https://{BOARD_IP}/setup"))
            && snippet.contains(&format!("certificate SHA-256 {fp}")),
        "{snippet}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(data.join("tls-key.pem"))
        .expect("key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The data directory and the history are the owner's only (outside systemd the umask
    // left them 0755 and 0644).
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("netperfd.sqlite")), 0o600);
    // Its WAL and shared-memory files, made before the daemon could chmod anything, are not
    // readable by others either (they were 0644: the daemon's umask is at least 0027 now).
    for f in ["netperfd.sqlite-wal", "netperfd.sqlite-shm"] {
        let p = data.join(f);
        if p.exists() {
            assert_eq!(mode(&p) & 0o007, 0, "{f} is {:o}", mode(&p));
        }
    }

    // HTTPS with the pinned certificate: the setup page. Any other pin: no connection.
    let r = https(&pc1, BOARD_IP, 443, &fp, get("/setup")).expect("HTTPS with the pin");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("type=\"password\""), "the setup form: {r}");
    let wrong = format!("00{}", &fp[2..]);
    let e = https(&pc1, BOARD_IP, 443, &wrong, get("/setup")).expect_err("another pin");
    assert!(e.contains("not the pinned certificate"), "{e}");

    // Plain HTTP on the HTTPS port: no page.
    let r = plain(&pc1, BOARD_IP, 443, get("/login"));
    assert!(
        !r.starts_with("HTTP/1.1 200") && !r.contains("password"),
        "{r}"
    );

    // Port 80: pages go to https://, the API and a posted form get a clear 400, and no
    // answer there ever holds a password field.
    for path in ["/login", "/setup", "/runs?page=2", "/"] {
        let r = plain(&pc1, BOARD_IP, 80, get(path));
        assert!(r.starts_with("HTTP/1.1 307"), "{path}: {r}");
        assert_eq!(
            header(&r, "location"),
            vec![format!("https://{BOARD_IP}{path}").as_str()],
            "{r}"
        );
        assert!(!r.contains("password"), "{r}");
    }
    let r = plain(
        &pc1,
        BOARD_IP,
        80,
        format!(
            "GET /api/runs HTTP/1.1\r\nHost: {BOARD_IP}\r\nAuthorization: Bearer abc\r\nConnection: close\r\n\r\n"
        ),
    );
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(header(&r, "location").is_empty(), "{r}");
    let body = r.split("\r\n\r\n").nth(1).unwrap_or("");
    let v = json(body, "the API's answer on port 80");
    let msg = v["error"].as_str().unwrap_or("");
    assert!(
        msg.contains(&format!("use https://{BOARD_IP}/api/runs")) && msg.contains("revoking"),
        "{msg}"
    );
    // Attacker tryout: these spellings of the API got a 307 (a client following it sends its
    // token again); and a credential on a page's path must not be redirected either.
    for path in [
        "/./api/runs",
        "//api/runs",
        "/api%2Fruns",
        "/API",
        "/%61pi/",
        "/api/../api",
    ] {
        let r = plain(&pc1, BOARD_IP, 80, get(path));
        assert!(r.starts_with("HTTP/1.1 400"), "{path}: {r}");
        assert!(header(&r, "location").is_empty(), "{path}: {r}");
        let v = json(r.split("\r\n\r\n").nth(1).unwrap_or(""), path);
        assert_eq!(
            v["error"],
            format!("this board serves its API over HTTPS only: use https://{BOARD_IP}{path}"),
            "{path}"
        );
    }
    for (path, extra, said) in [
        (
            "/runs",
            "Cookie: netperfd_session=abc\r\n",
            "session cookie",
        ),
        ("/runs?token=abc", "", "query named a token"),
        (
            "/",
            "Authorization: Basic YWRtaW46eA==\r\n",
            "Authorization header",
        ),
    ] {
        let r = plain(
            &pc1,
            BOARD_IP,
            80,
            format!("GET {path} HTTP/1.1\r\nHost: {BOARD_IP}\r\n{extra}Connection: close\r\n\r\n"),
        );
        assert!(r.starts_with("HTTP/1.1 400"), "{path}: {r}");
        assert!(header(&r, "location").is_empty(), "{path}: {r}");
        assert!(
            r.contains(said) && r.contains("crossed the network in clear"),
            "{r}"
        );
        assert!(!r.contains("token=abc"), "the query is not sent back: {r}");
    }
    let r = plain(&pc1, BOARD_IP, 80, post("/login", "password=hunter22"));
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(r.contains(&format!("open https://{BOARD_IP}/login")), "{r}");
    assert!(!r.contains("password"), "{r}");

    // The password set over HTTPS: the session cookie is Secure.
    let code = common::http::setup_code(&log);
    let body = format!("code={code}&password=correct+horse&confirm=correct+horse");
    let r = https(&pc1, BOARD_IP, 443, &fp, post("/setup", &body)).expect("setup");
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let cookie = header(&r, "set-cookie");
    assert!(
        cookie.len() == 1 && cookie[0].contains("; Secure") && cookie[0].contains("HttpOnly"),
        "{cookie:?}"
    );
    assert!(!issue.exists(), "the code left the login prompt");

    // A restart keeps the certificate.
    lab.kill(d);
    lab.spawn(&board, "daemon2", bin(), &args);
    lab.wait_port(&board, BOARD_IP, 443);
    let (_, log2) = lab.output("daemon2");
    assert_eq!(logged_fingerprint(&log2), fp, "reused: {log2}");
    assert!(!log2.contains("made now"), "{log2}");
    let r = https(&pc1, BOARD_IP, 443, &fp, get("/login")).expect("HTTPS after restart");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[test]
fn a_bad_own_certificate_stops_the_daemon_with_the_file_named() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let cert = lab.dir().join("own-cert.pem");
    let key = lab.dir().join("own-key.pem");
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nnot base64!\n").expect("cert");
    std::fs::write(&key, "").expect("key");
    let conf = lab.dir().join("netperfd.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"0.0.0.0:443\"\ndata_dir = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\niperf3_ports = []\n",
            data.display(),
            cert.display(),
            key.display()
        ),
    )
    .expect("config");
    let conf_s = conf.display().to_string();
    let d = lab.spawn(&board, "daemon", bin(), &["daemon", "--config", &conf_s]);
    let rc = lab.wait(d, std::time::Duration::from_secs(20));
    let (_, err) = lab.output("daemon");
    assert_eq!(rc, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the certificate {} is not valid PEM",
            cert.display()
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Attacker tryout: an encrypted own key gave a confusing error. The daemon stops at start
/// with a clear one naming the file, without a panic.
#[test]
fn an_encrypted_own_key_stops_the_daemon_with_a_clear_error() {
    // An EC P-256 key encrypted by `openssl pkcs8 -topk8 -v2 aes-128-cbc`.
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhUeWezCXzwVAICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEAQIEEJj6v0PyYFJHZeXKpi7hq6QEgZBT
MG6mu2pKi63wA/Foa0EXmrOiGcm4LwB+T4cABzK9A5lY7l8OIBFfrzOx1Z40VzgG
p3iLgvyuVB9T7YoM3DecsBo3Usxj2Z2i6hQwiwWL/9QIrBts+tPq/gK7iALY/9QN
nBu2WltBa/HNeKMpeheI5AOL75oyiB1Sw640RBGJs8ks6gm8ICxHRQ3JPFBweMY=
-----END ENCRYPTED PRIVATE KEY-----
";
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let p = rcgen::CertificateParams::new(vec![BOARD_IP.to_string()]).expect("params");
    let cert = p.self_signed(&key).expect("cert");
    let (c, k) = (
        lab.dir().join("own-cert.pem"),
        lab.dir().join("own-key.pem"),
    );
    std::fs::write(&c, cert.pem()).expect("write");
    std::fs::write(&k, ENCRYPTED).expect("write");
    let conf = lab.dir().join("netperfd.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"0.0.0.0:443\"\ndata_dir = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\niperf3_ports = []\n",
            lab.dir().join("data").display(),
            c.display(),
            k.display()
        ),
    )
    .expect("config");
    let conf_s = conf.display().to_string();
    let d = lab.spawn(&board, "daemon", bin(), &["daemon", "--config", &conf_s]);
    let rc = lab.wait(d, std::time::Duration::from_secs(20));
    let (_, err) = lab.output("daemon");
    assert_eq!(rc, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the key {} is encrypted (ENCRYPTED PRIVATE KEY): give an unencrypted PEM key",
            k.display()
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Start the daemon in the board namespace on 0.0.0.0:443 with `extra` config lines; its
/// index and the fingerprint it logged.
fn start_https(lab: &mut Lab, name: &str, extra: &str) -> (usize, String) {
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let conf = lab.dir().join(format!("{name}.toml"));
    std::fs::write(
        &conf,
        format!(
            "listen = \"0.0.0.0:443\"\ndata_dir = \"{}\"\niperf3_ports = []\n{extra}",
            data.display()
        ),
    )
    .expect("config");
    let conf_s = conf.display().to_string();
    let d = lab.spawn(&board, name, bin(), &["daemon", "--config", &conf_s]);
    lab.wait_port(&board, BOARD_IP, 443);
    let (_, log) = lab.output(name);
    (d, logged_fingerprint(&log))
}

/// How many of `conns` the board still holds open (a read that would block: open; end of
/// stream or a reset: closed).
fn still_open(conns: &[std::net::TcpStream]) -> usize {
    conns
        .iter()
        .filter(|c| {
            c.set_nonblocking(true).expect("nonblocking");
            matches!(c.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count()
}

/// The attacker tryout of issue 41: one address holding 3,000 silent TCP connections to 443
/// made the page unreachable for everyone (1,500 cost 3–5 s a request), because the
/// per-address cap counted only finished handshakes. Now each accepted connection counts
/// before its handshake: the board keeps at most 128 from one address (the rest are closed at
/// once), closes the silent ones after the 3 s handshake timeout, and another client gets its
/// page at once.
#[test]
fn silent_connections_from_one_address_do_not_starve_another() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (_d, fp) = start_https(&mut lab, "daemon", "");
    let t0 = std::time::Instant::now();
    let conns = in_ns(&pc1, || {
        (0..1500)
            .filter_map(|_| std::net::TcpStream::connect((BOARD_IP, 443)).ok())
            .collect::<Vec<_>>()
    });
    eprintln!("{} silent connections in {:?}", conns.len(), t0.elapsed());
    assert!(conns.len() >= 1400, "{}", conns.len());
    // Another address (the board's own, from its namespace) gets the setup page at once.
    let mut worst = std::time::Duration::ZERO;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let r = https(&board, BOARD_IP, 443, &fp, get("/setup")).expect("HTTPS");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        worst = worst.max(t.elapsed());
    }
    eprintln!("setup page from another address: at worst {worst:?}");
    assert!(worst < std::time::Duration::from_millis(1500), "{worst:?}");
    // The board holds at most the per-address cap of them (128) …
    let open = still_open(&conns);
    eprintln!(
        "held open by the board {:?} after the connects: {open}",
        t0.elapsed()
    );
    assert!(t0.elapsed() < std::time::Duration::from_millis(2900));
    assert!((100..=128).contains(&open), "{open}");
    // … and closes those too when their handshake has not come within 3 s (a duration: the
    // deadline is what is checked).
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert_eq!(still_open(&conns), 0);
    // And the address may connect again.
    let r = https(&pc1, BOARD_IP, 443, &fp, get("/setup")).expect("HTTPS from pc1 again");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

/// The attacker tryout: an expired certificate of the admin's own was served without a word.
/// It is still served (there may be no other), with a warning in the log at start and on
/// the Settings page.
#[test]
fn an_expired_own_certificate_is_warned_about_in_the_log_and_on_settings() {
    own_certificate_warned_about(
        (2020, 1, 1),
        (2024, 6, 30),
        &["expired on 2024-06-30 00:00 UTC"],
    );
}

/// The attacker tryout: a certificate not valid yet (notBefore later than the board's clock)
/// was served without a word; warned about as an expired one.
#[test]
fn an_own_certificate_not_valid_yet_is_warned_about_in_the_log_and_on_settings() {
    own_certificate_warned_about(
        (2090, 3, 1),
        (2095, 1, 1),
        &[
            "is not valid yet (from 2090-03-01 00:00 UTC; the board",
            "browsers refuse it until then",
        ],
    );
}

/// The daemon with an own certificate valid from `from` to `to` (y, m, d): served, and the
/// log at start and the Settings page both hold the warning's parts `want`.
fn own_certificate_warned_about(from: (i32, u8, u8), to: (i32, u8, u8), want: &[&str]) {
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut p = rcgen::CertificateParams::new(vec![BOARD_IP.to_string()]).expect("params");
    p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
    p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
    let cert = p.self_signed(&key).expect("cert");
    let (c, k) = (
        lab.dir().join("own-cert.pem"),
        lab.dir().join("own-key.pem"),
    );
    std::fs::write(&c, cert.pem()).expect("write");
    std::fs::write(&k, key.serialize_pem()).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let extra = format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n",
        c.display(),
        k.display()
    );
    let (_d, fp) = start_https(&mut lab, "daemon", &extra);
    assert_eq!(fp, colon_hex(cert.der()), "the own certificate is served");
    let (_, log) = lab.output("daemon");
    let named = format!("the web UI's certificate {}", c.display());
    assert!(
        log.contains(&named) && want.iter().all(|w| log.contains(w)),
        "{log}"
    );
    let code = common::http::setup_code(&log);
    let body = format!("code={code}&password=correct+horse&confirm=correct+horse");
    let r = https(&pc1, BOARD_IP, 443, &fp, post("/setup", &body)).expect("setup");
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let cookie = header(&r, "set-cookie")[0]
        .split(';')
        .next()
        .unwrap_or("")
        .to_string();
    let r = https(
        &pc1,
        BOARD_IP,
        443,
        &fp,
        format!(
            "GET /settings HTTP/1.1\r\nHost: {BOARD_IP}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
        ),
    )
    .expect("settings");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let shown = r
        .split("id=\"tls-validity\">")
        .nth(1)
        .and_then(|t| t.split("</p>").next())
        .unwrap_or_else(|| panic!("no validity warning on Settings: {r}"));
    assert!(want.iter().all(|w| shown.contains(w)), "{shown}");
}
