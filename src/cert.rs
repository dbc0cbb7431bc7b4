//! The TLS identity of a listener (issue 41): a certificate and key made at first start and
//! kept in a directory, or an admin's own PEM files, and the certificate's SHA-256
//! fingerprint. The board's web UI (`web::tls`) and the peer agent (`peer::agent`) both serve
//! with it; the board's peer client pins an agent's certificate by [`fingerprint`].
//!
//! * [`generated`]: the pair kept in a directory ([`CERT_FILE`], [`KEY_FILE`] with mode
//!   0600), made there at first start ([`make`]: ECDSA P-256, self-signed, the host's names
//!   and addresses and localhost as its names, valid 1970–2099 whatever the clock says) and
//!   reused on every later start; [`load`]: an admin's own files.
//! * [`Identity::fingerprint`] (what browsers show, `AB:CD:…`) and the public key's pin
//!   ([`Identity::spki_sha256`]) that `curl --pinnedpubkey` and Chromium's
//!   `--ignore-certificate-errors-spki-list` take.
//!
//! Not for: the listeners (`web::tls`, `peer::agent`) or what the pages show (`web::tls`).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The generated certificate's file in the data directory (PEM).
pub(crate) const CERT_FILE: &str = "tls-cert.pem";
/// The generated private key's file in the data directory (PEM, PKCS#8, mode 0600).
pub(crate) const KEY_FILE: &str = "tls-key.pem";

/// A certificate and key ready for a TLS listener (the web UI's, the peer agent's).
pub struct Identity {
    /// The rustls server configuration (ring provider, TLS 1.2 and 1.3, no client auth).
    pub server: rustls::ServerConfig,
    /// SHA-256 of the certificate (DER): 32 upper-case hex pairs joined by `:`.
    pub fingerprint: String,
    /// SHA-256 of the certificate's public key (SubjectPublicKeyInfo, DER), base64: the pin
    /// of `curl --pinnedpubkey sha256//…` and Chromium's `--ignore-certificate-errors-spki-list`.
    pub spki_sha256: String,
    /// The certificate's PEM file.
    pub cert_path: PathBuf,
    /// True when this start made the certificate (first start, or the stored one was unusable).
    pub made: bool,
    /// The certificate's end of validity (`notAfter`), when it could be read.
    pub not_after: Option<chrono::DateTime<chrono::Utc>>,
    /// The certificate's start of validity (`notBefore`), when it could be read.
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
}

impl Identity {
    /// A warning when the certificate is not valid at `now` ([`validity_warning`]); logged at
    /// start (the Settings page says it at each view).
    pub fn validity_warning(&self, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
        validity_warning(&self.cert_path, self.not_before, self.not_after, now)
    }
}

/// The first year a board's clock can really say: a clock before it was never set (a board
/// without a battery-backed clock starts in 1970 until NTP sets it).
pub(crate) const CLOCK_SET_YEAR: i32 = 2026;

/// A warning when the certificate `path` (validity `not_before`..`not_after`) is not valid at
/// the board's clock `now`: expired (browsers refuse it); or not valid yet, either because the
/// board's clock was never set (year before [`CLOCK_SET_YEAR`]: browsers use their own clock
/// and accept the certificate, the board's clock needs setting) or because it starts later
/// (browsers refuse it until then). `None` when valid or when the dates are unknown.
pub(crate) fn validity_warning(
    path: &Path,
    not_before: Option<chrono::DateTime<chrono::Utc>>,
    not_after: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    use chrono::Datelike;
    let day = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M").to_string();
    if let Some(end) = not_after.filter(|&end| end < now) {
        return Some(format!(
            "the web UI's certificate {} expired on {} UTC: browsers refuse it; renew it (tls_cert, tls_key) or remove both settings to use a certificate the board makes",
            path.display(),
            day(end)
        ));
    }
    let start = not_before.filter(|&start| start > now)?;
    Some(if now.year() < CLOCK_SET_YEAR {
        format!(
            "the board's clock says {} UTC, before the web UI's certificate {} is valid (from {} UTC): the clock looks unset (a board without a battery-backed clock starts in 1970 until NTP sets it); browsers check the certificate with their own clock, but set the board's (NTP, or date -s) so its runs and logs are dated right",
            day(now),
            path.display(),
            day(start)
        )
    } else {
        format!(
            "the web UI's certificate {} is not valid yet (from {} UTC; the board's clock says {} UTC): browsers refuse it until then; use one valid from now (tls_cert, tls_key) or remove both settings to use a certificate the board makes",
            path.display(),
            day(start),
            day(now)
        )
    })
}

