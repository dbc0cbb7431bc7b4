//! The run's word columns (`kind`, `status`, `role`, `protocol`, `direction`) as SQLite
//! values: each is written as its stored word ([`RunKind::as_str`] …) and read back from it.
//! Reading an unknown `kind`, `status` or `role` word is a conversion error naming the word
//! (`run_from_row` turns it into an entry of the row's `invalid` list); an unknown protocol or
//! direction word is kept in its `Other` variant.

use crate::model::{RunDirection, RunKind, RunProtocol, RunRole, RunStatus};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// An unknown stored word of `column`, as a conversion error.
fn unknown(column: &str, word: &str) -> FromSqlError {
    FromSqlError::Other(format!("unknown {column} word {word:?}").into())
}

macro_rules! closed_word {
    ($t:ty, $column:literal) => {
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }
        impl FromSql for $t {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                let s = v.as_str()?;
                <$t>::parse(s).ok_or_else(|| unknown($column, s))
            }
        }
    };
}

macro_rules! open_word {
    ($t:ty) => {
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }
        impl FromSql for $t {
            fn column_result(v: ValueRef<'_>) -> FromSqlResult<Self> {
                Ok(<$t>::parse(v.as_str()?))
            }
        }
    };
}

closed_word!(RunKind, "kind");
closed_word!(RunStatus, "status");
closed_word!(RunRole, "role");
open_word!(RunProtocol);
open_word!(RunDirection);

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// Each word is written as itself and read back; an unknown closed word is an error that
    /// names it, an unknown open word is kept.
    #[test]
    fn words_are_stored_as_themselves() {
        let c = Connection::open_in_memory().unwrap();
        let text =
            |v: &dyn ToSql| -> String { c.query_row("SELECT ?1", [v], |r| r.get(0)).unwrap() };
        assert_eq!(text(&RunKind::HttpServe), "http-serve");
        assert_eq!(text(&RunStatus::Aborted), "aborted");
        assert_eq!(text(&RunRole::Server), "server");
        assert_eq!(text(&RunProtocol::Udp), "UDP");
        assert_eq!(text(&RunProtocol::Unset), "");
        assert_eq!(text(&RunDirection::Bidir), "bidir");
        let status: RunStatus = c.query_row("SELECT 'failed'", [], |r| r.get(0)).unwrap();
        assert_eq!(status, RunStatus::Failed);
        let e = c
            .query_row("SELECT 'paused'", [], |r| r.get::<_, RunStatus>(0))
            .unwrap_err();
        assert!(
            e.to_string().contains("unknown status word \"paused\""),
            "{e}"
        );
        let p: RunProtocol = c.query_row("SELECT 'QUIC'", [], |r| r.get(0)).unwrap();
        assert_eq!(p, RunProtocol::Other("QUIC".into()));
        let d: RunDirection = c.query_row("SELECT 'tradeoff'", [], |r| r.get(0)).unwrap();
        assert_eq!(d, RunDirection::Tradeoff);
    }
}
