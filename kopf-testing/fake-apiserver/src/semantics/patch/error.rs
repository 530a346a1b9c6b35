//! Why a patch could not be applied, and the HTTP answer Kubernetes gives for it.

/// One field of a server-side apply conflict, ready for a Status `details.causes` entry
/// of type `FieldManagerConflict`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApplyConflict {
    /// The name of the manager that owns the field.
    pub(crate) manager: String,
    /// The cause message, such as `conflict with "kubectl" using apps/v1`.
    pub(crate) message: String,
    /// The field path, such as `.spec.replicas`.
    pub(crate) field: String,
}

/// Why a patch could not be applied; each variant maps to one HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatchError {
    /// The patch document is malformed: answer 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well formed but cannot be applied to this object (failed `test`
    /// operation, missing path): answer 422 Invalid.
    #[error("{0}")]
    Invalid(String),
    /// The patch is larger than the server takes (too many JSON-patch operations):
    /// answer 413 RequestEntityTooLarge.
    #[error("Request entity too large: {0}")]
    TooLarge(String),
    /// Server-side apply conflicts with other field managers: answer 409 Conflict.
    #[error("{message}")]
    Conflict {
        /// The Kubernetes message, such as
        /// `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`.
        message: String,
        /// Every conflicting field with its manager.
        conflicts: Vec<ApplyConflict>,
    },
}

/// Status code and reason for the HTTP answer.
impl PatchError {
    /// The HTTP status code for this error.
    pub(crate) fn code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid(_) => 422,
            PatchError::TooLarge(_) => 413,
            PatchError::Conflict { .. } => 409,
        }
    }

    /// The Kubernetes Status `reason` for this error.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid(_) => "Invalid",
            PatchError::TooLarge(_) => "RequestEntityTooLarge",
            PatchError::Conflict { .. } => "Conflict",
        }
    }
}

/// Shorthand for a [`PatchError::BadRequest`].
pub(super) fn bad(message: impl Into<String>) -> PatchError {
    PatchError::BadRequest(message.into())
}
