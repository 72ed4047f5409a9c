//! A real control plane for tests and the demo, as controller-runtime's `envtest`: etcd and
//! kube-apiserver (Kubernetes v1.36.2 from `../shared/k8s/v1.36.2`) on free loopback ports, with a
//! generated PKI and kubeadm's kube-apiserver flags, torn down with nothing left behind.
//!
//! [`TestServer`] puts it beside the sandbox behind one interface, so that a test or the demo
//! runs the same steps on either [`Backend`].

mod assets;
pub mod chaos;
pub mod e2e;
pub mod faultproxy;
pub mod jsonapi;
pub mod metrics_api;
pub mod process;
pub mod sampler;
pub mod scale;
pub mod sidebyside;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use assets::{ASSETS_ENV, Assets, ETCD_ENV, Error as AssetsError, KUBERNETES_VERSION, built_beside};
pub use metrics_api::MetricsApis;
use process::OwnedProcess;

use crate::apimachinery::errors::BoxError;
use crate::client::{self, Client, ClientOptions, RestConfig};
use crate::sandbox::auth::{self, Credentials, Pki};
use crate::sandbox::server::{ADMIN_USER, CONTROLLER_MANAGER_USER, Sandbox, SandboxOptions};

/// The Service CIDR kubeadm gives kube-apiserver by default.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/12";
/// The first address of [`SERVICE_CLUSTER_IP_RANGE`]: the `kubernetes` Service's ClusterIP.
const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// How long kube-apiserver may take to become ready on a loaded machine. Waiting ends early when
/// etcd or kube-apiserver exits, so the bound only matters for one that hangs: it is generous,
/// since on two busy cores beside other control planes a start has taken over 90 s.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// The audit log's file in the control plane's folder (see [`ControlPlane::audit_log`]).
const AUDIT_LOG: &str = "audit.log";
/// kube-apiserver's audit policy (the first matching rule wins):
/// - updates of Deployments and ReplicaSets (status included) at RequestResponse level, so that
///   a test sees which resourceVersion each write was based on and what it produced;
/// - ReplicaSet creates and patches at RequestResponse level too (their `spec.replicas`);
/// - pod creates at RequestResponse level: a generated name and the owner are only in the
///   response (objectRef names what the request named, nothing for `generateName`);
/// - pod deletes, and every write by the controller manager's identities
///   (`system:kube-controller-manager`, kube-system's ServiceAccounts), at Metadata level:
///   who wrote what, when and from which source address ([`chaos`]'s invariants).
///
/// Reads and everyone else's writes are not logged, to keep the log small.
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [update]
  resources:
  - group: apps
    resources: [deployments, deployments/status, replicasets, replicasets/status]
- level: RequestResponse
  verbs: [create, patch]
  resources:
  - group: apps
    resources: [replicasets]
- level: RequestResponse
  verbs: [create]
  resources:
  - group: \"\"
    resources: [pods]
- level: Metadata
  verbs: [delete, deletecollection]
  resources:
  - group: \"\"
    resources: [pods]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  users: [system:kube-controller-manager]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  userGroups: [system:serviceaccounts:kube-system]
- level: None
";

