//! The service-account controllers of upstream's `pkg/controller/serviceaccount`:
//! `serviceaccount-controller` (the `default` account in every namespace),
//! `serviceaccount-token-controller` (legacy token Secrets, signed with
//! `--service-account-private-key-file`) and `legacy-serviceaccount-token-cleaner-controller`.

mod accounts;
mod cleaner;
mod tokens;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::client::Client;
use crate::flags::Options;
use crate::runtime::controller::ControllerDescriptor;

pub use accounts::ACCOUNTS_TO_ENSURE;
pub use cleaner::{DEFAULT_SYNC_INTERVAL, INVALID_SINCE_LABEL, LAST_USED_LABEL, TRACKING_CONFIG_MAP};

/// `serviceaccount-controller`.
pub const SERVICE_ACCOUNT: ControllerDescriptor =
    ControllerDescriptor { name: "serviceaccount-controller", init: accounts::init };
/// `serviceaccount-token-controller`.
pub const SERVICE_ACCOUNT_TOKEN: ControllerDescriptor =
    ControllerDescriptor { name: "serviceaccount-token-controller", init: tokens::init };
/// `legacy-serviceaccount-token-cleaner-controller`.
pub const LEGACY_TOKEN_CLEANER: ControllerDescriptor =
    ControllerDescriptor { name: "legacy-serviceaccount-token-cleaner-controller", init: cleaner::init };

/// `v1.ServiceAccountNameKey` / `v1.ServiceAccountUIDKey`: whose token a Secret holds.
pub const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
pub const SERVICE_ACCOUNT_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// `v1.SecretTypeServiceAccountToken`.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";

/// The CA bundle put in token Secrets and `kube-root-ca.crt`: `--root-ca-file` (which must hold
/// certificates: upstream's `readCA`), else the CA data of the client's kubeconfig.
pub fn root_ca(options: &Options, client: &Client) -> Result<String, String> {
    let file = &options.service_account.root_ca_file;
    if file.is_empty() {
        return Ok(client.ca_pem().unwrap_or_default());
    }
    let parse_error = |e: String| format!("error parsing root-ca-file at {file}: {e}");
    let pem = std::fs::read_to_string(file).map_err(|e| parse_error(e.to_string()))?;
    let certificates = CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>();
    match certificates {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(parse_error("data does not contain any valid RSA or ECDSA certificates".into())),
        Err(e) => Err(parse_error(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::config::{Auth, RestConfig, TlsSettings};
    use crate::client::{Client, ClientOptions};

    fn options(root_ca_file: &str) -> Options {
        let args = [format!("--root-ca-file={root_ca_file}")];
        match crate::flags::parse(args.into_iter().map(Into::into)) {
            Ok(crate::flags::Command::Run(options)) => *options,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn client(ca_certs: Option<Vec<CertificateDer<'static>>>) -> Client {
        let tls = TlsSettings { ca_certs, ..TlsSettings::default() };
        let config = RestConfig { server: "https://127.0.0.1:1".into(), tls, auth: Auth::None, source: "test".into() };
        Client::new(config, ClientOptions::default()).expect("client")
    }

    #[test]
    fn root_ca_comes_from_the_file_or_else_the_kubeconfig() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let path = std::env::temp_dir().join(format!("kcm-root-ca-{}.crt", std::process::id()));
        std::fs::write(&path, ca.pem()).unwrap();
        let from_file = root_ca(&options(&path.to_string_lossy()), &client(None));
        assert_eq!(from_file.as_deref(), Ok(ca.pem().as_str()));

        std::fs::write(&path, "not a certificate").unwrap();
        let err = root_ca(&options(&path.to_string_lossy()), &client(None)).unwrap_err();
        assert_eq!(
            err,
            format!(
                "error parsing root-ca-file at {}: data does not contain any valid RSA or ECDSA certificates",
                path.display()
            )
        );
        let _ = std::fs::remove_file(&path);

        let kubeconfig_ca = client(Some(vec![ca.der().clone()]));
        let pem = root_ca(&options(""), &kubeconfig_ca).unwrap();
        let parsed: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().unwrap();
        assert_eq!(parsed, [ca.der().clone()]);
        assert_eq!(root_ca(&options(""), &client(None)).as_deref(), Ok(""), "no CA data: empty, as upstream");
    }
}
