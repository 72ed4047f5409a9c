//! The podcertificaterequest-cleaner-controller on the real server (the sandbox does not serve
//! `certificates.k8s.io/v1beta1` PodCertificateRequests), with the gate `PodCertificateRequest`
//! on for both: a request goes once it is as old as the threshold, not before, with a shorter
//! threshold and poll than upstream's 15 and 5 minutes.

use std::time::{Duration, Instant};

use k8s_openapi::api::certificates::v1beta1::PodCertificateRequest;
use kcm::app::controllers::named;
use kcm::client::{Api, PostParams};
use kcm::controllers::certificates::pcrcleaner;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const THRESHOLD: Duration = Duration::from_secs(3);

/// Real server only until the sandbox serves PodCertificateRequests; then `on_both_backends!`.
mod a_request_goes_once_it_is_as_old_as_the_threshold {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::a_request_goes_once_it_is_as_old_as_the_threshold);
    }
}

fn start(backend: Backend) -> Cluster {
    let cleaner = named("podcertificaterequest-cleaner-controller").started_by(|c, _| {
        let config = pcrcleaner::Config { threshold: THRESHOLD, polling_interval: Duration::from_millis(250) };
        Ok(pcrcleaner::new(c, config))
    });
    harness::with(&[cleaner])
        .on(backend)
        .without_nodes()
        .names(&["podcertificaterequest-cleaner-controller"])
        .apiserver_flags(&[
            "--feature-gates=PodCertificateRequest=true",
            "--runtime-config=certificates.k8s.io/v1beta1=true",
        ])
        .flags(&["--feature-gates=PodCertificateRequest=true"])
        .start()
}

/// `pkixPublicKey` of an Ed25519 key: the SubjectPublicKeyInfo prefix and the 32 key bytes.
fn ed25519_pkix(public_key: &[u8]) -> Vec<u8> {
    let mut der = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    der.extend_from_slice(public_key);
    der
}

/// A request as a kubelet makes it, with a key of its own and the proof of possession (the
/// pod's UID signed with it) that the server verifies.
fn request(name: &str, pod_uid: &str) -> PodCertificateRequest {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("a key");
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("the key");
    let proof = key.sign(pod_uid.as_bytes());
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "signerName": "example.com/signer", "podName": "pod-1", "podUID": pod_uid,
            "serviceAccountName": "default", "serviceAccountUID": "sa-uid-1",
            "nodeName": "node-a", "nodeUID": "node-uid-1", "maxExpirationSeconds": 86400,
            "pkixPublicKey": k8s_openapi::ByteString(ed25519_pkix(key.public_key().as_ref())),
            "proofOfPossession": k8s_openapi::ByteString(proof.as_ref().to_vec()),
        },
    }))
}

fn a_request_goes_once_it_is_as_old_as_the_threshold(backend: Backend) {
    let cluster = start(backend);
    let requests: Api<PodCertificateRequest> = cluster.api();
    let before = Instant::now();
    let created = requests.create(&request("pcr-1", "pod-uid-1"), &PostParams::default()).expect("request created");
    assert!(created.metadata.creation_timestamp.is_some());

    eventually("the request deleted", || requests.get_opt("pcr-1").expect("request read").is_none().then_some(()));
    // The creation time is in whole seconds, so it may be up to a second before the create.
    let lived = before.elapsed();
    assert!(lived >= THRESHOLD - Duration::from_secs(1), "deleted after {lived:?}, before the threshold");
}
