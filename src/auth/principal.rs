//! Why a token was refused; the [`Principal`] a valid one speaks for lives in
//! [`crate::principal`] (a leaf) and is re-exported here.

pub use crate::principal::Principal;

/// Why a token was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is not acceptable (malformed, bad signature, expired, wrong issuer or
    /// audience, …): answer 401 `invalid_token`. The text is a short fixed description that
    /// is safe for logs and `error_description`; it never contains the token or any value
    /// copied from it.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The token's issuer is trusted but its keys cannot be fetched and no cached key fits,
    /// so the token can be neither accepted nor refused: answer 503 and let the client retry.
    #[error("issuer keys unavailable: {0}")]
    Unavailable(String),
}

impl TokenError {
    pub(crate) fn invalid(why: impl Into<String>) -> Self {
        Self::Invalid(why.into())
    }
}
