//! The shortfall of a stored run (target / sent / received from its figures), with the rule
//! of [`crate::engine::shortfall`].

use crate::engine::shortfall::RateCheck;
use crate::store::RunRow;

/// The rate asked for by a stored run, bits/s (all streams): iperf3 `bandwidth` × `parallel`,
/// iperf 2 `rate` × `parallel`; `None` when unpaced.
pub fn run_target_bps(run: &RunRow) -> Option<f64> {
    let p = &run.params;
    let per = p
        .get("bandwidth")
        .or_else(|| p.get("rate"))
        .and_then(|v| v.as_u64())
        .filter(|b| *b > 0)?;
    let n = p
        .get("parallel")
        .and_then(|v| v.as_u64())
        .filter(|n| *n > 0)
        .unwrap_or(1);
    Some(per as f64 * n as f64)
}

/// The rate check of a stored run from its figures (sender and receiver bits/s of the main
/// leg). `None` when the run was not paced or has no sender figure.
pub fn for_run(run: &RunRow) -> Option<RateCheck> {
    let target = run_target_bps(run)?;
    RateCheck::new(target, run.sender_bps?, run.receiver_bps)
}
