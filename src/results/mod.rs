//! Results: what a stored run means — the ceiling and verdict (`analysis`), result tables and
//! comparisons (`compare`), where a run's lost datagrams went (`ledger`), chart series (`charts`) and exports (`export`: CSV, iperf3 JSON),
//! with the pages' unit style of `model::display`, notes on suites compared that were not run
//! alike (`suite_notes`); PASS / FAIL of suite runs against their
//! thresholds (`verdict`) and their JUnit / LAVA forms (`farm`). Reads the store; never measures or renders HTML.

pub(crate) mod analysis;
pub(crate) mod asked;
pub(crate) mod charts;
pub(crate) mod compare;
pub(crate) mod export;
pub(crate) mod farm;
pub(crate) mod figures;
pub(crate) mod forward_params;
pub(crate) mod forward_summary;
pub(crate) mod iperf2_summary;
pub(crate) mod json;
pub(crate) mod latency;
pub(crate) mod ledger;
pub(crate) mod multi_summary;
pub(crate) mod owd;
pub(crate) mod rfc2544;
pub(crate) mod rfc2544_params;
pub(crate) mod rfc2544_summary;
pub(crate) mod shaper;
pub(crate) mod shortfall;
pub(crate) mod suite_notes;
pub(crate) mod suite_table;
pub(crate) mod text;
pub(crate) mod traffic_summary;
pub(crate) mod verdict;
pub(crate) mod view;
