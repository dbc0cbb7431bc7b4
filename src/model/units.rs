//! Units as people read them: bitrates and byte counts in iperf3's style ("941 Mbits/sec",
//! "1.10 GBytes": binary multiples for bytes, decimal for bits, as iperf3 prints them). Parsing of suffixed numbers is in `engine::report::parse_suffixed`.

/// A bitrate as iperf3 prints it: "941 Mbits/sec".
pub fn fmt_rate(bps: f64) -> String {
    format!("{}s/sec", unit_format(bps / 8.0, true).trim())
}

/// A byte count as iperf3 prints it: "1.10 GBytes".
pub fn fmt_bytes(b: f64) -> String {
    format!("{}s", unit_format(b, false).trim())
}

/// iperf3's `unit_snprintf` with adaptive units: bytes in powers of 1024 (`KBytes`…),
/// bits in powers of 1000 (`Kbits`…), always 4 significant places. `bits` selects bits
/// (the value is still given in bytes, as iperf3 does, and multiplied by 8).
pub fn unit_format(value_bytes: f64, bits: bool) -> String {
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