/// One DER element at the start of `b`: (tag, contents, the bytes after it). `None` when
/// the lengths do not fit in `b` (definite lengths only, at most 4 length bytes).
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().try_fold(0usize, |a, &x| {
            a.checked_mul(256)?.checked_add(usize::from(x))
        })?;
        (len, &rest[n..])
    };
    if len > rest.len() {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The `notAfter` of an X.509 certificate (DER): Certificate → tbsCertificate → validity.
/// `None` when the DER is not shaped so.
pub(crate) fn not_after(cert: &[u8]) -> Option<chrono::DateTime<chrono::Utc>> {
    validity_time(cert, true)
}

/// The `notBefore` of an X.509 certificate (DER), as [`not_after`].
pub(crate) fn not_before(cert: &[u8]) -> Option<chrono::DateTime<chrono::Utc>> {
    validity_time(cert, false)
}

/// The validity's `notAfter` (`end`) or `notBefore` of a certificate (DER).
fn validity_time(cert: &[u8], end: bool) -> Option<chrono::DateTime<chrono::Utc>> {
    let (0x30, c, _) = der(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = der(c)? else { return None };
    let mut t = tbs;
    // [0] version (optional), serialNumber, signature, issuer, then validity.
    let (tag, _, rest) = der(t)?;
    if tag == 0xa0 {
        t = rest;
    }
    for want in [0x02, 0x30, 0x30] {
        let (tag, _, rest) = der(t)?;
        if tag != want {
            return None;
        }
        t = rest;
    }
    let (0x30, validity, _) = der(t)? else {
        return None;
    };
    let (tag, time, rest) = der(validity)?;
    let (tag, time) = if end {
        let (tag, time, _) = der(rest)?;
        (tag, time)
    } else {
        (tag, time)
    };
    let text = std::str::from_utf8(time).ok()?;
    let full = match tag {
        // UTCTime YYMMDDHHMMSSZ: 50–99 are 19xx (RFC 5280 4.1.2.5.1).
        0x17 if text.len() == 13 => {
            let yy: u32 = text.get(..2)?.parse().ok()?;
            format!("{}{text}", if yy >= 50 { "19" } else { "20" })
        }
        0x18 if text.len() == 15 => text.to_string(),
        _ => return None,
    };
    chrono::NaiveDateTime::parse_from_str(&full, "%Y%m%d%H%M%SZ")
        .ok()
        .map(|t| t.and_utc())
}
/// SHA-256 of `der` as browsers show it: upper-case hex pairs joined by `:` (95 characters).
pub(crate) fn fingerprint(der: &[u8]) -> String {
    let d = Sha256::digest(der);
    let mut s = String::with_capacity(95);
    for (i, b) in d.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// A SHA-256 fingerprint as a user gives it — 32 hex pairs joined by `:` as [`fingerprint`]
/// writes them (what `netperfd peer` and the board print), or the 64 hex digits without
/// colons, either case — in [`fingerprint`]'s form (upper case, colons). Errors: anything
/// else, as a sentence (the text is not echoed when it is long).
pub(crate) fn parse_fingerprint(text: &str) -> Result<String, String> {
    let t = text.trim();
    let hex: String = t.chars().filter(|&c| c != ':').collect();
    let pairs_ok = !t.contains(':') || t.split(':').all(|p| p.len() == 2);
    if hex.len() != 64 || !pairs_ok || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        let shown = if t.chars().count() <= 100 {
            t
        } else {
            "(too long)"
        };
        return Err(format!(
            "'{shown}' is not a SHA-256 fingerprint (32 hex pairs like AB:CD:…, as `netperfd peer` prints it at start)"
        ));
    }
    let up = hex.to_ascii_uppercase();
    let mut s = String::with_capacity(95);
    for (i, pair) in up.as_bytes().chunks(2).enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(std::str::from_utf8(pair).unwrap_or_default());
    }
    Ok(s)
}

/// A warning when the private key `path` can be read by others than its owner (group or
/// world bits). With `fix` (the board's own stored key) and when this process owns the file,
/// its mode is set to 0600 and the warning says so; the admin's own key is only warned about.
pub(crate) fn key_mode(path: &Path, fix: bool) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 == 0 {
        return None;
    }
    // A stored key that is a symbolic link: its target lies elsewhere (maybe outside the data
    // directory) and is not ours to change (set_permissions follows links).
    let linked = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if fix && linked {
        return Some(format!(
            "the TLS private key {} is a symbolic link to a file readable by others (mode {mode:04o}); its mode was left as it is",
            path.display()
        ));
    }
    if fix && meta.uid() == nix::unistd::geteuid().as_raw() {
        return Some(
            match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
                Ok(()) => format!(
                    "the TLS private key {} was readable by others (mode {mode:04o}): set to 0600",
                    path.display()
                ),
                Err(e) => format!(
                    "the TLS private key {} is readable by others (mode {mode:04o}) and cannot be set to 0600: {e}",
                    path.display()
                ),
            },
        );
    }
    Some(format!(
        "the TLS private key {} is readable by others (mode {mode:04o}): chmod 600 it",
        path.display()
    ))
}

