//! How every web page, the API's human-readable strings, the run views (`results::view`, also
//! `netperfd runs show`) and the suite/compare/verdict tables write bitrates and sizes: one
//! style, one scale (docs/units.md §5).
//!
//! * Bitrates: always **Mbit/s**, decimal (10^6 bits/s), e.g. "941.5 Mbit/s", "5.25 Mbit/s",
//!   "0.512 Mbit/s", "9,410.0 Mbit/s". One scale for every value, so a column never shows
//!   "1000 Mbit/s" beside "1.00 Gbit/s".
//! * Sizes: always **MB**, decimal (10^6 bytes), e.g. a 100M payload (100 000 000 bytes) is
//!   "100.0 MB", a 1 GiB transfer "1,073.7 MB", a 300 KiB window "0.307 MB".
//! * Thousands are grouped with a comma ("1,957.3 Mbit/s"), as a reader compares 10 GbE
//!   figures (issue 22 item 11).
//!
//! Precision: 1 decimal from 10 units up, 2 from 1, 3 below 1 (about 3–4 significant digits,
//! like iperf3). Negative, NaN and infinite inputs show as 0.
//!
//! Not for the iperf3/iperf 2-compatible text output of the CLI client and server, which keeps
//! stock iperf3's adaptive "Mbits/sec"/"MBytes" (`model::units::unit_format`). The pages'
//! scripts mirror this module in `static/units.js`.

/// Bits/s → "941.5 Mbit/s" (decimal megabits per second, one scale for every value).
pub(crate) fn rate(bps: f64) -> String {
    format!("{} Mbit/s", scaled(bps / 1e6))
}

/// Bytes → "100.0 MB" (decimal megabytes, 10^6 bytes, one scale for every value).
pub(crate) fn size(bytes: f64) -> String {
    format!("{} MB", scaled(bytes / 1e6))
}

/// `v` with 1 decimal from 10 up, 2 from 1, else 3; not finite or negative → "0.000".
fn scaled(v: f64) -> String {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    if v >= 9.995 {
        group(&format!("{v:.1}"))
    } else if v >= 0.9995 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A count with its thousands grouped: 12345 → "12,345".
pub(crate) fn count(n: u64) -> String {
    group(&n.to_string())
}

/// A change in ms with its sign and 1 decimal: +12.3 ms, -0.4 ms; a change that rounds to
/// zero is "±0.0 ms" (never "-0.0 ms", which reads as a drop).
pub(crate) fn delta_ms(v: f64) -> String {
    if !v.is_finite() || v.abs() < 0.05 {
        "±0.0 ms".into()
    } else {
        format!("{v:+.1} ms")
    }
}

/// Text a peer sent, as the board keeps and shows it: control characters (ESC, newlines) as
/// spaces; invisible format characters that reorder or hide text (bidi overrides U+202A–
/// U+202E and U+2066–U+2069, zero-width U+200B–U+200F, line/paragraph separators U+2028/
/// U+2029, soft hyphen U+00AD, BOM U+FEFF) dropped; at most `max` characters, then "…".
pub(crate) fn peer_text(s: &str, max: usize) -> String {
    let hidden = |c: char| {
        matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}' | '\u{00AD}' | '\u{FEFF}')
    };
    let mut kept = s
        .chars()
        .filter(|c| !hidden(*c))
        .map(|c| if c.is_control() { ' ' } else { c });
    let mut out: String = kept.by_ref().take(max).collect();
    if kept.next().is_some() {
        out.push('…');
    }
    out
}

/// A non-negative figure rounded to a whole number, thousands grouped: 8,523.4 → "8,523" (RPM,
/// frames per second). Not finite or below 0 → "0".
pub(crate) fn whole(v: f64) -> String {
    if v.is_finite() && v > 0.0 {
        group(&format!("{:.0}", v))
    } else {
        "0".into()
    }
}

