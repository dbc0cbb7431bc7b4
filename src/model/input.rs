//! Coercions shared by the JSON request types: the web form sends every field as text, while
//! an API client may send a number (`5202` for `"5202"`).

use serde::de::Error;
use serde::{Deserialize, Deserializer};

/// A field given as a number or as text (`5`, `"5"`, `"100M"`), read as text; `null` (or a
/// missing field, with `#[serde(default)]`) as `None`. Use with
/// `#[serde(default, deserialize_with = "crate::model::input::opt_text")]`.
///
/// Errors: any other JSON value ("expected a number or text, got true").
pub(crate) fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        serde_json::Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(D::Error::custom(format!(
            "expected a number or text, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct R {
        #[serde(default, deserialize_with = "super::opt_text")]
        mtu: Option<String>,
    }

    fn read(j: &str) -> Result<Option<String>, String> {
        serde_json::from_str::<R>(j)
            .map(|r| r.mtu)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_and_text_read_as_text_and_nothing_else_is_taken() {
        assert_eq!(read(r#"{"mtu": 1500}"#), Ok(Some("1500".into())));
        assert_eq!(read(r#"{"mtu": "9000"}"#), Ok(Some("9000".into())));
        assert_eq!(read(r#"{"mtu": 1.5}"#), Ok(Some("1.5".into())));
        assert_eq!(read(r#"{"mtu": null}"#), Ok(None));
        assert_eq!(read(r#"{}"#), Ok(None));
        let e = read(r#"{"mtu": true}"#).unwrap_err();
        assert!(e.starts_with("expected a number or text, got true"), "{e}");
        assert!(read(r#"{"mtu": [1500]}"#).is_err());
    }
}
