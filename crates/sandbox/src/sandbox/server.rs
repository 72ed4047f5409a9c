//! The sandbox as one running thing: store, PKI, API layer, HTTP(S) listener and the objects
//! kube-apiserver creates at start-up, with the handles tests use to inject faults.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::client::config::RestConfig;
use crate::sandbox::apiserver::audit::AuditLog;
use crate::sandbox::apiserver::faults::Faults;
use crate::sandbox::apiserver::{ApiOptions, ApiServer};
use crate::sandbox::auth::{self, Credentials, Pki, Tokens, UserInfo};
use crate::sandbox::storage::objects;
use crate::sandbox::storage::services::ServiceRange;
use crate::sandbox::storage::store::{DEFAULT_HISTORY, Store};
use crate::server::http::HttpServer;

/// How to run the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Serve plain HTTP and treat callers without credentials as cluster admins (tests).
    pub plain_http: bool,
    /// Changes kept for watches; older resourceVersions are Gone.
    pub history: usize,
    /// How often watches that asked for bookmarks get a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// kube-apiserver's `--service-cluster-ip-range`: where Services' ClusterIPs are allocated from.
    pub service_range: ServiceRange,
    /// The `WatchList` feature gate: watches with `sendInitialEvents` (the initial state as
    /// ADDED events, then a bookmark). On by default, as in kube-apiserver v1.36 (on again since
    /// v1.34, after v1.33 turned it off); off, such watches are refused with 422.
    pub watch_list: bool,
    /// kube-apiserver's `--authorization-mode`. `AlwaysAllow` (the default here) lets every
    /// authenticated request through; `RBAC` (kubeadm's `Node,RBAC`) enforces the bootstrap
    /// policy, which is created at start either way.
    pub authorization_mode: AuthorizationMode,
}

/// Why the sandbox did not start or listen again.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The PKI or the TLS config.
    #[error(transparent)]
    Pki(#[from] auth::Error),
    /// Generating the service-account key.
    #[error("service account key: {0}")]
    ServiceAccountKey(#[source] rcgen::Error),
    /// Loading the generated service-account key.
    #[error(transparent)]
    SigningKey(#[from] crate::jwt::KeyError),
    /// Binding the listen address.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// Binding the address again after a pause (the last of the attempts).
    #[error("cannot listen on {addr} again: {source}")]
    Relisten {
        /// The address.
        addr: SocketAddr,
        /// The last bind error.
        #[source]
        source: std::io::Error,
    },
}

/// An `--authorization-mode` the sandbox does not implement.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizationModeError {
    /// A mode other than AlwaysAllow, Node and RBAC.
    #[error("authorization mode {0:?} is not supported by the sandbox (AlwaysAllow, Node, RBAC)")]
    Unsupported(String),
    /// Node alone.
    #[error("authorization mode Node needs RBAC in the sandbox: use Node,RBAC")]
    NodeWithoutRbac,
}

/// How requests are authorized (kube-apiserver's `--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed.
    #[default]
    AlwaysAllow,
    /// RBAC, with the Node authorizer approximated (see `auth/rbac.rs`).
    Rbac,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = AuthorizationModeError;

    /// A comma-separated list as kube-apiserver takes it: `AlwaysAllow`, `RBAC`, `Node,RBAC`.
    fn from_str(raw: &str) -> Result<AuthorizationMode, AuthorizationModeError> {
        let modes: Vec<&str> = raw.split(',').map(str::trim).collect();
        if let Some(bad) = modes.iter().find(|m| !matches!(**m, "AlwaysAllow" | "RBAC" | "Node")) {
            return Err(AuthorizationModeError::Unsupported(bad.to_string()));
        }
        match (modes.contains(&"RBAC"), modes.contains(&"Node")) {
            (true, _) => Ok(AuthorizationMode::Rbac),
            (false, true) => Err(AuthorizationModeError::NodeWithoutRbac),
            (false, false) => Ok(AuthorizationMode::AlwaysAllow),
        }
    }
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            listen: "127.0.0.1:6443".parse().expect("valid address"),
            plain_http: false,
            history: DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(60),
            service_range: ServiceRange::default(),
            watch_list: true,
            authorization_mode: AuthorizationMode::AlwaysAllow,
        }
    }
}

/// A running sandbox API server.
pub struct Sandbox {
    api: Arc<ApiServer>,
    pki: Pki,
    /// The service-account signing key (kubeadm's `sa.key`), PKCS#8 PEM.
    service_account_key_pem: String,
    admin: Credentials,
    controller_manager: Credentials,
    addr: SocketAddr,
    plain_http: bool,
    server: Mutex<Option<HttpServer>>,
}

