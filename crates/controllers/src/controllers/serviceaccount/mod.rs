//! The service-account controllers of upstream's `pkg/controller/serviceaccount`:
//! `serviceaccount-controller` (the `default` account in every namespace),
//! `serviceaccount-token-controller` (legacy token Secrets, signed with
//! `--service-account-private-key-file`) and `legacy-serviceaccount-token-cleaner-controller`.

use std::time::Duration;

use crate::apimachinery::errors::{Aggregate, BoxError};
use crate::client;

mod accounts;
mod cleaner;
mod tokens;

pub use accounts::{ACCOUNTS_TO_ENSURE, new as new_accounts};
pub use cleaner::{Config as CleanerConfig, new as new_legacy_token_cleaner};
pub use cleaner::{DEFAULT_SYNC_INTERVAL, INVALID_SINCE_LABEL, LAST_USED_LABEL, TRACKING_CONFIG_MAP};
pub use tokens::{Config as TokensConfig, new as new_tokens};

/// `v1.ServiceAccountNameKey`: the name of the account whose token a Secret holds.
pub const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// `v1.ServiceAccountUIDKey`: the uid of the account whose token a Secret holds.
pub const SERVICE_ACCOUNT_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// `v1.SecretTypeServiceAccountToken`.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";

/// Why a controller of this module could not start, or a sync failed. API errors are kept
/// whole, so that a conflict or a server's `Retry-After` reaches the queue with its kind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Some default accounts could not be created (`utilerrors.NewAggregate`).
    #[error("{0}")]
    CreateAccounts(#[source] Aggregate),
    /// The cleaner's period is zero.
    #[error("failed to start the legacy service account token cleaner: invalid CleanUpPeriod: {0:?}")]
    InvalidCleanUpPeriod(Duration),
    /// The ConfigMap saying since when kube-apiserver tracks token use could not be read.
    #[error("Getting lastest possible tracked_since time: {0}")]
    TrackingConfigMap(#[source] client::Error),
    /// That ConfigMap has no date.
    #[error("configMap does not have since label")]
    NoTrackedSince,
    /// Its date does not parse.
    #[error("error parsing trackedSince time: {0:?}")]
    ParseTrackedSince(String),
    /// The day after it is out of the calendar's range.
    #[error("{0}")]
    Date(#[from] jiff::Error),
    /// The tokens' signing key could not be read.
    #[error("error reading key for service account token controller: {0}")]
    ReadKey(#[source] BoxError),
    /// A queue key lacks a part.
    #[error("invalid key {0}")]
    InvalidKey(String),
    /// The account could not be read.
    #[error("getting service account {namespace}/{name}: {source}")]
    GetAccount {
        /// The namespace.
        namespace: String,
        /// The account.
        name: String,
        /// The read's error.
        source: client::Error,
    },
    /// A token Secret could not be deleted.
    #[error("deleting token {namespace}/{name}: {source}")]
    DeleteToken {
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The deletion's error.
        source: client::Error,
    },
    /// Several token Secrets could not be deleted (`utilerrors.NewAggregate`).
    #[error("{0}")]
    DeleteTokens(#[source] Aggregate),
    /// A token Secret could not be read.
    #[error("getting secret {namespace}/{name}: {source}")]
    GetSecret {
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The read's error.
        source: client::Error,
    },
    /// A token could not be signed.
    #[error("signing a token: {0}")]
    Sign(#[source] BoxError),
    /// A token Secret could not be filled.
    #[error("populating token {namespace}/{name}: {source}")]
    PopulateToken {
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The update's error.
        source: client::Error,
    },
    /// A Secret's reference could not be dropped from its account.
    #[error("{0}")]
    RemoveReference(#[source] client::Error),
}