/// The subject alternative names of a generated certificate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    /// The hostname (skipped when empty or not a DNS name); `localhost`, 127.0.0.1 and ::1
    /// are always added.
    pub host: String,
    /// IP addresses.
    pub addresses: Vec<std::net::IpAddr>,
}

/// Load a certificate chain (`cert`, PEM: the server's certificate first) and its private
/// key (`key`, PEM: PKCS#8, PKCS#1 or SEC1). Errors name the file and what is wrong: not
/// readable, no certificate, no key, an encrypted key, a key that does not belong to the
/// certificate.
pub(crate) fn load(cert: &Path, key: &Path, made: bool) -> Result<Identity, String> {
    let cert_pem = read_pem(cert, "the certificate")?;
    let key_pem = read_pem(key, "the key")?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate {} is not valid PEM: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "the certificate {} holds no PEM CERTIFICATE block",
            cert.display()
        ));
    }
    if let Some(how) = encrypted(&key_pem) {
        return Err(format!(
            "the key {} is encrypted ({how}): give an unencrypted PEM key (`openssl pkey -in {} -out key.pem` asks for the passphrase once; keep the new file mode 0600)",
            key.display(),
            key.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "the key {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
            key.display()
        )
    })?;
    // rustls 0.23.48 marks the ring provider deprecated for want of post-quantum key
    // exchange (X25519MLKEM768, aws-lc-rs only). aws-lc-rs needs cmake and does not build
    // with our cross compilers or rustc 1.85 in Yocto/Buildroot; X25519 and P-256 (ECDHE)
    // remain. docs/build-settings.md.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let fp = fingerprint(chain[0].as_ref());
    let end = not_after(chain[0].as_ref());
    let start = not_before(chain[0].as_ref());
    let certified =
        rustls::sign::CertifiedKey::from_der(chain, private, &provider).map_err(|e| {
            format!(
                "the certificate {} and the key {} cannot serve together: {e}",
                cert.display(),
                key.display()
            )
        })?;
    // from_der checks that the key matches the certificate when it can tell; insist on it.
    certified.keys_match().map_err(|e| {
        format!(
            "the key {} does not belong to the certificate {}: {e}",
            key.display(),
            cert.display()
        )
    })?;
    let spki = certified
        .key
        .public_key()
        .map(|k| base64_sha256(k.as_ref()))
        .ok_or_else(|| format!("the key {} has no public key to pin", key.display()))?;
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    Ok(Identity {
        server,
        fingerprint: fp,
        spki_sha256: spki,
        cert_path: cert.to_path_buf(),
        made,
        not_after: end,
        not_before: start,
    })
}

