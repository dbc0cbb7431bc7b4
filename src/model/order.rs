//! Stable sorting through one shared copy of std's sort.
//!
//! `slice::sort_by` is compiled again for every element type and every comparison closure: with
//! `opt-level = "z"` each call site costs 2–4 KB of code (std's driftsort, its small-sort and
//! merge steps). Before these functions the aarch64 release binary held 114 KB of sort code
//! (x86_64: 39 copies of the stable sort, 166 KB); with them 61 KB, the rest being the
//! dependencies' own sorts. Here the comparison goes through `&mut dyn FnMut` on a permutation
//! of indices, so
//! the sort itself exists once, and each call site adds only the loop that applies the
//! permutation. The result is exactly `slice::sort_by`'s: stable, `O(n log n)` comparisons, one
//! `Vec<usize>` of `n` entries allocated. For the short lists the board and the pages sort
//! (ports, addresses, runs, samples of one run), the extra indirection costs nothing visible;
//! the engine's per-packet paths do not sort. Measured in docs/build-settings.md.

use std::cmp::Ordering;

/// Sort `v` in place by `cmp`, stably (equal elements keep their order), as `slice::sort_by`.
pub fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut perm: Vec<usize> = (0..v.len()).collect();
    {
        let v = &*v;
        sort_indices(&mut perm, &mut |a, b| cmp(&v[a], &v[b]));
    }
    permute(v, perm);
}

/// Sort `v` in place by the key `key` gives each element, stably, as `slice::sort_by_key`
/// (the key is computed again for each comparison).
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)))
}

/// Sort `v` in place in ascending order, stably, as `slice::sort`.
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp)
}

/// The one copy of std's stable sort: indices ordered by `cmp`.
#[inline(never)]
fn sort_indices(perm: &mut [usize], cmp: &mut dyn FnMut(usize, usize) -> Ordering) {
    #[allow(clippy::disallowed_methods)] // the one shared copy itself
    perm.sort_by(|&a, &b| cmp(a, b));
}

/// Reorder `v` so that element `i` becomes the one at `perm[i]`, following each cycle of the
/// permutation with swaps (`perm` must hold each index below `v.len()` once).
fn permute<T>(v: &mut [T], mut perm: Vec<usize>) {
    for start in 0..v.len() {
        let mut j = start;
        // perm[j] == j marks a place already final (or a one-element cycle).
        while perm[j] != j {
            let k = perm[j];
            perm[j] = j;
            if k == start {
                break;
            }
            v.swap(j, k);
            j = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random numbers (xorshift), so a failure can be replayed.
    fn numbers(n: usize, seed: u64, modulo: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % modulo
            })
            .collect()
    }

    #[test]
    fn sorts_as_std_does_at_every_length() {
        for n in 0..200 {
            let v = numbers(n, 0x9E37_79B9_7F4A_7C15 ^ n as u64, 1000);
            let mut ours = v.clone();
            let mut std_sorted = v.clone();
            sort(&mut ours);
            #[allow(clippy::disallowed_methods)] // std's sort is the reference here
            std_sorted.sort();
            assert_eq!(ours, std_sorted, "n = {n}");
        }
    }

    #[test]
    fn equal_keys_keep_their_order() {
        // Pairs (key, position): many equal keys, so only a stable sort keeps positions rising.
        let keys = numbers(500, 42, 7);
        let mut v: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        let mut want = v.clone();
        #[allow(clippy::disallowed_methods)] // std's sort is the reference here
        want.sort_by_key(|p| p.0);
        sort_by_key(&mut v, |p| p.0);
        assert_eq!(v, want);
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0 || w[0].1 < w[1].1));
        assert_eq!(v.first(), Some(&(0, want[0].1)));
    }

    #[test]
    fn sorts_by_a_comparison_and_moves_owned_values() {
        let mut v = vec![
            "eth10".to_string(),
            "eth1".into(),
            "lo".into(),
            "br0".into(),
        ];
        sort_by(&mut v, |a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        assert_eq!(v, ["eth10", "eth1", "br0", "lo"]);
        let mut f = vec![3.5, -1.0, f64::INFINITY, 0.0, -0.0];
        sort_by(&mut f, f64::total_cmp);
        assert_eq!(f[0], -1.0);
        assert!(f[1].is_sign_negative() && f[1] == 0.0);
        assert_eq!(&f[2..], &[0.0, 3.5, f64::INFINITY]);
    }
}
