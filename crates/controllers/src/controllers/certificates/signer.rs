//! The signing controller (`certificatesigningrequest-signing-controller`), after upstream
//! v1.33's `pkg/controller/certificates/signer`: one `CertificateController` per built-in signer
//! with a CA, each signing the approved, not failed CSRs of its signer name that pass the
//! signer's rules and marking the others `Failed` (`SignerValidationFailure`). The CA files are
//! read again when they change (`caProvider.currentCA`).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;

use super::authority::{self, CertificateAuthority, SigningPolicy};
use super::{
    KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING, LEGACY_UNKNOWN, certificate_controller,
    has_true_condition, is_approved, validation,
};
use crate::apimachinery::errors::BoxError;
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::x509::request::{CertificateRequest, parse_csr};

/// Backdating of NotBefore (and of NotAfter for long-lived certificates).
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Below this lifetime NotAfter is not backdated.
const SHORT: Duration = Duration::from_secs(8 * 3600);
/// The shortest lifetime `spec.expirationSeconds` can ask for.
const MIN_DURATION: Duration = Duration::from_secs(10 * 60);
/// Workers per signer (upstream's `Run(ctx, 5)`).
const WORKERS: usize = 5;

/// Why a signer could not start, or could not sign a CSR.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A signer's CA could not be loaded.
    #[error("failed to start {signer_name} certificate controller: {source}")]
    Start {
        /// The signer whose CA failed.
        signer_name: &'static str,
        /// Why.
        source: Box<Error>,
    },
    /// The CA certificate file cannot be read.
    #[error("error reading CA cert file \"{file}\": {source}")]
    ReadCert {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CA key file cannot be read.
    #[error("error reading CA key file \"{file}\": {source}")]
    ReadKey {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CA's content is not usable.
    #[error("{0}")]
    Authority(#[from] authority::Error),
    /// The CSR's request does not parse.
    #[error("unable to parse csr {name:?}: {source}")]
    ParseCsr {
        /// The CSR.
        name: String,
        /// Why.
        source: BoxError,
    },
    /// Writing the `Failed` condition of a CSR the signer's rules refuse failed.
    #[error("error adding failure condition for csr: {0}")]
    AddFailureCondition(#[source] client::Error),
    /// The CA could not sign.
    #[error("error auto signing csr: {0}")]
    Sign(#[source] authority::Error),
    /// Writing the certificate failed.
    #[error("error updating signature for csr: {0}")]
    UpdateSignature(#[source] client::Error),
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// One signer's CA files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignerCa {
    /// The signer name, e.g. `kubernetes.io/kubelet-serving`.
    pub signer_name: &'static str,
    /// The PEM CA certificate file.
    pub cert_file: String,
    /// The PEM CA key file.
    pub key_file: String,
}

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// The signers that run, with their CA (upstream's `get*SignerFiles`).
    pub signers: Vec<SignerCa>,
    /// `--cluster-signing-duration`.
    pub duration: Duration,
}

/// The signers and their files as `startCertificateSigningRequestSigningController` picks them:
/// the per-signer files when any is set, else the cluster pair for all four.
pub fn signers_from_files(cluster: (&str, &str), per_signer: [(&str, &str); 4]) -> Vec<SignerCa> {
    let names = [KUBELET_SERVING, KUBE_APISERVER_CLIENT_KUBELET, KUBE_APISERVER_CLIENT, LEGACY_UNKNOWN];
    let any_specific = per_signer.iter().any(|(c, k)| !c.is_empty() || !k.is_empty());
    names
        .into_iter()
        .zip(per_signer)
        .map(|(signer_name, files)| (signer_name, if any_specific { files } else { cluster }))
        .filter(|(_, (c, k))| !c.is_empty() || !k.is_empty())
        .map(|(signer_name, (c, k))| SignerCa { signer_name, cert_file: c.to_string(), key_file: k.to_string() })
        .collect()
}

/// `startCertificateSigningRequestSigningController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, Error> {
    if config.signers.is_empty() {
        return Ok(Controller::disabled("Skipping CSR signer controller because no csr cert/key was specified"));
    }
    let mut controller = Controller::new();
    for ca in config.signers {
        let signer = Arc::new(
            Signer::new(context.client.clone(), &ca, config.duration)
                .map_err(|e| Error::Start { signer_name: ca.signer_name, source: Box::new(e) })?,
        );
        controller = certificate_controller(context, controller, WORKERS, move |csr| signer.handle(csr));
    }
    Ok(controller)
}

/// `caProvider`: the current CA, parsed again when the files' content changes.
struct CaProvider {
    files: SignerCa,
    current: Mutex<Arc<CertificateAuthority>>,
    /// The last content refused, so that a bad pair is logged once, not on every signature.
    refused: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
}

impl CaProvider {
    fn new(files: &SignerCa) -> Result<CaProvider, Error> {
        let (cert, key) = read_files(files)?;
        let ca = CertificateAuthority::from_pem(&cert, &key, &files.cert_file)?;
        Ok(CaProvider { files: files.clone(), current: Mutex::new(Arc::new(ca)), refused: Mutex::new(None) })
    }

    /// `currentCA`. Upstream's dynamic loader keeps the pair it has when the files cannot be
    /// read or do not hold a certificate and its own key (`tls.X509KeyPair`): a CA rotated by
    /// writing the certificate and then the key is taken once both are written, never half.
    /// A pair that passes that check but holds several certificates fails every signature, as
    /// upstream's `setCA` does.
    fn current(&self) -> Result<Arc<CertificateAuthority>, authority::Error> {
        let current = self.current.lock().clone();
        let Ok((cert, key)) = read_files(&self.files) else { return Ok(current) };
        if cert == current.raw_cert && key == current.raw_key {
            return Ok(current);
        }
        match CertificateAuthority::from_pem(&cert, &key, &self.files.cert_file) {
            Ok(ca) => {
                let ca = Arc::new(ca);
                log::info!("Loaded a new CA for {} from {}", self.files.signer_name, self.files.cert_file);
                *self.current.lock() = ca.clone();
                *self.refused.lock() = None;
                Ok(ca)
            }
            Err(e @ authority::Error::CertificateCount { found: 2.., .. }) => Err(e),
            Err(e) => {
                let mut refused = self.refused.lock();
                if refused.as_ref().is_none_or(|(c, k)| *c != cert || *k != key) {
                    log::error!(
                        "Loading CA {} and {} for {} failed, signing with the previous CA: {e}",
                        self.files.cert_file,
                        self.files.key_file,
                        self.files.signer_name
                    );
                    *refused = Some((cert, key));
                }
                Ok(current)
            }
        }
    }
}

fn read_files(files: &SignerCa) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let cert =
        std::fs::read(&files.cert_file).map_err(|source| Error::ReadCert { file: files.cert_file.clone(), source })?;
    let key =
        std::fs::read(&files.key_file).map_err(|source| Error::ReadKey { file: files.key_file.clone(), source })?;
    Ok((cert, key))
}

/// Upstream's `signer`.
struct Signer {
    client: Client,
    ca: CaProvider,
    /// The longest lifetime; a request may ask for less.
    cert_ttl: Duration,
    signer_name: &'static str,
}

impl Signer {
    fn new(client: Client, files: &SignerCa, cert_ttl: Duration) -> Result<Signer, Error> {
        Ok(Signer { client, ca: CaProvider::new(files)?, cert_ttl, signer_name: files.signer_name })
    }

    /// `signer.handle`.
    fn handle(&self, mut csr: CertificateSigningRequest) -> SyncResult {
        if !is_approved(&csr) || has_true_condition(&csr, "Failed") || csr.spec.signer_name != self.signer_name {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let request =
            parse_csr(&csr.spec.request.0).map_err(|e| Error::ParseCsr { name: name.clone(), source: e.into() })?;
        let usages = csr.spec.usages.clone().unwrap_or_default();
        let api = Api::<CertificateSigningRequest>::cluster(&self.client);
        if let Err(invalid) = validate(self.signer_name, &request, &usages) {
            let status = csr.status.get_or_insert_with(CertificateSigningRequestStatus::default);
            status.conditions.get_or_insert_with(Vec::new).push(CertificateSigningRequestCondition {
                type_: "Failed".to_string(),
                status: "True".to_string(),
                reason: Some("SignerValidationFailure".to_string()),
                message: Some(invalid.to_string()),
                last_update_time: Some(Time(Timestamp::now())),
                ..Default::default()
            });
            api.replace_status(&name, &csr, &PostParams::default()).map_err(Error::AddFailureCondition)?;
            return Ok(());
        }
        let certificate =
            self.sign(&request, &usages, csr.spec.expiration_seconds, Timestamp::now()).map_err(Error::Sign)?;
        csr.status.get_or_insert_with(CertificateSigningRequestStatus::default).certificate =
            Some(ByteString(certificate.into_bytes()));
        api.replace_status(&name, &csr, &PostParams::default()).map_err(Error::UpdateSignature)?;
        Ok(())
    }

    /// `signer.sign`: the PEM certificate.
    fn sign(
        &self,
        request: &CertificateRequest,
        usages: &[String],
        expiration: Option<i32>,
        now: Timestamp,
    ) -> Result<String, authority::Error> {
        let ca = self.ca.current()?;
        let policy = SigningPolicy {
            ttl: duration(self.cert_ttl, expiration),
            usages: usages.to_vec(),
            backdate: BACKDATE,
            short: SHORT,
            now,
        };
        let der = ca.sign(request, &policy)?;
        Ok(crate::x509::pem_encode("CERTIFICATE", &der))
    }
}

/// `getCSRVerificationFuncForSignerName` applied: the signer's rules for the request.
pub fn validate(signer_name: &str, request: &CertificateRequest, usages: &[String]) -> Result<(), validation::Error> {
    match signer_name {
        KUBELET_SERVING => validation::kubelet_serving(request, usages),
        KUBE_APISERVER_CLIENT_KUBELET => validation::kubelet_client(request, usages),
        KUBE_APISERVER_CLIENT => validation::kube_apiserver_client(usages),
        _ => Ok(()),
    }
}

/// `signer.duration`: `spec.expirationSeconds` within [10 minutes, the flag].
pub fn duration(cert_ttl: Duration, expiration_seconds: Option<i32>) -> Duration {
    let Some(seconds) = expiration_seconds else { return cert_ttl };
    let requested = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    if requested > cert_ttl {
        cert_ttl
    } else if requested < MIN_DURATION {
        MIN_DURATION
    } else {
        requested
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA's certificate and key PEM, with `cn` as subject.
    fn ca_pem(cn: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// The CA files of the kubelet-serving signer for `test`, in the temporary folder.
    fn temp_files(test: &str) -> SignerCa {
        let dir = std::env::temp_dir();
        let base = format!("kcm-signer-{test}-{}", std::process::id());
        SignerCa {
            signer_name: KUBELET_SERVING,
            cert_file: dir.join(format!("{base}.crt")).display().to_string(),
            key_file: dir.join(format!("{base}.key")).display().to_string(),
        }
    }

    #[test]
    fn the_ca_is_read_again_when_its_files_change() {
        let files = temp_files("reload");
        let write = |(cert, key): (String, String)| {
            std::fs::write(&files.cert_file, cert).unwrap();
            std::fs::write(&files.key_file, key).unwrap();
        };
        write(ca_pem("first"));
        let provider = CaProvider::new(&files).unwrap();
        let first = provider.current().unwrap();
        assert!(Arc::ptr_eq(&first, &provider.current().unwrap()), "unchanged files: the same CA");
        let (second_cert, second_key) = ca_pem("second");
        // A rotation that writes the certificate, then the key: half-way, the files hold a
        // certificate and a key that are not a pair, and the first CA goes on signing.
        std::fs::write(&files.cert_file, &second_cert).unwrap();
        assert!(Arc::ptr_eq(&first, &provider.current().unwrap()), "a half-written rotation keeps the CA");
        std::fs::write(&files.key_file, &second_key).unwrap();
        let second = provider.current().unwrap();
        assert_ne!(first.raw_cert, second.raw_cert, "a new CA after the files changed");
        assert_eq!(second.raw_cert, second_cert.as_bytes());
        std::fs::remove_file(&files.cert_file).unwrap();
        assert!(Arc::ptr_eq(&second, &provider.current().unwrap()), "unreadable files keep the last CA");
        let _ = std::fs::remove_file(&files.key_file);
        let missing = CaProvider::new(&files).err().unwrap().to_string();
        assert!(missing.starts_with("error reading CA cert file"), "{missing}");
    }

    #[test]
    fn a_ca_whose_key_is_not_its_certificates_does_not_start() {
        let files = temp_files("mismatch");
        std::fs::write(&files.cert_file, ca_pem("one").0).unwrap();
        std::fs::write(&files.key_file, ca_pem("other").1).unwrap();
        let refused = CaProvider::new(&files).err().unwrap().to_string();
        assert_eq!(refused, "tls: private key does not match public key");
        let _ = std::fs::remove_file(&files.cert_file);
        let _ = std::fs::remove_file(&files.key_file);
    }

    #[test]
    fn expiration_seconds_is_capped_both_ways() {
        let year = Duration::from_secs(8760 * 3600);
        assert_eq!(duration(year, None), year);
        assert_eq!(duration(year, Some(900)), Duration::from_secs(900));
        assert_eq!(duration(year, Some(60)), MIN_DURATION);
        assert_eq!(duration(year, Some(-5)), MIN_DURATION);
        assert_eq!(duration(Duration::from_secs(3600), Some(7200)), Duration::from_secs(3600));
    }

    #[test]
    fn signers_take_the_cluster_pair_unless_per_signer_files_are_set() {
        let none = [("", ""); 4];
        let all = signers_from_files(("ca.crt", "ca.key"), none);
        let names: Vec<_> = all.iter().map(|s| s.signer_name).collect();
        assert_eq!(names, [KUBELET_SERVING, KUBE_APISERVER_CLIENT_KUBELET, KUBE_APISERVER_CLIENT, LEGACY_UNKNOWN]);
        assert!(all.iter().all(|s| s.cert_file == "ca.crt" && s.key_file == "ca.key"));
        let one = signers_from_files(("", ""), [("", ""), ("kc.crt", "kc.key"), ("", ""), ("", "")]);
        assert_eq!(
            one,
            [SignerCa {
                signer_name: KUBE_APISERVER_CLIENT_KUBELET,
                cert_file: "kc.crt".into(),
                key_file: "kc.key".into()
            }]
        );
        assert!(signers_from_files(("", ""), none).is_empty());
    }
}
