//! The kube-apiserver-serving-clustertrustbundle-publisher-controller on the real server, which
//! serves ClusterTrustBundles only with the ClusterTrustBundle gate and the beta (or alpha) API
//! turned on: the CA of `--root-ca-file` is published as the signer
//! `kubernetes.io/kube-apiserver-serving`'s one bundle, named after its hash, put back when it
//! is edited or deleted; the signer's other bundles are deleted, other signers' left alone.

use k8s_openapi::Resource;
use k8s_openapi::api::certificates::{v1alpha1, v1beta1};
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, PostParams};
use kcm::controllers::certificates::clustertrustbundlepublisher::{BundleVersion, SIGNER_NAME, bundle_name};

use crate::harness;

use harness::{Backend, Cluster, eventually};

const STALE: &str = "kubernetes.io:kube-apiserver-serving:stale";
const OTHER_SIGNER: &str = "example.com/other";
const OTHER: &str = "example.com:other:kept";

mod the_serving_ca_is_published_as_a_v1beta1_bundle {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, |backend| {
            super::publishes::<k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle>(backend, "v1beta1")
        });
    }
}

mod the_serving_ca_is_published_as_a_v1alpha1_bundle_without_the_beta_api {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, |backend| {
            super::publishes::<k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle>(backend, "v1alpha1")
        });
    }
}

/// A self-signed CA certificate, PEM.
fn ca_pem(name: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.self_signed(&key).expect("a certificate").pem()
}

fn bundles<K: BundleVersion>(cluster: &Cluster) -> Api<K> {
    Api::cluster(&cluster.client)
}

/// With only `version` of `certificates.k8s.io` serving ClusterTrustBundles, the publisher uses it.
fn publishes<K: BundleVersion>(backend: Backend, version: &str) {
    let ca = ca_pem("kube-apiserver-serving");
    let ca_file = std::env::temp_dir().join(format!("kcm-ctb-publisher-{version}-{}.crt", std::process::id()));
    std::fs::write(&ca_file, &ca).expect("the CA file written");
    let root_ca_file = format!("--root-ca-file={}", ca_file.display());
    let runtime_config = format!("--runtime-config=certificates.k8s.io/{version}/clustertrustbundles=true");
    let other_ca = ca_pem("other");
    let cluster = harness::with(&[named("kube-apiserver-serving-clustertrustbundle-publisher-controller")])
        .on(backend)
        .apiserver_flags(&["--feature-gates=ClusterTrustBundle=true", &runtime_config])
        .without_nodes()
        .flags(&["--feature-gates=ClusterTrustBundle=true", &root_ca_file])
        .remove_on_drop(ca_file.clone())
        .names(&["kube-apiserver-serving-clustertrustbundle-publisher-controller"])
        .start_with(|client, _| {
            let api = Api::<K>::cluster(client);
            api.create(&K::build(STALE, SIGNER_NAME, &other_ca), &PostParams::default()).expect("stale bundle");
            api.create(&K::build(OTHER, OTHER_SIGNER, &other_ca), &PostParams::default()).expect("other bundle");
        });
    let name = bundle_name(SIGNER_NAME, ca.as_bytes());
    let published = |cluster: &Cluster| {
        eventually("the CA published", || {
            bundles::<K>(cluster).get_opt(&name).expect("bundle read").filter(|b| b.trust_bundle() == ca)
        })
    };
    let published_bundle = published(&cluster);
    assert_eq!(published_bundle.signer_name(), SIGNER_NAME);
    eventually("the stale bundle deleted", || {
        bundles::<K>(&cluster).get_opt(STALE).expect("read").is_none().then_some(())
    });

    // Edited: the CA is put back.
    let edited = published_bundle.with_trust_bundle(&other_ca);
    bundles::<K>(&cluster).replace(&name, &edited, &PostParams::default()).expect("bundle edited");
    published(&cluster);

    // Deleted: published again.
    bundles::<K>(&cluster).delete(&name, &DeleteParams::default()).expect("bundle deleted");
    published(&cluster);

    let other = bundles::<K>(&cluster).get_opt(OTHER).expect("read").expect("another signer's bundle stays");
    assert_eq!(other.trust_bundle(), other_ca);
    assert!(only_version_served(&cluster, version), "the test serves only {version}, so the controller used it");
}

/// Whether `version` is the one version of `certificates.k8s.io` serving ClusterTrustBundles.
fn only_version_served(cluster: &Cluster, version: &str) -> bool {
    let serves = |v: &str| {
        let list = cluster.client.get_json::<serde_json::Value>(&format!("/apis/certificates.k8s.io/{v}"));
        list.is_ok_and(|l| l["resources"].as_array().into_iter().flatten().any(|r| r["name"] == "clustertrustbundles"))
    };
    let beta = serves(v1beta1::ClusterTrustBundle::VERSION);
    let alpha = serves(v1alpha1::ClusterTrustBundle::VERSION);
    match version {
        "v1beta1" => beta && !alpha,
        _ => alpha && !beta,
    }
}