/// How the PEM key `pem` is encrypted, when it is: a PKCS#8 `ENCRYPTED PRIVATE KEY` block, or
/// OpenSSL's legacy `Proc-Type: 4,ENCRYPTED` header in an RSA or EC key block. rustls reads
/// neither (it took such a file for one without a key).
fn encrypted(pem: &[u8]) -> Option<&'static str> {
    pem.split(|&b| b == b'\n').find_map(|line| {
        let line = line.trim_ascii();
        if line == b"-----BEGIN ENCRYPTED PRIVATE KEY-----" {
            Some("ENCRYPTED PRIVATE KEY")
        } else if line.starts_with(b"Proc-Type:") && line.ends_with(b"ENCRYPTED") {
            Some("Proc-Type: 4,ENCRYPTED")
        } else {
            None
        }
    })
}

/// The largest certificate or key file read: 1 MiB (a chain of a few certificates is a few KB).
pub(crate) const MAX_PEM_BYTES: u64 = 1 << 20;

/// Read a PEM file (`what`: "the certificate", "the key"): a regular file of at most
/// [`MAX_PEM_BYTES`]. Opened without blocking (a FIFO cannot hang the start), checked after the
/// open (no race with a swapped path), read at most one byte past the cap (`/dev/zero`,
/// `/dev/urandom` are refused before any read). Errors name the file.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("cannot read {what} {}: {e}", path.display());
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(err)?;
    let meta = f.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(format!(
            "cannot read {what} {}: not a regular file (a PEM file is expected)",
            path.display()
        ));
    }
    let too_big = |n: u64| {
        format!(
            "cannot read {what} {}: {n} bytes or more, larger than a PEM file can be ({MAX_PEM_BYTES} bytes at most)",
            path.display()
        )
    };
    if meta.len() > MAX_PEM_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut buf = Vec::new();
    f.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(err)?;
    if buf.len() as u64 > MAX_PEM_BYTES {
        return Err(too_big(buf.len() as u64));
    }
    Ok(buf)
}

fn base64_sha256(der: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(der))
}

/// The certificate kept in `dir` ([`CERT_FILE`], [`KEY_FILE`]), made there first when there
/// is none (or the stored pair cannot be used: logged, and a new pair replaces it).
/// Errors: the directory cannot be written.
pub(crate) fn generated(dir: &Path, names: &Names) -> Result<Identity, String> {
    let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    if cert.exists() || key.exists() {
        match load(&cert, &key, false) {
            Ok(id) => {
                if let Some(w) = key_mode(&key, true) {
                    tracing::warn!("{w}");
                }
                return Ok(id);
            }
            Err(e) => tracing::warn!("{e}: making a new certificate"),
        }
    }
    let (cert_pem, key_pem) = make(names)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    write_file(&key, key_pem.as_bytes(), 0o600)?;
    write_file(&cert, cert_pem.as_bytes(), 0o644)?;
    load(&cert, &key, true)
}