/// `widgets.example.com`, the namespaced custom resource of the tests and scenarios that need
/// one: kind `Widget`, any fields, and a `/scale` subresource on `spec.replicas` /
/// `status.replicas`.
pub fn widgets_definition() -> serde_json::Value {
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
            "subresources": {"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}]}})
}

/// Why a test bed's API server did not start, or a step on its processes failed: a missing
/// binary, a process that did not come up (with its log's tail), etcd not answering.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The binaries are missing (the message says how to get them).
    #[error(transparent)]
    Assets(#[from] assets::Error),
    /// etcd or kube-apiserver could not be started.
    #[error(transparent)]
    Process(#[from] process::Error),
    /// The admin client could not be built.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// A process ended while it was waited for.
    #[error("{name} exited ({status}):\n{output}")]
    Exited {
        /// `etcd` or `kube-apiserver`.
        name: String,
        /// How it ended.
        status: ExitStatus,
        /// The last lines of its log.
        output: String,
    },
    /// kube-apiserver did not become ready in time.
    #[error("kube-apiserver at {url} not ready after {timeout:?}:\n{output}")]
    NotReady {
        /// Its URL.
        url: String,
        /// How long it was waited for.
        timeout: Duration,
        /// The last lines of its log.
        output: String,
    },
    /// etcd answered a range read without a revision.
    #[error("etcd's range answer has no revision: {answer}")]
    NoRevision {
        /// What it answered.
        answer: serde_json::Value,
    },
    /// etcd did not answer after it was started again.
    #[error("etcd not answering {timeout:?} after its restart: {source}")]
    EtcdNotAnswering {
        /// How long it was waited for.
        timeout: Duration,
        /// The last failure.
        #[source]
        source: Box<Error>,
    },
    /// A request to etcd's JSON gateway failed.
    #[error("etcd at {url}: {source}")]
    EtcdRequest {
        /// The gateway's URL.
        url: String,
        /// Why.
        #[source]
        source: ureq::Error,
    },
    /// etcd's JSON gateway answered something that is not JSON.
    #[error("etcd at {url}: {source}: {text}")]
    EtcdAnswer {
        /// The gateway's URL.
        url: String,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
        /// What it answered.
        text: String,
    },
    /// The service-account signing key could not be generated.
    #[error("service account key: {source}")]
    ServiceAccountKey {
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// The control plane's folder could not be created.
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No free loopback port.
    #[error(transparent)]
    FreePort(std::io::Error),
    /// The sandbox (its server, PKI or kubeconfig files) failed.
    #[error("{0}")]
    Sandbox(#[source] BoxError),
    /// The metrics APIs could not be served.
    #[error(transparent)]
    MetricsApis(#[from] metrics_api::Error),
}

impl Error {
    /// Whether a process did not come up because a port chosen for it was taken in between
    /// (worth one more try on other ports).
    fn port_taken(&self) -> bool {
        match self {
            Error::Exited { output, .. } | Error::NotReady { output, .. } => output.contains("address already in use"),
            _ => false,
        }
    }
}

/// The sandbox's errors (text until its helper types them), kept as the source.
fn sandbox_error(e: impl Into<BoxError>) -> Error {
    Error::Sandbox(e.into())
}

/// etcd and kube-apiserver, running until dropped.
pub struct ControlPlane {
    // Field order is drop order: the API server goes before its etcd.
    apiserver: OwnedProcess,
    etcd: OwnedProcess,
    dir: PathBuf,
    url: String,
    pki: Pki,
    admin: Credentials,
    controller_manager: Credentials,
    service_account_key_pem: String,
    assets: Assets,
    /// kube-apiserver's flags, to start it again on the same port.
    apiserver_flags: Vec<String>,
    /// etcd's peer port, to start it again on the same ports and data dir.
    etcd_peer: u16,
    etcd_url: String,
    /// How many times kube-apiserver was started again: each may have lost the audit lines of
    /// requests it had answered (see [`ControlPlane::audit_may_have_gaps`]).
    apiserver_restarts: u32,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the server is ready and its system
    /// namespaces exist. Retries once on a port taken between choosing and binding it.
    pub fn start() -> Result<ControlPlane, Error> {
        ControlPlane::start_with_apiserver_flags(&[])
    }

    /// Starts as [`ControlPlane::start`] does, with `extra` after kubeadm's kube-apiserver flags:
    /// how a test of a gated controller serves the alpha API it needs, e.g.
    /// `--feature-gates=PodCertificateRequest=true` and
    /// `--runtime-config=certificates.k8s.io/v1alpha1=true`.
    pub fn start_with_apiserver_flags(extra: &[&str]) -> Result<ControlPlane, Error> {
        let assets = Assets::locate()?;
        match ControlPlane::start_once(&assets, extra) {
            Err(e) if e.port_taken() => ControlPlane::start_once(&assets, extra),
            other => other,
        }
    }

    fn start_once(assets: &Assets, extra: &[&str]) -> Result<ControlPlane, Error> {
        let dir = scratch_dir()?;
        let files = Files::write(&dir)?;
        let [etcd_client, etcd_peer, secure] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let mut etcd = Command::new(&assets.etcd);
        etcd.args(etcd_flags(&dir, &etcd_url, etcd_peer));
        let etcd = OwnedProcess::spawn("etcd", etcd, &dir.join("etcd.log"))?;
        let mut apiserver_flags = files.apiserver_flags(&etcd_url, secure);
        apiserver_flags.extend(extra.iter().map(|flag| flag.to_string()));
        let mut apiserver = Command::new(&assets.kube_apiserver);
        apiserver.args(&apiserver_flags);
        let apiserver = OwnedProcess::spawn("kube-apiserver", apiserver, &dir.join("kube-apiserver.log"))?;
        let mut plane = ControlPlane {
            apiserver,
            etcd,
            dir,
            url: format!("https://127.0.0.1:{secure}"),
            pki: files.pki,
            admin: files.admin,
            controller_manager: files.controller_manager,
            service_account_key_pem: files.service_account_key_pem,
            assets: assets.clone(),
            apiserver_flags,
            etcd_peer,
            etcd_url,
            apiserver_restarts: 0,
        };
        plane.wait_until_ready()?;
        Ok(plane)
    }

    /// Polls `/readyz` and the system namespaces; fails early, with the log's tail, when either
    /// process ends.
    fn wait_until_ready(&mut self) -> Result<(), Error> {
        let client =
            Client::new(self.admin_config(), ClientOptions { timeout: Duration::from_secs(5), ..Default::default() })?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            for process in [&mut self.etcd, &mut self.apiserver] {
                if let Some(status) = process.exited() {
                    return Err(Error::Exited {
                        name: process.name().to_string(),
                        status,
                        output: process.log_tail(30),
                    });
                }
            }
            let ready = client.get_text("/readyz").is_ok_and(|body| body.trim() == "ok")
                && ["default", "kube-system", "kube-public", "kube-node-lease"]
                    .iter()
                    .all(|ns| client.get_text(&format!("/api/v1/namespaces/{ns}")).is_ok());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    url: self.url.clone(),
                    timeout: READY_TIMEOUT,
                    output: self.apiserver.log_tail(30),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kube-apiserver's `https://127.0.0.1:<port>` URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The cluster CA certificate (kubeadm's `ca.crt`), PEM.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// etcd's client URL (plain HTTP on loopback), e.g. to read what kube-apiserver stored
    /// through etcd's JSON gateway while kube-apiserver is down or stopped.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The folder holding the PKI, etcd's data and both logs (removed when dropped).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// kube-apiserver's audit log (JSON lines, written as requests complete): the updates of
    /// Deployments and ReplicaSets with their request and response objects, pod creates with
    /// the created pod, pod deletes and the controller manager's writes (see `AUDIT_POLICY`).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join(AUDIT_LOG)
    }

    /// The binaries this control plane runs.
    pub fn assets(&self) -> &Assets {
        &self.assets
    }

    /// The service-account signing key (kubeadm's `sa.key`), PKCS#8 PEM.
    pub fn service_account_key_pem(&self) -> &str {
        &self.service_account_key_pem
    }

    /// The cluster CA's private key (kubeadm's `ca.key`), PKCS#8 PEM.
    pub fn ca_key_pem(&self) -> String {
        self.pki.ca_key_pem()
    }

    /// A cluster admin (`system:masters`), as kubeadm's admin.conf.
    pub fn admin_config(&self) -> RestConfig {
        auth::rest_config(&self.url, Some(&self.pki.ca_pem), Some(&self.admin), format!("envtest ({ADMIN_USER})"))
    }

    /// `system:kube-controller-manager`, as kubeadm's controller-manager.conf.
    pub fn controller_manager_config(&self) -> RestConfig {
        let source = format!("envtest ({CONTROLLER_MANAGER_USER})");
        auth::rest_config(&self.url, Some(&self.pki.ca_pem), Some(&self.controller_manager), source)
    }

    /// A client certificate for any user and groups.
    pub fn user_config(&self, user: &str, groups: &[&str]) -> Result<RestConfig, Error> {
        let credentials = self.pki.client_credentials(user, groups).map_err(sandbox_error)?;
        Ok(auth::rest_config(&self.url, Some(&self.pki.ca_pem), Some(&credentials), format!("envtest ({user})")))
    }

    /// kubeadm's files for a controller manager (see [`auth::write_kubeadm_files`]).
    pub fn write_kubeconfigs(&self, path: &Path) -> Result<(PathBuf, PathBuf), Error> {
        auth::write_kubeadm_files(
            path,
            &self.url,
            &self.pki.ca_pem,
            &self.pki.ca_key_pem(),
            &self.admin,
            &self.controller_manager,
            &self.service_account_key_pem,
        )
        .map_err(sandbox_error)
    }

    /// kube-apiserver's process, to stop, stall (SIGSTOP) or read the log of.
    pub fn apiserver(&mut self) -> &mut OwnedProcess {
        &mut self.apiserver
    }

    /// Stops kube-apiserver unless it has ended (SIGTERM, then SIGKILL after 5 s; send SIGKILL
    /// through [`ControlPlane::apiserver`] first for a crash) and starts it again with the same
    /// flags, on the same port, against the same etcd; waits until it is ready. Its clients'
    /// connections and watches are cut, and its watch cache starts afresh: a watch from an
    /// older resourceVersion gets 410 Gone.
    pub fn restart_apiserver(&mut self) -> Result<(), Error> {
        self.apiserver.stop(Duration::from_secs(5));
        self.apiserver_restarts += 1;
        let mut command = Command::new(&self.assets.kube_apiserver);
        command.args(&self.apiserver_flags);
        let log = self.dir.join("kube-apiserver.log");
        self.apiserver = OwnedProcess::spawn("kube-apiserver", command, &log)?;
        self.wait_until_ready()
    }

    /// Whether the audit log may lack requests that were answered: a kube-apiserver killed
    /// (and started again) dies with the lines of requests it answered but had not logged yet.
    pub fn audit_may_have_gaps(&self) -> bool {
        self.apiserver_restarts > 0
    }

    /// etcd's process.
    pub fn etcd(&mut self) -> &mut OwnedProcess {
        &mut self.etcd
    }

    /// Stops etcd unless it has ended (SIGTERM, then SIGKILL after 5 s; send SIGKILL through
    /// [`ControlPlane::etcd`] first for a crash) and starts it again with the same flags and
    /// data dir; waits until kube-apiserver, which reconnects by itself, is ready again.
    pub fn restart_etcd(&mut self) -> Result<(), Error> {
        self.respawn_etcd()?;
        self.wait_until_ready()
    }

    /// Stops etcd (unless it has ended) and starts it again with the same flags and data dir.
    fn respawn_etcd(&mut self) -> Result<(), Error> {
        self.etcd.stop(Duration::from_secs(5));
        let mut command = Command::new(&self.assets.etcd);
        command.args(etcd_flags(&self.dir, &self.etcd_url, self.etcd_peer));
        self.etcd = OwnedProcess::spawn("etcd", command, &self.dir.join("etcd.log"))?;
        Ok(())
    }

    /// etcd's current revision (the header of a range read, through its JSON gateway).
    pub fn etcd_revision(&self) -> Result<u64, Error> {
        let answer = self.etcd_post("/v3/kv/range", &serde_json::json!({"key": "AA=="}))?;
        let revision = answer["header"]["revision"].as_str().and_then(|r| r.parse().ok());
        revision.ok_or(Error::NoRevision { answer })
    }

    /// Compacts etcd past the revision kube-apiserver's watches on it hold, so that they
    /// really end: kube-apiserver is paused (SIGSTOP), etcd restarted (cutting every watch
    /// stream), its revision moved on by a write outside `/registry`, and it is compacted there
    /// (physically) before kube-apiserver resumes. etcd's client then resumes each watch from
    /// the last revision it had seen, now compacted, and the watch ends with `required revision
    /// has been compacted`; kube-apiserver's watch cache lists again, and a client watching from
    /// an older resourceVersion than it now holds gets `410 Gone`. (Compacting at the current
    /// revision alone ends nothing: a watch that has caught up is past it.) Returns the
    /// revision compacted at.
    pub fn compact_etcd(&mut self) -> Result<u64, Error> {
        self.apiserver.signal(libc::SIGSTOP);
        let compacted = self.restart_etcd_and_compact();
        self.apiserver.signal(libc::SIGCONT);
        let revision = compacted?;
        self.wait_until_ready()?;
        Ok(revision)
    }

    fn restart_etcd_and_compact(&mut self) -> Result<u64, Error> {
        self.respawn_etcd()?;
        let started = Instant::now();
        while let Err(e) = self.etcd_revision() {
            if started.elapsed() > READY_TIMEOUT {
                return Err(Error::EtcdNotAnswering { timeout: READY_TIMEOUT, source: Box::new(e) });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Outside `/registry`: no object of the cluster changes, but the revision moves on, by
        // two, so that a watch whose last progress notification said the revision before them
        // resumes at the first, which the compaction at the second removes.
        use base64::Engine as _;
        let key = base64::engine::general_purpose::STANDARD.encode("/kcm-envtest/compaction-filler");
        for _ in 0..2 {
            self.etcd_post("/v3/kv/put", &serde_json::json!({"key": key, "value": key}))?;
        }
        let revision = self.etcd_revision()?;
        let request = serde_json::json!({"revision": revision.to_string(), "physical": true});
        self.etcd_post("/v3/kv/compaction", &request)?;
        Ok(revision)
    }

    fn etcd_post(&self, path: &str, body: &serde_json::Value) -> Result<serde_json::Value, Error> {
        let url = format!("{}{path}", self.etcd_url);
        let response = ureq::post(&url)
            .send(&body.to_string())
            .map_err(|source| Error::EtcdRequest { url: url.clone(), source })?;
        let text =
            response.into_body().read_to_string().map_err(|source| Error::EtcdRequest { url: url.clone(), source })?;
        serde_json::from_str(&text).map_err(|source| Error::EtcdAnswer { url, source, text })
    }
}

/// etcd's flags: one member on loopback, data in `dir/etcd`.
fn etcd_flags(dir: &Path, etcd_url: &str, peer_port: u16) -> Vec<String> {
    vec![
        "--name=envtest".into(),
        "--log-level=warn".into(),
        "--logger=zap".into(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
        format!("--initial-cluster=envtest=http://127.0.0.1:{peer_port}"),
    ]
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if std::env::var_os("KCM_ENVTEST_KEEP").is_some() {
            // Kept for reading: a graceful stop flushes the audit log and etcd's data.
            self.apiserver.stop(Duration::from_secs(5));
            self.etcd.stop(Duration::from_secs(5));
            return;
        }
        // Thrown away: kube-apiserver's graceful shutdown (a second or more of draining,
        // per test, over a CI run of hundreds of planes) has nothing to save.
        self.apiserver.stop(Duration::ZERO);
        self.etcd.stop(Duration::ZERO);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PKI and key files kube-apiserver reads, as kubeadm lays them out.
struct Files {
    dir: PathBuf,
    pki: Pki,
    admin: Credentials,
    controller_manager: Credentials,
    service_account_key_pem: String,
}

impl Files {
    fn write(dir: &Path) -> Result<Files, Error> {
        let pki = Pki::generate(KUBERNETES_SERVICE_IP.into()).map_err(sandbox_error)?;
        let front_proxy = Pki::generate(Ipv4Addr::LOCALHOST.into()).map_err(sandbox_error)?;
        let service_account_key = rcgen::KeyPair::generate().map_err(|source| Error::ServiceAccountKey { source })?;
        let service_account_key_pem = service_account_key.serialize_pem();
        let kubelet_client = pki
            .client_credentials("kube-apiserver-kubelet-client", &["kubeadm:cluster-admins"])
            .map_err(sandbox_error)?;
        let front_proxy_client = front_proxy.client_credentials("front-proxy-client", &[]).map_err(sandbox_error)?;
        let write = |name: &str, contents: &str| {
            auth::write_private(&dir.join(name), contents.as_bytes()).map_err(sandbox_error)
        };
        write("ca.crt", &pki.ca_pem)?;
        write("ca.key", &pki.ca_key_pem())?;
        write("apiserver.crt", &pki.serving.cert_pem)?;
        write("apiserver.key", &pki.serving.key_pem)?;
        write("apiserver-kubelet-client.crt", &kubelet_client.cert_pem)?;
        write("apiserver-kubelet-client.key", &kubelet_client.key_pem)?;
        write("front-proxy-ca.crt", &front_proxy.ca_pem)?;
        write("front-proxy-client.crt", &front_proxy_client.cert_pem)?;
        write("front-proxy-client.key", &front_proxy_client.key_pem)?;
        write("sa.key", &service_account_key_pem)?;
        write("sa.pub", &service_account_key.public_key_pem())?;
        write("audit-policy.yaml", AUDIT_POLICY)?;
        Ok(Files {
            dir: dir.to_path_buf(),
            admin: pki.client_credentials(ADMIN_USER, &["system:masters"]).map_err(sandbox_error)?,
            controller_manager: pki.client_credentials(CONTROLLER_MANAGER_USER, &[]).map_err(sandbox_error)?,
            pki,
            service_account_key_pem,
        })
    }

    /// kubeadm v1.36's kube-apiserver flags, on loopback, with an audit log of Deployment and
    /// ReplicaSet updates.
    fn apiserver_flags(&self, etcd_url: &str, secure_port: u16) -> Vec<String> {
        let file = |name: &str| self.dir.join(name).display().to_string();
        vec![
            "--advertise-address=127.0.0.1".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={secure_port}"),
            "--allow-privileged=true".into(),
            "--authorization-mode=Node,RBAC".into(),
            format!("--client-ca-file={}", file("ca.crt")),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--enable-bootstrap-token-auth=true".into(),
            format!("--etcd-servers={etcd_url}"),
            format!("--kubelet-client-certificate={}", file("apiserver-kubelet-client.crt")),
            format!("--kubelet-client-key={}", file("apiserver-kubelet-client.key")),
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".into(),
            format!("--proxy-client-cert-file={}", file("front-proxy-client.crt")),
            format!("--proxy-client-key-file={}", file("front-proxy-client.key")),
            "--requestheader-allowed-names=front-proxy-client".into(),
            format!("--requestheader-client-ca-file={}", file("front-proxy-ca.crt")),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--audit-policy-file={}", file("audit-policy.yaml")),
            format!("--audit-log-path={}", file(AUDIT_LOG)),
        ]
    }
}

/// A fresh folder for one control plane: in /dev/shm where there is one (etcd fsyncs a lot), else
/// the temp dir.
fn scratch_dir() -> Result<PathBuf, Error> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let dir = base.join(format!("kcm-envtest-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(source) = std::fs::create_dir_all(&dir) {
        return Err(Error::CreateDir { dir, source });
    }
    Ok(dir)
}

/// Three loopback ports free at the time of asking (all held at once, so they differ).
pub(crate) fn free_ports() -> Result<[u16; 3], Error> {
    let bind = || TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).map_err(Error::FreePort);
    let listeners = [bind()?, bind()?, bind()?];
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).map_err(Error::FreePort);
    Ok([port(&listeners[0])?, port(&listeners[1])?, port(&listeners[2])?])
}

/// Which API server a test or the demo runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `kcm-sandbox`, in this process.
    Sandbox,
    /// etcd and kube-apiserver v1.36.2, as child processes ([`ControlPlane`]).
    Real,
}

impl Backend {
    /// The backend's name in test output and errors.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sandbox => "sandbox",
            Backend::Real => "real kube-apiserver",
        }
    }

    /// Whether `KCM_TEST_BACKENDS` (a comma-separated list of `sandbox` and `real`; both when
    /// unset) selects this backend.
    pub fn selected(self) -> bool {
        let Ok(list) = std::env::var("KCM_TEST_BACKENDS") else { return true };
        let wanted = match self {
            Backend::Sandbox => "sandbox",
            Backend::Real => "real",
        };
        list.split(',').any(|name| name.trim() == wanted)
    }

    /// Whether tests on this backend can run here. The first time the real server's binaries are
    /// found missing, says so once, loudly, on the process's stderr (past the test harness's
    /// output capture), naming what is missing.
    pub fn available(self) -> bool {
        if self == Backend::Sandbox {
            return true;
        }
        static REPORTED: std::sync::Once = std::sync::Once::new();
        match Assets::locate() {
            Ok(_) => true,
            // CI has everything the real-server tests need (`scripts/setup.sh test`): a skip
            // there would hide a missing install step, so it fails instead.
            Err(missing) if std::env::var_os("CI").is_some_and(|v| v == "true") => {
                panic!("CI=true and the real-server tests cannot run: {missing}")
            }
            Err(missing) => {
                REPORTED.call_once(|| {
                    use std::io::Write;
                    let line = format!("\n*** REAL-SERVER TESTS SKIPPED: {missing} ***\n");
                    let _ = std::io::stderr().write_all(line.as_bytes());
                });
                false
            }
        }
    }
}

/// A running API server of either backend.
// One per test, never moved in a hot path: the variants' sizes need not match.
#[allow(clippy::large_enum_variant)]
pub enum TestServer {
    /// The in-process sandbox.
    Sandbox(Sandbox),
    /// etcd and kube-apiserver as child processes.
    Real(ControlPlane),
}

impl TestServer {
    /// Starts `backend`: a sandbox on a free loopback port with RBAC off (every authenticated
    /// user may do anything, as the tests' controllers were written against), or a real control plane
    /// (RBAC on, as kubeadm's).
    pub fn start(backend: Backend) -> Result<TestServer, Error> {
        match backend {
            Backend::Sandbox => {
                let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
                let sandbox = Sandbox::start(SandboxOptions { listen, ..SandboxOptions::default() });
                Ok(TestServer::Sandbox(sandbox.map_err(sandbox_error)?))
            }
            Backend::Real => Ok(TestServer::Real(ControlPlane::start()?)),
        }
    }

    /// Which backend this server is.
    pub fn backend(&self) -> Backend {
        match self {
            TestServer::Sandbox(_) => Backend::Sandbox,
            TestServer::Real(_) => Backend::Real,
        }
    }

    /// The sandbox, for tests of its own features (faults, audit log, store).
    pub fn sandbox(&self) -> Option<&Sandbox> {
        match self {
            TestServer::Sandbox(sandbox) => Some(sandbox),
            TestServer::Real(_) => None,
        }
    }

    /// The server's URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        match self {
            TestServer::Sandbox(s) => s.url(),
            TestServer::Real(r) => r.url().to_string(),
        }
    }

    /// The cluster CA certificate, PEM: what clients trust the server's certificate with.
    pub fn ca_pem(&self) -> &str {
        match self {
            TestServer::Sandbox(s) => s.ca_pem(),
            TestServer::Real(r) => r.ca_pem(),
        }
    }

    /// The service-account signing key, PKCS#8 PEM (for the controller manager's token signer).
    pub fn service_account_key_pem(&self) -> &str {
        match self {
            TestServer::Sandbox(s) => s.service_account_key_pem(),
            TestServer::Real(r) => r.service_account_key_pem(),
        }
    }

    /// The cluster CA's private key, PKCS#8 PEM (kubeadm's `ca.key`, which signs CSRs).
    pub fn ca_key_pem(&self) -> String {
        match self {
            TestServer::Sandbox(s) => s.ca_key_pem(),
            TestServer::Real(r) => r.ca_key_pem(),
        }
    }

    /// A cluster admin (`system:masters`), as kubeadm's admin.conf.
    pub fn admin_config(&self) -> RestConfig {
        match self {
            TestServer::Sandbox(s) => s.admin_config(),
            TestServer::Real(r) => r.admin_config(),
        }
    }

    /// `system:kube-controller-manager`, as kubeadm's controller-manager.conf.
    pub fn controller_manager_config(&self) -> RestConfig {
        match self {
            TestServer::Sandbox(s) => s.controller_manager_config(),
            TestServer::Real(r) => r.controller_manager_config(),
        }
    }

    /// A client certificate for any user and groups.
    pub fn user_config(&self, user: &str, groups: &[&str]) -> Result<RestConfig, Error> {
        match self {
            TestServer::Sandbox(s) => s.user_config(user, groups).map_err(sandbox_error),
            TestServer::Real(r) => r.user_config(user, groups),
        }
    }

    /// The metrics APIs (docs/sandbox.md, "Metrics APIs"): the sandbox serves them itself (`None`); a real
    /// control plane gets them registered as aggregated APIs, for as long as the handle lives.
    pub fn serve_metrics_apis(&self) -> Result<Option<MetricsApis>, Error> {
        match self {
            TestServer::Sandbox(_) => Ok(None),
            TestServer::Real(r) => Ok(Some(r.serve_metrics_apis()?)),
        }
    }

    /// kubeadm's files for a controller manager: admin.conf at `path`, controller-manager.conf,
    /// sa.key and ca.crt beside it.
    pub fn write_kubeconfigs(&self, path: &Path) -> Result<(PathBuf, PathBuf), Error> {
        match self {
            TestServer::Sandbox(s) => s.write_kubeconfigs(path).map_err(sandbox_error),
            TestServer::Real(r) => r.write_kubeconfigs(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_process_that_exits_is_reported_with_its_log_tail() {
        let exited = Error::Exited {
            name: "kube-apiserver".into(),
            status: ExitStatus::from_raw(1 << 8),
            output: "E1 listen tcp 127.0.0.1:6443: bind: address already in use".into(),
        };
        assert_eq!(
            exited.to_string(),
            "kube-apiserver exited (exit status: 1):\nE1 listen tcp 127.0.0.1:6443: bind: address already in use"
        );
        assert!(exited.port_taken(), "a port taken between choosing and binding is retried");
        let not_ready =
            Error::NotReady { url: "https://127.0.0.1:1".into(), timeout: READY_TIMEOUT, output: "tail".into() };
        assert_eq!(not_ready.to_string(), "kube-apiserver at https://127.0.0.1:1 not ready after 300s:\ntail");
        assert!(!not_ready.port_taken());
        let missing = Error::from(assets::Error::EtcdNotFound);
        assert!(!missing.port_taken());
        assert_eq!(missing.to_string(), assets::Error::EtcdNotFound.to_string(), "transparent");
    }

    #[test]
    fn the_sandboxs_errors_are_kept_as_the_source() {
        let error = sandbox_error("no such user".to_string());
        assert_eq!(error.to_string(), "no such user");
        assert_eq!(std::error::Error::source(&error).map(ToString::to_string), Some("no such user".into()));
    }
}
