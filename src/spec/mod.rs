//! Specs: what a user asks for, typed and validated once at the edge (web form, API body, CLI),
//! before anything runs. `test` is the throughput test (iperf3 / iperf 2) as the web form and the
//! API send it; `suite` the saved suite definitions and their steps; `thresholds` the pass/fail
//! limits of a suite step;
//! `suite_latency` the suite step of kind `latency`.

pub(crate) mod latency;
pub(crate) mod rfc2544;
pub mod schedule;
pub mod suite;
pub(crate) mod suite_latency;
pub(crate) mod test;
pub(crate) mod thresholds;

/// `Err("unknown field `k`, expected one of …")` for the first of `keys` (a JSON request's)
/// not in `fields`: the API refuses a misspelt key rather than run without it.
pub(crate) fn check_keys<'a>(
    keys: impl IntoIterator<Item = &'a String>,
    fields: &[&str],
) -> Result<(), String> {
    match keys.into_iter().find(|k| !fields.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown field `{k}`, expected one of {}",
            fields.join(", ")
        )),
        None => Ok(()),
    }
}