/// The user kubeadm's admin.conf authenticates as.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// The user kubeadm's controller-manager.conf authenticates as.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

impl Sandbox {
    /// Generates the PKI and the service-account key, creates what kube-apiserver creates when it
    /// starts, and starts listening.
    pub fn start(options: SandboxOptions) -> Result<Sandbox, Error> {
        let pki = Pki::generate(options.listen.ip())?;
        let admin = pki.client_credentials(ADMIN_USER, &["system:masters"])?;
        let controller_manager = pki.client_credentials(CONTROLLER_MANAGER_USER, &[])?;
        let store = Arc::new(Store::new(options.history));
        let service_account_key_pem = rcgen::KeyPair::generate().map_err(Error::ServiceAccountKey)?.serialize_pem();
        let service_account_key = crate::jwt::SigningKey::from_pem(service_account_key_pem.as_bytes())?;
        let api = Arc::new(ApiServer {
            store,
            tokens: Arc::new(Tokens::default()),
            service_account_key: Some(Arc::new(service_account_key)),
            audit: Arc::new(AuditLog::default()),
            faults: Arc::new(Faults::default()),
            options: ApiOptions {
                anonymous_is_admin: options.plain_http,
                bookmark_interval: options.bookmark_interval,
                service_range: options.service_range,
                watch_list: options.watch_list,
                rbac: options.authorization_mode == AuthorizationMode::Rbac,
            },
        });
        // kube-apiserver v1.36's watch caches start from the revision etcd has as it starts,
        // before its post-start hooks create the bootstrap objects: a watch from any
        // resourceVersion since (`resourceVersion=1`) gets those changes (checked against it;
        // v1.33's caches started after the bootstrap, which made such watches too old).
        api.store.start_watch_window();
        bootstrap(&api, options.service_range, &options.listen, &pki.ca_pem);
        let tls = if options.plain_http { None } else { Some(pki.server_config()?) };
        let server = HttpServer::start(options.listen, tls, api.clone())
            .map_err(|source| Error::Listen { addr: options.listen, source })?;
        let addr = server.addr();
        let scheme = if options.plain_http { "http" } else { "https" };
        kubeadm_cluster_info(&api, &format!("{scheme}://{addr}"), &pki.ca_pem);
        Ok(Sandbox {
            api,
            pki,
            service_account_key_pem,
            admin,
            controller_manager,
            addr,
            plain_http: options.plain_http,
            server: Mutex::new(Some(server)),
        })
    }

    /// The address it listens on (the actual port when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:port` (or `http://`).
    pub fn url(&self) -> String {
        format!("{}://{}", if self.plain_http { "http" } else { "https" }, self.addr)
    }

    /// The cluster CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The CA's private key, PKCS#8 PEM (kubeadm's `ca.key`).
    pub fn ca_key_pem(&self) -> String {
        self.pki.ca_key_pem()
    }

    /// The objects stored, for tests that look behind the API.
    pub fn store(&self) -> &Store {
        &self.api.store
    }

    /// Injected failures and delays.
    pub fn faults(&self) -> &Faults {
        &self.api.faults
    }

    /// The bearer tokens the server accepts.
    pub fn tokens(&self) -> &Tokens {
        &self.api.tokens
    }

    /// Who made which request, most recent last.
    pub fn audit(&self) -> &AuditLog {
        &self.api.audit
    }

    /// The private key whose public half verifies legacy service-account tokens: what
    /// `--service-account-private-key-file` of the controller manager should hold.
    pub fn service_account_key_pem(&self) -> &str {
        &self.service_account_key_pem
    }

    /// A client config for a cluster admin (`system:masters`), for tests and the demo.
    pub fn admin_config(&self) -> RestConfig {
        self.rest_config(&self.admin, ADMIN_USER)
    }

    /// A client config for `system:kube-controller-manager`, as kubeadm's controller-manager.conf.
    pub fn controller_manager_config(&self) -> RestConfig {
        self.rest_config(&self.controller_manager, CONTROLLER_MANAGER_USER)
    }

    /// A client config authenticating with a client certificate for any user.
    pub fn user_config(&self, user: &str, groups: &[&str]) -> Result<RestConfig, auth::Error> {
        let credentials = self.pki.client_credentials(user, groups)?;
        Ok(self.rest_config(&credentials, user))
    }

