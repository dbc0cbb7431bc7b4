//! Results: what a stored run means — the ceiling and verdict (`analysis`), result tables and
//! comparisons (`compare`), where a run's lost datagrams went (`ledger`), chart series (`charts`) and exports (`export`: CSV, iperf3 JSON),
//! with the pages' unit style of `model::display`, notes on suites compared that were not run
//! alike (`suite_notes`); PASS / FAIL of suite runs against their
//! thresholds (`verdict`) and their JUnit / LAVA forms (`farm`). Reads the store; never measures or renders HTML.

pub mod analysis;
pub mod charts;
pub mod compare;
pub mod export;
pub mod farm;
pub mod figures;
pub mod forward_params;
pub mod forward_summary;
pub mod json;
pub mod latency;
pub mod ledger;
pub mod multi_summary;
pub mod owd;
pub mod rfc2544;
pub mod rfc2544_params;
pub mod rfc2544_summary;
pub mod shaper;
pub mod shortfall;
pub mod suite_notes;
pub mod suite_table;
pub mod text;
pub mod verdict;
pub mod view;
