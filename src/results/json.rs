//! Reading back the JSON the runs store: helpers for the summary structs' serde.

use serde::{Deserialize, Deserializer};

/// A float as serde_json writes it: a number, or `null` for NaN or an infinity (JSON has no
/// such numbers). Read as NaN, so a stored summary holding one still reads (and writes back
/// the same `null`). For `#[serde(deserialize_with = "…")]` on an `f64` field.
pub(crate) fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}