    /// A bearer token the server accepts for `user`.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.api.tokens.add(token, UserInfo::new(user, groups), None);
    }

    fn rest_config(&self, credentials: &Credentials, user: &str) -> RestConfig {
        if self.plain_http {
            return auth::rest_config(&self.url(), None, None, format!("sandbox ({user})"));
        }
        auth::rest_config(&self.url(), Some(&self.pki.ca_pem), Some(credentials), format!("sandbox ({user})"))
    }

    /// Writes `admin.conf`-style kubeconfigs: the admin's at `path`, the controller manager's
    /// beside it as `controller-manager.conf`, the service-account key as `sa.key` and the CA as
    /// `ca.crt`. Returns
    /// both kubeconfig paths.
    pub fn write_kubeconfigs(&self, path: &Path) -> Result<(PathBuf, PathBuf), auth::Error> {
        auth::write_kubeadm_files(
            path,
            &self.url(),
            &self.pki.ca_pem,
            &self.pki.ca_key_pem(),
            &self.admin,
            &self.controller_manager,
            &self.service_account_key_pem,
        )
    }

    /// Ends every open watch (clients must re-watch) and cuts every open connection, requests
    /// in flight included, as a restarting API server would.
    pub fn close_watches(&self) {
        self.api.faults.close_watches();
        if let Some(server) = self.server.lock().as_ref() {
            server.cut_connections();
        }
    }

    /// Forgets the change history: resourceVersions from before now are Gone.
    pub fn compact(&self) {
        self.api.store.compact();
    }

    /// Stops listening, as a crashed or restarting API server; the state is kept.
    pub fn pause(&self) {
        self.api.faults.close_watches();
        if let Some(server) = self.server.lock().take() {
            server.stop();
        }
    }

    /// Listens again on the same address after [`Sandbox::pause`].
    pub fn resume(&self) -> Result<(), Error> {
        let mut slot = self.server.lock();
        if slot.is_some() {
            return Ok(());
        }
        let tls = if self.plain_http { None } else { Some(self.pki.server_config()?) };
        // The old socket may linger briefly; retry the bind for a moment (50 attempts, 100ms
        // apart).
        let mut attempts = 0;
        loop {
            match HttpServer::start(self.addr, tls.clone(), self.api.clone()) {
                Ok(server) => {
                    *slot = Some(server);
                    return Ok(());
                }
                Err(source) => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(100));
                    if attempts == 50 {
                        return Err(Error::Relisten { addr: self.addr, source });
                    }
                }
            }
        }
    }

    /// Stops the server for good.
    pub fn stop(&self) {
        self.pause();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What kube-apiserver creates when it starts: the four system namespaces, the `kubernetes`
/// Service and its endpoints, the system PriorityClasses, the bootstrap RBAC policy, and the
/// ConfigMaps of its start-up hooks. `client_ca_pem` is the CA of its client certificates.
fn bootstrap(api: &ApiServer, range: ServiceRange, listen: &SocketAddr, client_ca_pem: &str) {
    let now = objects::now();
    let meta = |name: &str, ns: Option<&str>| {
        let mut m = json!({"name": name, "uid": crate::random::uuid(), "creationTimestamp": now});
        if let Some(ns) = ns {
            m["namespace"] = ns.into();
        }
        m
    };
    let mut objects: Vec<(&'static str, Value)> = Vec::new();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        objects.push((
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": labelled(meta(ns, None), json!({"kubernetes.io/metadata.name": ns})),
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        ));
    }
    let cluster_ip = range.first().to_string();
    let port = listen.port();
    objects.push((
        "services",
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": labelled(meta("kubernetes", Some("default")), json!({"component": "apiserver", "provider": "kubernetes"})),
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip], "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
            "status": {"loadBalancer": {}}}),
    ));
    // The default-servicecidr controller's `kubernetes` ServiceCIDR, Ready as it sets it, and
    // the IPAddress of the `kubernetes` Service.
    objects.push((
        "servicecidrs",
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": meta("kubernetes", None),
            "spec": {"cidrs": [range.cidr()]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now, "reason": "",
                "message": "Kubernetes default Service CIDR is ready"}]}}),
    ));
    objects.push((
        "ipaddresses",
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": labelled(meta(&cluster_ip, None), json!({"ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": crate::sandbox::storage::services::IP_ALLOCATOR})),
            "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "kubernetes"}}}),
    ));
    let host = listen.ip().to_string();
    objects.push((
        "endpoints",
        json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": labelled(meta("kubernetes", Some("default")), json!({"endpointslice.kubernetes.io/skip-mirror": "true"})),
            "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}),
    ));
    objects.push((
        "endpointslices",
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": labelled(meta("kubernetes", Some("default")), json!({"kubernetes.io/service-name": "kubernetes"})),
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
    ));
    // The legacy token tracking controller records when kube-apiserver began tracking use.
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date().strftime("%Y-%m-%d").to_string();
    objects.push((
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta("kube-apiserver-legacy-service-account-token-tracking", Some("kube-system")),
            "data": {"since": today}}),
    ));
    objects.push((
        "configmaps",
        extension_apiserver_authentication(meta(AUTHENTICATION_CONFIGMAP, Some("kube-system")), client_ca_pem),
    ));
    for (name, value) in [("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)] {
        objects.push((
            "priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta(name, None),
                "value": value, "preemptionPolicy": "PreemptLowerPriority",
                "description": "Used for system critical pods that must not be moved from their current node."}),
        ));
    }
    // The aggregated metrics APIs, as registered APIServices; the sandbox serves them itself,
    // so they read as local ones do.
    for (group, version) in crate::sandbox::metrics_api::GROUPS {
        objects.push((
            "apiservices",
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": meta(&format!("{version}.{group}"), None),
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 100, "versionPriority": 100},
                "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now,
                    "reason": "Local", "message": "Local APIServices are always available"}]}}),
        ));
    }
    // Not kube-apiserver's: the default StorageClass of the simulated provisioner.
    let mut class = crate::sandbox::nodes::provisioner::default_class();
    class["metadata"]["uid"] = meta("", None)["uid"].clone();
    class["metadata"]["creationTimestamp"] = now.clone().into();
    objects.push(("storageclasses", class));
    // And the simulated CSI driver's CSIDriver.
    let mut driver = crate::sandbox::nodes::csi::csi_driver();
    driver["metadata"]["uid"] = meta("", None)["uid"].clone();
    driver["metadata"]["creationTimestamp"] = now.clone().into();
    objects.push(("csidrivers", driver));
    // The rbac/bootstrap-roles post-start hook, which kube-apiserver runs whatever its
    // authorization mode (the RBAC REST storage is always installed).
    for (storage, mut object) in crate::sandbox::auth::bootstrap_policy::objects() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let ns = object["metadata"]["namespace"].as_str().map(str::to_string);
        let fresh = meta(&name, ns.as_deref());
        for key in ["uid", "creationTimestamp"] {
            object["metadata"][key] = fresh[key].clone();
        }
        objects.push((storage, object));
    }
    put_all(api, objects);
}

