//! Kubeconfig files (clientcmd `v1.Config`), turned into a [`RestConfig`] for the current
//! context the way client-go's `DirectClientConfig.ClientConfig` does, with two deliberate
//! differences: a non-https server is an error (client-go silently drops the credentials),
//! and credential plugins are refused instead of run.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustls_pki_types::CertificateDer;
use serde::Deserialize;
use serde_yaml_ng::Value;

use super::pem::{self, PairError, PemError};
use crate::client::null_as_default;

use super::{
    Auth, ClientIdentity, ConfigError, RestConfig, ServerUrlError, TlsSettings, TokenFile, TokenFileError, server_url,
};

/// The deepest `[`/`{` nesting parsed. The YAML parser takes time quadratic in the depth (a
/// file of 40 000 `[` took 10 s, a megabyte of them would stall the start for many minutes);
/// a kubeconfig nests a few levels.
const MAX_FLOW_DEPTH: usize = 1000;

/// The line at which `text` opens more than [`MAX_FLOW_DEPTH`] brackets. Brackets inside
/// quoted strings count too: a real file never holds a thousand unclosed ones.
fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1;
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'\n' => line += 1,
            _ => {}
        }
        if depth > MAX_FLOW_DEPTH {
            return Some(line);
        }
    }
    None
}

/// What is wrong with a kubeconfig file (the `<path>` of [`ConfigError::Kubeconfig`] comes before).
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The file cannot be read.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// More brackets open at once than [`MAX_FLOW_DEPTH`].
    #[error("invalid YAML: nested more than {MAX_FLOW_DEPTH} levels deep at line {line}")]
    TooDeep {
        /// Where the limit was passed.
        line: usize,
    },
    /// Not YAML, or not a kubeconfig's shape.
    #[error("invalid YAML: {source}{}", line.map(|line| format!(" at line {line}")).unwrap_or_default())]
    Yaml {
        /// The parser's error.
        #[source]
        source: serde_yaml_ng::Error,
        /// The line, when the parser's text does not already say it.
        line: Option<usize>,
    },
    /// One field is wrong: `<field>: <reason>`.
    #[error("{field}: {reason}")]
    Field {
        /// The field, as a path into the file (`users[admin].client-key`) or `--master`.
        field: String,
        /// What is wrong with it.
        #[source]
        reason: FieldError,
    },
}

/// What is wrong with one field of a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    /// A name used twice in one list.
    #[error("defined more than once")]
    Duplicate,
    /// `current-context` names no context.
    #[error("context {0:?} is not defined in contexts")]
    UndefinedContext(String),
    /// A required field is missing or empty.
    #[error("not set")]
    NotSet,
    /// A context names a cluster or user that is not there.
    #[error("{name:?} is not defined in {list}")]
    Undefined {
        /// The name given.
        name: String,
        /// The list it should be in (`clusters`, `users`).
        list: &'static str,
    },
    /// An unusable server URL.
    #[error("{0}")]
    Server(#[from] ServerUrlError),
    /// `proxy-url`.
    #[error("proxies are not supported")]
    Proxy,
    /// `username`/`password`.
    #[error("basic authentication is not supported")]
    BasicAuth,
    /// `exec`.
    #[error("exec credential plugins are not supported")]
    Exec,
    /// `auth-provider`.
    #[error("auth provider plugins are not supported")]
    AuthProvider,
    /// `as`, `as-uid`, `as-groups`, `as-user-extra`.
    #[error("impersonation is not supported")]
    Impersonation,
    /// A CA together with `insecure-skip-tls-verify` (client-go's transport refuses it in these words).
    #[error("specifying a root certificates file with the insecure flag is not allowed")]
    CaWithInsecure,
    /// A client certificate without its key.
    #[error("not set, but a client certificate is")]
    KeyMissing,
    /// A client key without its certificate.
    #[error("not set, but a client key is")]
    CertificateMissing,
    /// The PEM material is unusable.
    #[error("{0}")]
    Pem(#[from] PemError),
    /// The client certificate cannot be parsed.
    #[error("not a valid X.509 certificate: {0}")]
    BadCertificate(#[source] rustls::Error),
    /// The client key is not the certificate's.
    #[error("private key does not match the client certificate")]
    KeyMismatch,
    /// `tokenFile` gives no token.
    #[error("{0}")]
    TokenFile(#[from] TokenFileError),
    /// Both the inline and the file form of some material.
    #[error("{data_field} and {path_field} are both set; set only one")]
    BothSet {
        /// The inline field (`*-data`).
        data_field: &'static str,
        /// The path field.
        path_field: &'static str,
    },
    /// Inline material that is not base64.
    #[error("invalid base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// A file the field names cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file, resolved against the kubeconfig's folder.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
}

/// The parts of a kubeconfig this loader reads. Unknown fields are ignored, as in client-go.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct KubeconfigFile {
    current_context: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_default")]
    contexts: Vec<NamedContext>,
    #[serde(default, deserialize_with = "null_as_default")]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    cluster: Cluster,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    context: Context,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    user: User,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    tls_server_name: Option<String>,
    insecure_skip_tls_verify: Option<bool>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize, Default)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    password: Option<String>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    as_uid: Option<String>,
    as_groups: Option<Value>,
    as_user_extra: Option<Value>,
    exec: Option<Value>,
    auth_provider: Option<Value>,
}

/// The context, cluster and user in use, with their names.
struct Selected<'c> {
    context: &'c str,
    cluster_name: &'c str,
    cluster: &'c Cluster,
    user_name: &'c str,
    user: &'c User,
}