/// A new self-signed certificate for `names`: (certificate PEM, PKCS#8 key PEM).
pub(crate) fn make(names: &Names) -> Result<(String, String), String> {
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
    };
    let err = |e: rcgen::Error| format!("cannot make a TLS certificate: {e}");
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(err)?;
    let mut p = CertificateParams::default();
    let host = names.host.as_str();
    let dns_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    let mut sans = Vec::new();
    if dns_ok {
        if let Ok(n) = host.to_string().try_into() {
            sans.push(SanType::DnsName(n));
        }
    }
    if host != "localhost" {
        if let Ok(n) = "localhost".to_string().try_into() {
            sans.push(SanType::DnsName(n));
        }
    }
    sans.extend(names.addresses.iter().map(|a| SanType::IpAddress(*a)));
    // On the board itself and through an SSH tunnel (`curl --cacert` on loopback).
    for lo in [
        std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::Ipv6Addr::LOCALHOST.into(),
    ] {
        if !names.addresses.contains(&lo) {
            sans.push(SanType::IpAddress(lo));
        }
    }
    p.subject_alt_names = sans;
    let cn = if dns_ok {
        format!("netperfd {host}")
    } else {
        "netperfd".to_string()
    };
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "netperfd");
    // Fixed dates, never the board's clock: a board without a battery-backed clock makes its
    // certificate at 1970 (before NTP sets the clock), and browsers check it against their
    // own clock. From the Unix epoch (no Linux clock says earlier, so the board never finds
    // its own certificate "not yet valid"; also before 2019-07-01, so Apple's 825-day limit
    // for certificates issued after that day does not apply) to the end of 2099. rcgen's
    // default would be 1975-01-01 to 4096-01-01. docs/guide/https.md.
    p.not_before = rcgen::date_time_ymd(1970, 1, 1);
    p.not_after = rcgen::date_time_ymd(2099, 12, 31);
    // A random positive serial: browsers refuse two certificates with one issuer and serial
    // (a board that made a new one, a second board of the same hostname).
    let mut serial = [0u8; 16];
    getrandom::getrandom(&mut serial).map_err(|e| format!("no random numbers: {e}"))?;
    serial[0] &= 0x7f;
    p.serial_number = Some(serial.to_vec().into());
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = p.self_signed(&key).map_err(err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Write `bytes` to `path` with `mode` through a temporary file renamed over it (a crash
/// leaves the old file or the new one, never half of one).
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("pem.tmp");
    let _ = std::fs::remove_file(&tmp);
    let res = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// For tests: a self-signed P-256 certificate for "board" valid from `from` to `to` (year,
/// month, day) and its key, written to `dir` as `c.pem` and `k.pem`; (cert path, key path).
#[cfg(test)]
pub(crate) fn self_signed_files(
    dir: &Path,
    from: (i32, u8, u8),
    to: (i32, u8, u8),
) -> (PathBuf, PathBuf) {
    use rcgen::{CertificateParams, KeyPair};
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut p = CertificateParams::new(vec!["board".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
    p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
    let cert = p.self_signed(&key).unwrap();
    let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names {
            host: "board-7".into(),
            addresses: vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()],
        }
    }

    /// The certificate's names and key as an independent parser reads them (webpki).
    fn verify_names(pem: &str, name: &str) -> bool {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let cert = rustls::server::ParsedCertificate::try_from(&der);
        assert!(cert.is_ok());
        let sn = rustls::pki_types::ServerName::try_from(name).unwrap();
        rustls::client::verify_server_name(&cert.unwrap(), &sn).is_ok()
    }

    #[test]
    fn fingerprint_is_sha256_in_colon_hex() {
        // sha256("abc") = ba7816bf 8f01cfea 414140de 5dae2223 b00361a3 96177a9c b410ff61 f20015ad
        let f = fingerprint(b"abc");
        assert_eq!(f.len(), 95);
        assert!(f.starts_with("BA:78:16:BF:8F:01:CF:EA"));
        assert!(f.ends_with("F2:00:15:AD"));
    }

    #[test]
    fn fingerprints_are_read_with_or_without_colons_in_either_case() {
        let f = fingerprint(b"abc");
        assert_eq!(parse_fingerprint(&f).unwrap(), f);
        assert_eq!(parse_fingerprint(&f.to_lowercase()).unwrap(), f);
        assert_eq!(parse_fingerprint(&f.replace(':', "")).unwrap(), f);
        assert_eq!(parse_fingerprint(&format!("  {f}\n")).unwrap(), f);
        for bad in [
            "",
            "AB:CD",
            &f[..f.len() - 3],
            &format!("{f}:00"),
            &f.replace("BA:78", "BA7:8"),
            &f.replace("BA", "ZZ"),
            &"A".repeat(500),
        ] {
            let e = parse_fingerprint(bad).unwrap_err();
            assert!(e.contains("is not a SHA-256 fingerprint"), "{bad}: {e}");
            assert!(e.len() < 250, "{e}");
        }
    }

    #[test]
    fn a_generated_certificate_is_p256_with_the_boards_names_and_a_private_key() {
        let dir = tempfile::tempdir().unwrap();
        let id = generated(dir.path(), &names()).unwrap();
        assert!(id.made);
        let cert_pem = std::fs::read_to_string(dir.path().join(CERT_FILE)).unwrap();
        let key_pem = std::fs::read_to_string(dir.path().join(KEY_FILE)).unwrap();
        for n in [
            "board-7",
            "localhost",
            "192.0.2.1",
            "2001:db8::1",
            "127.0.0.1",
            "::1",
        ] {
            assert!(
                verify_names(&cert_pem, n),
                "{n} is a name of the certificate"
            );
        }
        assert!(!verify_names(&cert_pem, "192.0.2.2"));
        // The fingerprint is SHA-256 of the DER in the file, computed here independently.
        let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
        let hex: Vec<String> = Sha256::digest(der.as_ref())
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        assert_eq!(id.fingerprint, hex.join(":"));
        // ECDSA P-256: the key's algorithm OID (id-ecPublicKey + prime256v1) in its PKCS#8.
        let k = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
        let prime256v1 = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
        assert!(k.secret_der().windows(10).any(|w| w == prime256v1));
        assert!(matches!(k, PrivateKeyDer::Pkcs8(_)));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the key is the owner's only");
        assert_eq!(id.spki_sha256.len(), 44, "base64 of 32 bytes");
    }

    #[test]
    fn the_stored_certificate_is_reused_and_a_broken_one_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let first = generated(dir.path(), &names()).unwrap();
        let again = generated(dir.path(), &Names::default()).unwrap();
        assert!(!again.made);
        assert_eq!(again.fingerprint, first.fingerprint, "reused, not remade");
        assert_eq!(again.spki_sha256, first.spki_sha256);
        std::fs::write(dir.path().join(KEY_FILE), "not a key").unwrap();
        let new = generated(dir.path(), &names()).unwrap();
        assert!(new.made);
        assert_ne!(new.fingerprint, first.fingerprint);
        assert_eq!(
            generated(dir.path(), &names()).unwrap().fingerprint,
            new.fingerprint
        );
        assert!(!dir.path().join("tls-key.pem.tmp").exists());
    }

    #[test]
    fn own_files_load_and_bad_ones_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        let (cert, key) = make(&names()).unwrap();
        let (other_cert, other_key) = make(&names()).unwrap();
        std::fs::write(p("c.pem"), &cert).unwrap();
        std::fs::write(p("k.pem"), &key).unwrap();
        let id = load(&p("c.pem"), &p("k.pem"), false).unwrap();
        let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        assert_eq!(id.fingerprint, fingerprint(der.as_ref()));
        assert_eq!(id.cert_path, p("c.pem"));
        // A SEC1 key ("EC PRIVATE KEY") of an admin's own is accepted too: same key, other
        // encoding, made by rcgen's PKCS#8 → here only checked to be refused when garbled.
        std::fs::write(p("other-k.pem"), &other_key).unwrap();
        std::fs::write(p("other-c.pem"), &other_cert).unwrap();
        std::fs::write(p("empty.pem"), "").unwrap();
        std::fs::write(p("garbage.pem"), "-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
        let cases = [
            ("missing.pem", "k.pem", "cannot read the certificate"),
            ("c.pem", "missing.pem", "cannot read the key"),
            ("empty.pem", "k.pem", "holds no PEM CERTIFICATE block"),
            ("k.pem", "k.pem", "holds no PEM CERTIFICATE block"),
            ("garbage.pem", "k.pem", "is not valid PEM"),
            ("c.pem", "c.pem", "holds no PEM private key"),
            ("c.pem", "empty.pem", "holds no PEM private key"),
            ("c.pem", "other-k.pem", "cannot serve together"),
        ];
        for (c, k, want) in cases {
            let e = load(&p(c), &p(k), false).err().unwrap_or_default();
            assert!(e.contains(want), "{c} + {k}: {e:?} should say {want:?}");
            assert!(
                e.contains(&dir.path().display().to_string()),
                "names the file: {e}"
            );
        }
    }

    /// The attacker tryout: `tls_cert`/`tls_key` (or the stored files) at /dev/zero or
    /// /dev/urandom read until the memory ran out, a FIFO hung the start. Each is a clear error
    /// at once, naming the file, and nothing is read from a device.
    #[test]
    fn devices_fifos_directories_and_huge_files_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = make(&names()).unwrap();
        let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&c, &cert).unwrap();
        std::fs::write(&k, &key).unwrap();
        let fifo = dir.path().join("fifo.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let huge = dir.path().join("huge.pem");
        // A valid certificate followed by padding: only the size can refuse it.
        let mut big = cert.clone().into_bytes();
        big.resize(MAX_PEM_BYTES as usize + 1, b'\n');
        std::fs::write(&huge, &big).unwrap();
        let at_cap = dir.path().join("cap.pem");
        big.truncate(MAX_PEM_BYTES as usize);
        std::fs::write(&at_cap, &big).unwrap();
        assert!(load(&at_cap, &k, false).is_ok(), "1 MiB exactly is read");
        let not_regular = "not a regular file";
        let cases: [(&Path, &Path, &str); 7] = [
            (Path::new("/dev/zero"), &k, not_regular),
            (&c, Path::new("/dev/zero"), not_regular),
            (Path::new("/dev/urandom"), &k, not_regular),
            (&c, Path::new("/dev/urandom"), not_regular),
            (&fifo, &k, not_regular),
            (&c, dir.path(), not_regular),
            (
                &huge,
                &k,
                "larger than a PEM file can be (1048576 bytes at most)",
            ),
        ];
        for (cp, kp, want) in cases {
            let t = std::time::Instant::now();
            let e = load(cp, kp, false).err().unwrap_or_default();
            assert!(t.elapsed() < std::time::Duration::from_secs(2), "{e}");
            assert!(e.contains(want), "{} + {}: {e}", cp.display(), kp.display());
            let named = if e.starts_with("cannot read the key") {
                kp
            } else {
                cp
            };
            assert!(e.contains(&named.display().to_string()), "{e}");
        }
        // The stored pair in the data directory: a device there is replaced, not read.
        let data = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", data.path().join(KEY_FILE)).unwrap();
        std::fs::write(data.path().join(CERT_FILE), &cert).unwrap();
        let id = generated(data.path(), &names()).unwrap();
        assert!(id.made);
        assert!(std::fs::symlink_metadata(data.path().join(KEY_FILE))
            .unwrap()
            .is_file());
    }

    #[test]
    fn a_stored_key_readable_by_others_is_set_back_to_0600_an_own_one_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = generated(dir.path(), &names()).unwrap();
        let key = dir.path().join(KEY_FILE);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = generated(dir.path(), &names()).unwrap();
        assert_eq!(again.fingerprint, first.fingerprint, "the same key, kept");
        assert_eq!(mode(&key), 0o600);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let w = key_mode(&key, false).unwrap_or_default();
        assert!(w.contains("readable by others (mode 0640)"), "{w}");
        assert_eq!(mode(&key), 0o640, "an admin's own key is not changed");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(key_mode(&key, false), None);
        // A stored key that is a link to a file elsewhere: the target's mode is not changed
        // (it followed the link before: attacker tryout 2026-12-07).
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("victim");
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("linked-key.pem");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let w = key_mode(&link, true).unwrap_or_default();
        assert!(w.contains("is a symbolic link"), "{w}");
        assert_eq!(mode(&target), 0o644, "the link's target is left as it is");
    }

    /// An EC P-256 key encrypted by `openssl pkcs8 -topk8 -v2 aes-128-cbc` (passphrase
    /// "netperfd"), and the same kind of key by `openssl ec -aes128` (OpenSSL's legacy header).
    const ENCRYPTED_PKCS8: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhUeWezCXzwVAICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEAQIEEJj6v0PyYFJHZeXKpi7hq6QEgZBT