/// What `kubeadm init` writes for joining nodes (its `bootstrap-token` phase,
/// `clusterinfo.CreateBootstrapConfigMapIfNotExists`): `kube-public/cluster-info` with a
/// kubeconfig naming only the cluster (clientcmd's rendering of an unnamed cluster), and, with
/// RBAC, the Role and RoleBinding that let anonymous clients read it.
fn kubeadm_cluster_info(api: &ApiServer, server: &str, ca_pem: &str) {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
    );
    let meta = |name: &str| json!({"name": name, "namespace": "kube-public", "uid": crate::random::uuid(), "creationTimestamp": objects::now()});
    let mut objects = vec![(
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cluster-info"), "data": {"kubeconfig": kubeconfig}}),
    )];
    if api.options.rbac {
        let name = "kubeadm:bootstrap-signer-clusterinfo";
        objects.push((
            "roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name),
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}]}),
        ));
        objects.push((
            "rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(name),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]}),
        ));
    }
    put_all(api, objects);
}

/// Stores the objects in one write (which cannot fail: nothing is checked).
fn put_all(api: &ApiServer, objects: Vec<(&'static str, Value)>) {
    let written = api.store.write::<_, Infallible>(|txn| {
        for (storage, object) in objects {
            txn.put(storage, object);
        }
        Ok(())
    });
    let Ok(()) = written;
}

/// The ConfigMap in kube-system that tells delegating servers how kube-apiserver
/// authenticates clients.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";

/// kube-apiserver's `ClientCARegistrationHook` (pkg/controlplane/apiserver/client_ca_hook.go):
/// `client-ca-file` holds its client CA bundle. The `requestheader-*` keys are written only
/// with a front-proxy CA (`--requestheader-client-ca-file`), which the sandbox does not have.
fn extension_apiserver_authentication(metadata: Value, client_ca_pem: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"client-ca-file": client_ca_pem}})
}

/// Metadata with labels.
fn labelled(mut meta: Value, labels: Value) -> Value {
    meta["labels"] = labels;
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_modes_parse_as_kube_apiservers_flag() {
        assert_eq!("AlwaysAllow".parse::<AuthorizationMode>(), Ok(AuthorizationMode::AlwaysAllow));
        assert_eq!("RBAC".parse::<AuthorizationMode>(), Ok(AuthorizationMode::Rbac));
        assert_eq!("Node,RBAC".parse::<AuthorizationMode>(), Ok(AuthorizationMode::Rbac));
        assert!("Node".parse::<AuthorizationMode>().unwrap_err().to_string().contains("Node,RBAC"));
        assert!("Webhook,RBAC".parse::<AuthorizationMode>().unwrap_err().to_string().contains("\"Webhook\""));
    }
}
