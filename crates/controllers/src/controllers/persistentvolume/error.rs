//! The binder's errors: why a sync of a claim or a volume failed (logged, and the key requeued
//! with the queue's backoff), and why a volume cannot be bound to the claim that names it. API
//! errors are kept whole, so that a conflict or a server's `Retry-After` reaches the queue with
//! its kind; each reads as upstream's error does.

use crate::apimachinery::errors::BoxError;
use crate::client;

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed: Go's `err.Error()`, the server's message alone.
    #[error("{}", .0.message())]
    Api(#[from] client::Error),
    /// The claim's volume is bound to another claim, although the controller bound the claim.
    #[error("invalid binding of claim {claim:?} to volume {volume:?}: volume already claimed by {other:?}")]
    InvalidBinding {
        /// `namespace/name` of the claim.
        claim: String,
        /// The volume.
        volume: String,
        /// `namespace/name` of the claim the volume is bound to.
        other: String,
    },
    /// Looking for a volume for the claim failed.
    #[error("error finding PV for claim {claim:?}: {source}")]
    FindVolume {
        /// `namespace/name` of the claim.
        claim: String,
        /// Why.
        source: Box<Error>,
    },
    /// The claim names a VolumeAttributesClass while the gate is off.
    #[error(
        "unsupported volumeAttributesClassName is set on claim {claim} when the feature-gate VolumeAttributesClass is \
         disabled"
    )]
    AttributesClassDisabled {
        /// `namespace/name` of the claim.
        claim: String,
    },
    /// The claim's selector is invalid.
    #[error("error creating internal label selector for claim: {claim}: {source}")]
    ClaimSelector {
        /// `namespace/name` of the claim.
        claim: String,
        /// Why.
        source: BoxError,
    },
    /// The default StorageClass could not be written into the claim.
    #[error("can't update PersistentVolumeClaim[{claim:?}]: {}", .source.message())]
    AssignDefaultClass {
        /// `namespace/name` of the claim.
        claim: String,
        /// The update's error.
        source: client::Error,
    },
    /// The claim's StorageClass has no binding mode.
    #[error("VolumeBindingMode not set for StorageClass {class:?}")]
    NoBindingMode {
        /// The class.
        class: String,
    },
    /// The volume a claim is being bound to has no capacity.
    #[error("PersistentVolume {volume:?} is without a storage capacity")]
    NoCapacity {
        /// The volume.
        volume: String,
    },
    /// No external deleter takes a volume: an in-tree provisioner made it.
    #[error("no deletable volume plugin matched")]
    NoDeleter,
    /// No external deleter takes a volume that no provisioner made.
    #[error("error getting deleter volume plugin for volume {volume:?}: no deletable volume plugin matched")]
    NoDeleterFor {
        /// The volume.
        volume: String,
    },
    /// The sync of a volume failed.
    #[error("Could not sync volume volumeName={key:?} err={source}")]
    SyncVolume {
        /// The volume's key.
        key: String,
        /// Why.
        source: Box<Error>,
    },
    /// The sync of a claim failed.
    #[error("Could not sync claim PVC={key:?} err={source}")]
    SyncClaim {
        /// The claim's key.
        key: String,
        /// Why.
        source: Box<Error>,
    },
}

/// Why a volume cannot be bound to the claim that names it (`checkVolumeSatisfyClaim`), as the
/// `VolumeMismatch` Event quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The volume is being deleted.
    #[error("the volume is marked for deletion {volume:?}")]
    BeingDeleted {
        /// The volume.
        volume: String,
    },
    /// The volume is smaller than the claim's request.
    #[error("requested PV is too small")]
    TooSmall,
    /// The classes differ.
    #[error("storageClassName does not match")]
    StorageClass,
    /// The VolumeAttributesClasses differ.
    #[error("volumeAttributesClassName does not match")]
    AttributesClass,
    /// A VolumeAttributesClass is set while the gate is off.
    #[error("volumeAttributesClassName is not supported when the feature-gate VolumeAttributesClass is disabled")]
    AttributesClassDisabled,
    /// The volume modes differ.
    #[error("incompatible volumeMode")]
    VolumeMode,
    /// The volume does not offer the claim's access modes.
    #[error("incompatible accessMode")]
    AccessMode,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::controller::SyncError;

    #[test]
    fn a_conflict_inside_a_sync_reaches_the_queue_as_a_conflict() {
        let conflict: client::Error = client::ApiError::from_response(409, b"", None).into();
        let error = Error::SyncClaim { key: "ns/data".into(), source: Box::new(Error::Api(conflict)) };
        assert_eq!(
            SyncError::of(error),
            SyncError::Conflict(r#"Could not sync claim PVC="ns/data" err=the server reported a conflict"#.into())
        );
    }
}
