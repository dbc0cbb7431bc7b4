//! The one error type of board control (`system::links`, `addresses`, `forwarding`, `apply`,
//! `governor`): each variant says how the edge (web API, CLI) should answer. Messages are
//! complete sentences meant for the user; nothing here is an internal debug dump.

/// Why a board read or change did not happen (or did not fully happen).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoardError {
    /// Bad input (unknown port, malformed address, MTU out of range, …). Nothing was changed.
    /// HTTP 400, CLI exit code 2.
    #[error("{0}")]
    Invalid(String),
    /// The process lacks a privilege (CAP_NET_ADMIN, write access to sysfs). Nothing was
    /// changed. HTTP 403.
    #[error("{0}")]
    ReadOnly(String),
    /// The change would cut the browser off (it removes the address the request came in on):
    /// it needs to be asked for explicitly. Nothing was changed. HTTP 409.
    #[error("{0}")]
    Warning(String),
    /// The change conflicts with the current state (e.g. another change awaits confirmation).
    /// Nothing was changed. HTTP 409.
    #[error("{0}")]
    Conflict(String),
    /// The system refused or failed part-way (netlink error, `nft` failed). Whatever was
    /// applied has been rolled back when the message says so. HTTP 500, CLI exit code 1.
    #[error("{0}")]
    System(String),
}

impl BoardError {
    /// The HTTP status that fits.
    pub fn http_status(&self) -> u16 {
        match self {
            BoardError::Invalid(_) => 400,
            BoardError::ReadOnly(_) => 403,
            BoardError::Warning(_) | BoardError::Conflict(_) => 409,
            BoardError::System(_) => 500,
        }
    }

    /// A short machine-readable kind: `invalid`, `read_only`, `warning`, `conflict`, `system`.
    pub fn kind(&self) -> &'static str {
        match self {
            BoardError::Invalid(_) => "invalid",
            BoardError::ReadOnly(_) => "read_only",
            BoardError::Warning(_) => "warning",
            BoardError::Conflict(_) => "conflict",
            BoardError::System(_) => "system",
        }
    }
}

/// Shorthand for `Err(BoardError::Invalid(..))`.
pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T, BoardError> {
    Err(BoardError::Invalid(msg.into()))
}
