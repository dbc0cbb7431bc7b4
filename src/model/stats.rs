//! Order statistics shared by the kinds that summarise samples (latency probes, one-way
//! delays, RFC 2544 latency trials).

/// The finite values of `v`, sorted ascending: what [`percentile`] takes.
pub(crate) fn sorted_finite(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    super::order::sort_by(&mut s, f64::total_cmp);
    s
}

/// Nearest-rank percentile `p` (0..=100) of sorted `v`; `None` when `v` is empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::{percentile, sorted_finite};

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(5.0));
        assert_eq!(percentile(&v, 99.0), Some(10.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(
            sorted_finite(&[3.0, f64::NAN, 1.0, f64::INFINITY]),
            vec![1.0, 3.0]
        );
    }
}