/// Loads `path` and builds the config of its current context; `master` replaces the server.
pub(super) fn load(path: &Path, master: Option<&str>) -> Result<RestConfig, ConfigError> {
    let file = Origin::new(path);
    let text = fs::read_to_string(path).map_err(|e| file.whole_file(KubeconfigError::Read(e)))?;
    from_text(&file, &text, master)
}

/// Builds the config of the current context of a kubeconfig `file` whose content is `text`.
fn from_text(file: &Origin, text: &str, master: Option<&str>) -> Result<RestConfig, ConfigError> {
    let config = file.parse(text)?;
    file.check_unique_names(&config)?;
    let selected = file.select(&config)?;
    let cluster_field = format!("clusters[{}]", selected.cluster_name);
    let user_field = format!("users[{}]", selected.user_name);
    let server = match master {
        Some(master) => server_url(master, false).map_err(|e| file.error("--master", e.into()))?,
        None => file.server(&cluster_field, selected.cluster)?,
    };
    file.refuse_unsupported(&cluster_field, selected.cluster, &user_field, selected.user)?;
    let mut tls = file.tls(&cluster_field, selected.cluster, &user_field, selected.user)?;
    if master.is_some() {
        // client-go: a --master override also drops the kubeconfig's tls-server-name.
        tls.server_name = None;
    }
    Ok(RestConfig {
        server,
        tls,
        auth: file.auth(&user_field, selected.user)?,
        source: file.describe(&selected, master.is_some()),
    })
}

/// A kubeconfig file: where it is (for errors) and the folder its relative paths start from.
struct Origin<'a> {
    path: &'a Path,
    dir: &'a Path,
}

impl<'a> Origin<'a> {
    fn new(path: &'a Path) -> Self {
        let dir = path.parent().unwrap_or(Path::new(""));
        Origin { path, dir }
    }

    /// `kubeconfig <path>: <field>: <reason>`.
    fn error(&self, field: &str, reason: FieldError) -> ConfigError {
        self.whole_file(KubeconfigError::Field { field: field.to_string(), reason })
    }

    /// A path from the file, relative to the file's folder unless absolute (client-go's
    /// `ResolvePaths`; `~` is not expanded there either).
    fn resolve(&self, path: &str) -> PathBuf {
        self.dir.join(path)
    }

    /// For [`RestConfig::source`].
    fn describe(&self, selected: &Selected, master: bool) -> String {
        let Selected { context, cluster_name, user_name, .. } = selected;
        let overridden = if master { ", server from --master" } else { "" };
        format!(
            "kubeconfig {} (context {context:?}, cluster {cluster_name:?}, user {user_name:?}{overridden})",
            self.path.display()
        )
    }

    /// `kubeconfig <path>: <reason>`, for problems of the file as a whole.
    fn whole_file(&self, problem: KubeconfigError) -> ConfigError {
        ConfigError::Kubeconfig { path: self.path.to_path_buf(), problem }
    }

    fn parse(&self, text: &str) -> Result<KubeconfigFile, ConfigError> {
        if text.trim().is_empty() {
            return Ok(KubeconfigFile::default());
        }
        if let Some(line) = too_deep(text) {
            return Err(self.whole_file(KubeconfigError::TooDeep { line }));
        }
        serde_yaml_ng::from_str(text).map_err(|source| {
            // Most YAML errors already say where they are; add the line to those that do not.
            let says_where = format!("invalid YAML: {source}").contains(" line ");
            let line = source.location().filter(|_| !says_where).map(|location| location.line());
            self.whole_file(KubeconfigError::Yaml { source, line })
        })
    }