/// "12345.6" → "12,345.6": a comma between each group of three digits of the whole part.
fn group(s: &str) -> String {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut out = String::with_capacity(s.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_text_is_short_printable_and_in_order() {
        assert_eq!(peer_text("cubic", 32), "cubic");
        assert_eq!(peer_text("a\u{1b}[2Jb\nc", 32), "a [2Jb c");
        assert_eq!(peer_text("ab\u{202E}cd\u{2028}e\u{AD}f", 32), "abcdef");
        assert_eq!(peer_text(&"x".repeat(3000), 120).chars().count(), 121);
        assert!(peer_text(&"x".repeat(3000), 120).ends_with('…'));
        assert_eq!(peer_text(&"x".repeat(120), 120), "x".repeat(120));
    }

    #[test]
    fn deltas_never_read_minus_zero() {
        assert_eq!(delta_ms(-0.04), "±0.0 ms");
        assert_eq!(delta_ms(0.0), "±0.0 ms");
        assert_eq!(delta_ms(-0.4), "-0.4 ms");
        assert_eq!(delta_ms(82.94), "+82.9 ms");
    }

    #[test]
    fn whole_numbers_are_grouped() {
        assert_eq!(whole(8_523.4), "8,523");
        assert_eq!(whole(85_716.0), "85,716");
        assert_eq!(whole(999.5), "1,000");
        assert_eq!(whole(-3.0), "0");
        assert_eq!(whole(f64::NAN), "0");
    }

    #[test]
    fn rates_in_mbit_per_second_one_scale() {
        // 1 GbE TCP/IPv4 ceiling with timestamps (docs/units.md, results::analysis).
        assert_eq!(rate(941_480_000.0), "941.5 Mbit/s");
        assert_eq!(rate(941_500_000.0), "941.5 Mbit/s");
        // No switch to Gbit/s: 1 Gbit/s and 10 GbE stay in Mbit/s.
        assert_eq!(rate(1_000_000_000.0), "1,000.0 Mbit/s");
        assert_eq!(rate(9_414_800_000.0), "9,414.8 Mbit/s");
        // Thousands grouped (issue 22 item 11): the http-serve sum of 1,957 Mbit/s.
        assert_eq!(rate(1_957_300_000.0), "1,957.3 Mbit/s");
        assert_eq!(rate(999_940_000.0), "999.9 Mbit/s");
        assert_eq!(rate(999_960_000.0), "1,000.0 Mbit/s");
        assert_eq!(rate(1e15), "1,000,000,000.0 Mbit/s");
        assert_eq!(rate(5_250_000.0), "5.25 Mbit/s");
        // iperf3's UDP default, 1 048 576 bits/s.
        assert_eq!(rate(1_048_576.0), "1.05 Mbit/s");
        assert_eq!(rate(512_000.0), "0.512 Mbit/s");
        assert_eq!(rate(9_999_000.0), "10.0 Mbit/s");
        assert_eq!(rate(0.0), "0.000 Mbit/s");
        assert_eq!(rate(f64::NAN), "0.000 Mbit/s");
        assert_eq!(rate(-3.0), "0.000 Mbit/s");
    }

    #[test]
    fn sizes_in_decimal_megabytes_one_scale() {
        // /payload/100M is 100 000 000 bytes: 100 MB, not iperf3's "95.4 MBytes".
        assert_eq!(size(100_000_000.0), "100.0 MB");
        // iperf3 -n 10M is 10 485 760 bytes.
        assert_eq!(size(10_485_760.0), "10.5 MB");
        assert_eq!(size(1_073_741_824.0), "1,073.7 MB");
        assert_eq!(size(100_000_000_000.0), "100,000.0 MB");
        assert_eq!(size(1_234_567.0), "1.23 MB");
        // A 300 KiB window (-w 300K).
        assert_eq!(size(307_200.0), "0.307 MB");
        assert_eq!(size(0.0), "0.000 MB");
    }
}
