//! The service-account controllers of upstream's `pkg/controller/serviceaccount`:
//! `serviceaccount-controller` (the `default` account in every namespace),
//! `serviceaccount-token-controller` (legacy token Secrets, signed with
//! `--service-account-private-key-file`) and `legacy-serviceaccount-token-cleaner-controller`.

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