MG6mu2pKi63wA/Foa0EXmrOiGcm4LwB+T4cABzK9A5lY7l8OIBFfrzOx1Z40VzgG
p3iLgvyuVB9T7YoM3DecsBo3Usxj2Z2i6hQwiwWL/9QIrBts+tPq/gK7iALY/9QN
nBu2WltBa/HNeKMpeheI5AOL75oyiB1Sw640RBGJs8ks6gm8ICxHRQ3JPFBweMY=
-----END ENCRYPTED PRIVATE KEY-----
";
    const ENCRYPTED_LEGACY: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-128-CBC,D30AB71A3E441A5DCD6AC597AAF20651

sR6dq8ZLwJnVelBaEjz5C/xjvqaoU0BcdwmnhM/XTUGNyuTTG6qU0U1oKs6SApwz
c2Mo8oKhOkrpKdg/89bGExvcgN++1QIkYVnzu2mx/nmbmDjd2pLm3pzpRhaE/b50
6fghaRBj79aplF9XO3UWJbQUxQqsON1vUV0Pvo4s8l8=
-----END EC PRIVATE KEY-----
";

    /// Attacker tryout: an encrypted own key gave "holds no PEM private key (…)" (the PKCS#8
    /// one) — it holds one, encrypted. Now a clear error naming it, before any use.
    #[test]
    fn an_encrypted_own_key_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = make(&names()).unwrap();
        let c = dir.path().join("c.pem");
        std::fs::write(&c, cert).unwrap();
        for (file, pem, how) in [
            ("k8.pem", ENCRYPTED_PKCS8, "ENCRYPTED PRIVATE KEY"),
            ("kl.pem", ENCRYPTED_LEGACY, "Proc-Type: 4,ENCRYPTED"),
        ] {
            let k = dir.path().join(file);
            std::fs::write(&k, pem).unwrap();
            // rustls alone: "no items found" (PKCS#8), a base64 error (legacy).
            assert!(PrivateKeyDer::from_pem_slice(pem.as_bytes()).is_err());
            let e = load(&c, &k, false).err().unwrap_or_default();
            assert_eq!(
                e,
                format!(
                    "the key {0} is encrypted ({how}): give an unencrypted PEM key (`openssl pkey -in {0} -out key.pem` asks for the passphrase once; keep the new file mode 0600)",
                    k.display()
                )
            );
        }
        // A plain key with "ENCRYPTED" elsewhere (a comment line) is not taken for one.
        assert_eq!(
            encrypted(b"# not ENCRYPTED\n-----BEGIN PRIVATE KEY-----\n"),
            None
        );
    }

    #[test]
    fn an_expired_certificate_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = self_signed_files(dir.path(), (2020, 1, 1), (2024, 6, 30));
        let id = load(&c, &k, false).unwrap();
        assert_eq!(
            id.not_after.map(|t| t.to_rfc3339()).as_deref(),
            Some("2024-06-30T00:00:00+00:00")
        );
        let w = id.validity_warning(chrono::Utc::now()).unwrap_or_default();
        assert!(
            w.contains("expired on 2024-06-30 00:00 UTC") && w.contains("c.pem"),
            "{w}"
        );
        let before: chrono::DateTime<chrono::Utc> = "2024-06-29T00:00:00Z".parse().unwrap();
        assert_eq!(id.validity_warning(before), None);
        // The board's own: valid to the end of 2099 (GeneralizedTime from 2050 on).
        let own = generated(dir.path(), &names()).unwrap();
        assert_eq!(
            own.not_after.map(|t| t.to_rfc3339()).as_deref(),
            Some("2099-12-31T00:00:00+00:00")
        );
        assert_eq!(own.validity_warning(chrono::Utc::now()), None);
        assert_eq!(not_after(b"\x30\x84\xff\xff\xff\xff"), None);
        assert_eq!(not_after(b""), None);
    }
}
