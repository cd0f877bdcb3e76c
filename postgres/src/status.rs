//! [`TransactionStatus`]: where the session stands, as each `ReadyForQuery` tells.

/// The session's transaction status, as the server reported it at the end of the last call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    /// Outside a transaction block.
    Idle,
    /// Inside a transaction block (after `BEGIN`).
    InTransaction,
    /// Inside a failed transaction block: statements are refused until `ROLLBACK`.
    Failed,
}

impl TransactionStatus {
    /// The status a `ReadyForQuery` byte stands for.
    pub(crate) fn from_byte(byte: u8) -> Option<TransactionStatus> {
        match byte {
            b'I' => Some(TransactionStatus::Idle),
            b'T' => Some(TransactionStatus::InTransaction),
            b'E' => Some(TransactionStatus::Failed),
            _ => None,
        }
    }
}