    /// Names must be unique in each list; client-go refuses duplicates too.
    fn check_unique_names(&self, config: &KubeconfigFile) -> Result<(), ConfigError> {
        self.unique("clusters", config.clusters.iter().map(|c| c.name.as_str()))?;
        self.unique("contexts", config.contexts.iter().map(|c| c.name.as_str()))?;
        self.unique("users", config.users.iter().map(|u| u.name.as_str()))
    }

    fn unique<'n>(&self, list: &str, mut names: impl Iterator<Item = &'n str>) -> Result<(), ConfigError> {
        let mut seen = HashSet::new();
        match names.find(|name| !seen.insert(*name)) {
            Some(name) => Err(self.error(&format!("{list}[{name}]"), FieldError::Duplicate)),
            None => Ok(()),
        }
    }

    /// Follows `current-context` to its cluster and user, all of which must exist.
    fn select<'c>(&self, config: &'c KubeconfigFile) -> Result<Selected<'c>, ConfigError> {
        let context = self.required("current-context", &config.current_context)?;
        let Some(entry) = config.contexts.iter().find(|c| c.name == context) else {
            return Err(self.error("current-context", FieldError::UndefinedContext(context.to_string())));
        };
        let cluster_ref = format!("contexts[{context}].cluster");
        let cluster_name = self.required(&cluster_ref, &entry.context.cluster)?;
        let cluster = config.clusters.iter().find(|c| c.name == cluster_name);
        let cluster = cluster.ok_or_else(|| self.undefined(&cluster_ref, cluster_name, "clusters"))?;
        let user_ref = format!("contexts[{context}].user");
        let user_name = self.required(&user_ref, &entry.context.user)?;
        let user = config.users.iter().find(|u| u.name == user_name);
        let user = user.ok_or_else(|| self.undefined(&user_ref, user_name, "users"))?;
        Ok(Selected { context, cluster_name, cluster: &cluster.cluster, user_name, user: &user.user })
    }

    /// A string field that must be set.
    fn required<'v>(&self, field: &str, value: &'v Option<String>) -> Result<&'v str, ConfigError> {
        set(value).ok_or_else(|| self.error(field, FieldError::NotSet))
    }

    fn undefined(&self, field: &str, name: &str, list: &'static str) -> ConfigError {
        self.error(field, FieldError::Undefined { name: name.to_string(), list })
    }

    fn server(&self, section: &str, cluster: &Cluster) -> Result<String, ConfigError> {
        let field = format!("{section}.server");
        let server = self.required(&field, &cluster.server)?;
        server_url(server, false).map_err(|e| self.error(&field, e.into()))
    }

    /// Fields whose meaning this client cannot honour; ignoring them would connect by another
    /// route, or as someone else, than the operator asked for.
    fn refuse_unsupported(
        &self,
        cluster_section: &str,
        cluster: &Cluster,
        user_section: &str,
        user: &User,
    ) -> Result<(), ConfigError> {
        use FieldError::{AuthProvider, BasicAuth, Exec, Impersonation, Proxy};
        let refused: [(_, _, _, fn() -> FieldError); 9] = [
            (cluster_section, "proxy-url", set(&cluster.proxy_url).is_some(), || Proxy),
            (user_section, "username", set(&user.username).is_some(), || BasicAuth),
            (user_section, "password", set(&user.password).is_some(), || BasicAuth),
            (user_section, "exec", user.exec.is_some(), || Exec),
            (user_section, "auth-provider", user.auth_provider.is_some(), || AuthProvider),
            (user_section, "as", set(&user.impersonate).is_some(), || Impersonation),
            (user_section, "as-uid", set(&user.as_uid).is_some(), || Impersonation),
            (user_section, "as-groups", user.as_groups.is_some(), || Impersonation),
            (user_section, "as-user-extra", user.as_user_extra.is_some(), || Impersonation),
        ];
        match refused.into_iter().find(|(_, _, present, _)| *present) {
            Some((section, field, _, reason)) => Err(self.error(&format!("{section}.{field}"), reason())),
            None => Ok(()),
        }
    }

    fn tls(
        &self,
        cluster_section: &str,
        cluster: &Cluster,
        user_section: &str,
        user: &User,
    ) -> Result<TlsSettings, ConfigError> {
        Ok(TlsSettings {
            ca_certs: self.ca_certs(cluster_section, cluster)?,
            insecure_skip_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
            server_name: set(&cluster.tls_server_name).map(str::to_owned),
            client_identity: self.client_identity(user_section, user)?,
        })
    }

    fn ca_certs(&self, section: &str, cluster: &Cluster) -> Result<Option<Vec<CertificateDer<'static>>>, ConfigError> {
        let path = ("certificate-authority", &cluster.certificate_authority);
        let data = ("certificate-authority-data", &cluster.certificate_authority_data);
        let Some(ca) = self.material(section, path, data)? else {
            return Ok(None);
        };
        if cluster.insecure_skip_tls_verify == Some(true) {
            // The same refusal, in the same words, as client-go's transport.
            return Err(self.error(&format!("{section}.insecure-skip-tls-verify"), FieldError::CaWithInsecure));
        }
        let certs = pem::ca_certificates(&ca.bytes).map_err(|e| self.error(&ca.field, e.into()))?;
        Ok(Some(certs))
    }

    /// The client certificate and key; they come as a pair and must match.
    fn client_identity(&self, section: &str, user: &User) -> Result<Option<ClientIdentity>, ConfigError> {
        let cert_path = ("client-certificate", &user.client_certificate);
        let cert_data = ("client-certificate-data", &user.client_certificate_data);
        let cert = self.material(section, cert_path, cert_data)?;
        let key_path = ("client-key", &user.client_key);
        let key_data = ("client-key-data", &user.client_key_data);
        let key = self.material(section, key_path, key_data)?;
        let (cert, key) = match (cert, key) {
            (None, None) => return Ok(None),
            (Some(cert), Some(key)) => (cert, key),
            (Some(_), None) => return Err(self.error(&format!("{section}.client-key"), FieldError::KeyMissing)),
            (None, Some(_)) => {
                return Err(self.error(&format!("{section}.client-certificate"), FieldError::CertificateMissing));
            }
        };
        let cert_chain = pem::certificates(&cert.bytes).map_err(|e| self.error(&cert.field, e.into()))?;
        let (key_der, signer) = pem::private_key(&key.bytes).map_err(|e| self.error(&key.field, e.into()))?;
        pem::check_pair(&cert_chain, signer).map_err(|e| match e {
            PairError::BadCertificate(source) => self.error(&cert.field, FieldError::BadCertificate(source)),
            PairError::KeyMismatch => self.error(&key.field, FieldError::KeyMismatch),
        })?;
        Ok(Some(ClientIdentity { cert_chain, key: key_der }))
    }

    fn auth(&self, section: &str, user: &User) -> Result<Auth, ConfigError> {
        let token = set(&user.token);
        let Some(token_file) = set(&user.token_file) else {
            return Ok(token.map_or(Auth::None, |token| Auth::Token(token.to_owned())));
        };
        let path = self.resolve(token_file);
        match (TokenFile::new(&path), token) {
            (Ok(file), _) => Ok(Auth::TokenFile(file)),
            // client-go: with both set the file wins whenever it can be read, `token` otherwise.
            (Err(e), Some(token)) => {
                log::warn!(
                    "kubeconfig {}: {section}.tokenFile: {e}; using token until it can be read",
                    self.path.display()
                );
                Ok(Auth::TokenFile(TokenFile::with_fallback(path, token.to_owned())))
            }
            (Err(e), None) => Err(self.error(&format!("{section}.tokenFile"), e.into())),
        }
    }

    /// PEM given either inline (`*-data`, base64) or as a file path; setting both is an error,
    /// as in client-go's validation.
    fn material(
        &self,
        section: &str,
        (path_field, path): (&'static str, &Option<String>),
        (data_field, data): (&'static str, &Option<String>),
    ) -> Result<Option<Material>, ConfigError> {
        match (set(path), set(data)) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => {
                Err(self.error(&format!("{section}.{data_field}"), FieldError::BothSet { data_field, path_field }))
            }
            (None, Some(data)) => self.decode(format!("{section}.{data_field}"), data).map(Some),
            (Some(path), None) => self.read(format!("{section}.{path_field}"), path).map(Some),
        }
    }

    fn decode(&self, field: String, data: &str) -> Result<Material, ConfigError> {
        // Go's base64 decoder skips line breaks; YAML folding can leave spaces too.
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        match BASE64.decode(compact) {
            Ok(bytes) => Ok(Material { field, bytes }),
            Err(e) => Err(self.error(&field, FieldError::Base64(e))),
        }
    }

    fn read(&self, field: String, path: &str) -> Result<Material, ConfigError> {
        let resolved = self.resolve(path);
        match fs::read(&resolved) {
            Ok(bytes) => Ok(Material { field: format!("{field} ({})", resolved.display()), bytes }),
            Err(source) => Err(self.error(&field, FieldError::Read { path: resolved, source })),
        }
    }
}

/// PEM bytes and the field (with its file, if any) they came from, for later errors.
struct Material {
    field: String,
    bytes: Vec<u8>,
}

#[cfg(test)]
mod fuzz_tests;

/// The value of an optional string field, treating an empty string as unset (as client-go).
fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}
