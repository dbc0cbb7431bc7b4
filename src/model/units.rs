//! Units as people read and type them (conventions: docs/units.md): formatting in iperf3's
//! style for the iperf3/iperf 2-compatible text output ("941 Mbits/sec", "1.10 GBytes": binary
//! multiples for bytes, decimal for bits; pages and netperfd's own tables use
//! [`crate::model::display`] instead); parsing of iperf3-style sizes and rates ([`parse_suffixed`]: sizes
//! 1024-based, rates 1000-based, as stock iperf3) and of HTTP payload sizes ([`parse_size`]:
//! K/M/G/T decimal, Ki/Mi/Gi/Ti binary, as download sizes are quoted).

/// iperf3's `unit_snprintf` with adaptive units: bytes in powers of 1024 (`KBytes`…),
/// bits in powers of 1000 (`Kbits`…), always 4 significant places. `bits` selects bits
/// (the value is still given in bytes, as iperf3 does, and multiplied by 8).
pub(crate) fn unit_format(value_bytes: f64, bits: bool) -> String {
    let labels_byte = ["Byte", "KByte", "MByte", "GByte", "TByte"];
    let labels_bit = ["bit", "Kbit", "Mbit", "Gbit", "Tbit"];
    let mut n = if value_bytes.is_finite() {
        value_bytes.max(0.0)
    } else {
        0.0
    };
    let base = if bits {
        n *= 8.0;
        1000.0
    } else {
        1024.0
    };
    let mut conv = 0;
    while n >= base && conv < 4 {
        n /= base;
        conv += 1;
    }
    let label = if bits {
        labels_bit[conv]
    } else {
        labels_byte[conv]
    };
    if n < 9.995 {
        format!("{n:4.2} {label}")
    } else if n < 99.95 {
        format!("{n:4.1} {label}")
    } else {
        format!("{n:4.0} {label}")
    }
}

/// Parse an iperf3-style size or rate: a number with an optional K/M/G/T suffix. Lower and
/// upper case both mean powers of 1024 for sizes (`-n 10M`, `-w 300K`, `-l 8K`) and powers of
/// 1000 for rates (`-b 100M`), as iperf3 does. Fractions are allowed (`1.5G`).
pub fn parse_suffixed(s: &str, rate: bool) -> Result<u64, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty value".into());
    }
    let (digits, mult) = match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let m: f64 = match c.to_ascii_uppercase() {
                'K' => 1e3,
                'M' => 1e6,
                'G' => 1e9,
                'T' => 1e12,
                _ => return Err(format!("'{s}': unknown suffix '{c}' (use K, M, G or T)")),
            };
            let m = if rate {
                m
            } else {
                // 1024-based for sizes.
                match c.to_ascii_uppercase() {
                    'K' => 1024.0,
                    'M' => 1024.0 * 1024.0,
                    'G' => 1024.0 * 1024.0 * 1024.0,
                    _ => 1024.0f64.powi(4),
                }
            };
            (&s[..s.len() - 1], m)
        }
        _ => (s, 1.0),
    };
    let v: f64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a number with an optional K/M/G/T suffix"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}' must be a non-negative number"));
    }
    let r = v * mult;
    if r > u64::MAX as f64 / 2.0 {
        return Err(format!("'{s}' is too large"));
    }
    Ok(r as u64)
}

/// Largest payload the server offers and a size the parsers accept: 100 GB (10^11 bytes).
pub(crate) const MAX_PAYLOAD: u64 = 100_000_000_000;

/// Parse a payload size: a number of bytes with an optional suffix. `K`, `M`, `G`, `T` are
/// decimal (10^3…10^12, as disk and download sizes are quoted: "100M" = 100 000 000 bytes);
/// `Ki`, `Mi`, `Gi`, `Ti` are binary (2^10…2^40); a trailing `B` is allowed ("1GiB", "10GB").
/// Errors: empty, not a whole number of bytes, unknown suffix, 0, or above [`MAX_PAYLOAD`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let u = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (digits, mult): (&str, u64) = if let Some(d) = strip_ci(u, "i") {
        let (d, c) = split_last(d).ok_or_else(|| size_err(s))?;
        let m = match c.to_ascii_uppercase() {
            'K' => 1 << 10,
            'M' => 1 << 20,
            'G' => 1 << 30,
            'T' => 1 << 40,
            _ => return Err(size_err(s)),
        };
        (d, m)
    } else {
        match u.chars().last() {
            Some(c) if c.is_ascii_alphabetic() => {
                let m = match c.to_ascii_uppercase() {
                    'K' => 1_000,
                    'M' => 1_000_000,
                    'G' => 1_000_000_000,
                    'T' => 1_000_000_000_000,
                    _ => return Err(size_err(s)),
                };
                (&u[..u.len() - 1], m)
            }
            _ => (u, 1),
        }
    };
    if digits.is_empty() || digits.len() > 15 {
        return Err(size_err(s));
    }
    // Decimal fractions ("1.5G") are allowed when the result is a whole number of bytes.
    let bytes = match digits.split_once('.') {
        None => {
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(size_err(s));
            }
            digits.parse::<u64>().ok().and_then(|v| v.checked_mul(mult))
        }
        Some((w, f)) => {
            if w.is_empty()
                || f.is_empty()
                || !w.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit())
                || f.len() > 12
            {
                return Err(size_err(s));
            }
            let scale = 10u64.pow(f.len() as u32);
            let whole = w.parse::<u64>().ok().and_then(|v| v.checked_mul(mult));
            let frac = f.parse::<u64>().ok().and_then(|v| v.checked_mul(mult));
            match (whole, frac) {
                (Some(a), Some(b)) if b % scale == 0 => a.checked_add(b / scale),
                (Some(_), Some(_)) => {
                    return Err(format!("size '{s}' is not a whole number of bytes"))
                }
                _ => None,
            }
        }
    };
    match bytes {
        Some(0) => Err(format!("size '{s}' is zero")),
        Some(b) if b <= MAX_PAYLOAD => Ok(b),
        _ => Err(format!(
            "size '{s}' is larger than the limit of {MAX_PAYLOAD} bytes (100G)"
        )),
    }
}

fn split_last(s: &str) -> Option<(&str, char)> {
    let c = s.chars().last()?;
    Some((&s[..s.len() - c.len_utf8()], c))
}

fn size_err(s: &str) -> String {
    format!("invalid size '{s}': use bytes, or a number with K/M/G/T (decimal) or Ki/Mi/Gi/Ti (binary), e.g. 100M, 1G, 10G, 512Mi")
}

fn strip_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let n = suffix.len();
    if s.len() > n
        && s.is_char_boundary(s.len() - n)
        && s[s.len() - n..].eq_ignore_ascii_case(suffix)
    {
        Some(&s[..s.len() - n])
    } else {
        None
    }
}
