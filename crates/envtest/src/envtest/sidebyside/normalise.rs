//! Normalising a run's objects and Events so that the two binaries' runs compare: generated
//! names, uids, IPs, timestamps and secrets become placeholders (the module doc of
//! [`super`] says which).

use serde_json::json;

use super::*;

/// The CSR collection (cluster-scoped: every scenario's CSRs are compared).
pub(super) const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// A CSR as compared: its request and certificate (keys and serials differ between runs) become
/// what they say (subject, SANs, lifetime), and condition times are dropped.
pub(super) fn summarise_csr(mut csr: Value) -> Value {
    use crate::x509::certificate::{certificate_sans, certificate_validity};
    let request_spki = request_spki(&csr);
    csr["spec"]["request"] = json!("<request>");
    // The requester's credential: each run's control plane has its own admin certificate.
    if let Some(extra) = csr["spec"]["extra"].as_object_mut() {
        extra.remove("authentication.kubernetes.io/credential-id");
        if extra.is_empty() {
            csr["spec"].as_object_mut().map(|s| s.remove("extra"));
        }
    }
    if let Some(conditions) = csr["status"]["conditions"].as_array_mut() {
        for condition in conditions {
            condition.as_object_mut().map(|c| {
                c.remove("lastUpdateTime");
                c.remove("lastTransitionTime")
            });
        }
    }
    let Some(encoded) = csr["status"]["certificate"].as_str() else { return csr };
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
    let summary = crate::x509::pem_blocks(&pem).first().map(|(_, der)| {
        let subject = crate::x509::subject(der).unwrap_or_default();
        let (dns, ips) = certificate_sans(der).unwrap_or_default();
        let lifetime = certificate_validity(der).map(|(from, to)| from.duration_until(to).as_secs());
        let mut summary = json!({"commonName": subject.common_name, "organizations": subject.organizations,
            "dnsNames": dns, "ipAddresses": ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "lifetimeSeconds": lifetime});
        if let Some(fields) = certificate_fields(der, request_spki.as_deref())
            && let Some(summary) = summary.as_object_mut()
        {
            summary.extend(fields);
        }
        summary
    });
    csr["status"]["certificate"] = summary.unwrap_or(json!("<unreadable>"));
    csr
}

/// The SubjectPublicKeyInfo of a CSR's request, to tell whether a certificate carries it.
fn request_spki(csr: &Value) -> Option<Vec<u8>> {
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(csr["spec"]["request"].as_str()?).ok()?;
    let (_, der) = crate::x509::pem_blocks(&pem).into_iter().next()?;
    crate::x509::request::parse_csr_der(&der).ok().map(|r| r.spki)
}

/// The bytes of a certificate that both runs must write alike, from the plain walk of its
/// structure: the exact subject, the signature algorithm, whether the key is the request's,
/// and every extension as written, the authority key identifier (each run's CA has its own
/// key) reduced to its presence.
fn certificate_fields(der: &[u8], request_spki: Option<&[u8]>) -> Option<Map<String, Value>> {
    use crate::x509::read;
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let parts = crate::x509::certificate::certificate_parts(der)?;
    let mut extensions = Vec::new();
    for extension in &parts.extensions {
        let (inner, _) = read(extension, 0x30)?;
        let (oid, _) = read(inner, 0x06)?;
        let written = if oid == crate::x509::oid::OID_AKI { "<the CA's key id>".to_string() } else { hex(extension) };
        extensions.push(json!({"oid": hex(oid), "extension": written}));
    }
    let spki = match request_spki {
        Some(requested) if requested == parts.spki => json!("<the request's>"),
        _ => json!(hex(parts.spki)),
    };
    let fields = json!({"subject": hex(parts.subject), "signatureAlgorithm": hex(parts.signature_algorithm),
        "publicKey": spki, "extensions": extensions});
    fields.as_object().cloned()
}

/// Turns the objects and Events read at one checkpoint into their comparable form.
pub fn normalise(label: &str, objects: Vec<Value>, events: Vec<Value>, ca_pem: &str) -> Snapshot {
    normalise_remembering(label, objects, events, ca_pem, &mut Remembered::default())
}

/// What one run's checkpoints carry over to the next ones.
#[derive(Debug, Default)]
pub(super) struct Remembered {
    /// Renames derived from uids (an Event keeps naming a claim's volume after both are gone).
    uids: HashMap<String, String>,
    /// `generateName` prefixes (a pod's status keeps naming its generated ResourceClaim after
    /// the claim was deleted): such names are masked `prefix*`.
    prefixes: BTreeSet<String>,
}

/// [`normalise`], also renaming the uids and masking the generated names `remembered` from
/// earlier checkpoints, and remembering this checkpoint's.
pub(super) fn normalise_remembering(
    label: &str,
    objects: Vec<Value>,
    events: Vec<Value>,
    ca_pem: &str,
    remembered: &mut Remembered,
) -> Snapshot {
    let mut names = Renames::new(ca_pem);
    names.exact.extend(remembered.uids.iter().map(|(k, v)| (k.clone(), v.clone())));
    names.prefixes.extend(remembered.prefixes.iter().cloned());
    names.learn(&objects, &events);
    let uid_derived = |raw: &str| is_uuid(raw) || raw.strip_prefix("pvc-").is_some_and(is_uuid);
    remembered.uids.extend(names.exact.iter().filter(|(raw, _)| uid_derived(raw)).map(|(k, v)| (k.clone(), v.clone())));
    let generated = objects.iter().filter_map(|o| o["metadata"]["generateName"].as_str()).filter(|p| !p.is_empty());
    remembered.prefixes.extend(generated.map(str::to_string));
    let mut compared = BTreeMap::new();
    for object in objects {
        let mut object = strip(object);
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if kind == "Secret"
            && object["type"] == "kubernetes.io/service-account-token"
            && let Some(token) = object["data"].get_mut("token")
        {
            *token = json!("<token>");
        }
        names.apply(&mut object);
        sort_addresses(&mut object);
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        compared.insert(format!("{kind} {ns}/{name}"), object);
    }
    let events = events.iter().map(|event| names.event_line(event)).collect();
    Snapshot { label: label.to_string(), objects: compared, events, settled: true }
}

/// Endpoints and EndpointSlices list addresses in the order of their IPs, which follow the
/// nodes' pod CIDRs (the simulated kubelets number pods within them): compared as sets.
pub(super) fn sort_addresses(object: &mut Value) {
    let sort = |list: &mut Value| {
        if let Some(items) = list.as_array_mut() {
            items.sort_by_key(|item| item.to_string());
        }
    };
    if let Some(subsets) = object["subsets"].as_array_mut() {
        for subset in subsets {
            sort(&mut subset["addresses"]);
            sort(&mut subset["notReadyAddresses"]);
        }
    }
    if object["kind"] == "EndpointSlice" {
        sort(&mut object["endpoints"]);
    }
}

/// Drops what says nothing about behaviour: uid, resourceVersion, creation time, managed fields.
pub(super) fn strip(mut object: Value) -> Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in ["resourceVersion", "creationTimestamp", "managedFields", "selfLink"] {
            metadata.remove(field);
        }
    }
    if let Some(object) = object.as_object_mut() {
        object.remove("apiVersion");
    }
    // A volume's phase change time, and the claim version its binding saw.
    object["status"].as_object_mut().map(|s| s.remove("lastPhaseTransitionTime"));
    object["spec"]["claimRef"].as_object_mut().map(|r| r.remove("resourceVersion"));
    // A CronJob's active Jobs are referenced with their resourceVersion, as its own.
    if let Some(active) = object.get_mut("status").and_then(|s| s.get_mut("active")).and_then(Value::as_array_mut) {
        for reference in active {
            reference.as_object_mut().map(|r| r.remove("resourceVersion"));
        }
    }
    // The simulated kubelets' random machine identities.
    if let Some(info) = object["status"]["nodeInfo"].as_object_mut() {
        for field in ["machineID", "systemUUID", "bootID"] {
            if info.contains_key(field) {
                info.insert(field.into(), json!("<id>"));
            }
        }
    }
    object
}

/// What normalising replaces.
pub(super) struct Renames {
    /// Whole strings replaced (uids, IPs, the CA).
    exact: HashMap<String, String>,
    /// Names replaced wherever they occur, longest first.
    names: Vec<(String, String)>,
    /// Prefixes followed by a random 5-character suffix: unknown such names become `prefix*`.
    prefixes: BTreeSet<String>,
}

impl Renames {
    fn new(ca_pem: &str) -> Renames {
        use base64::Engine;
        let mut exact = HashMap::new();
        exact.insert(ca_pem.to_string(), "<cluster CA>".to_string());
        exact.insert(base64::engine::general_purpose::STANDARD.encode(ca_pem), "<cluster CA, base64>".to_string());
        // The service-account token volume kube-apiserver's admission adds to every pod.
        let prefixes = BTreeSet::from(["kube-api-access-".to_string()]);
        Renames { exact, names: Vec::new(), prefixes }
    }

    fn learn(&mut self, objects: &[Value], events: &[Value]) {
        for object in objects {
            let metadata = &object["metadata"];
            if let Some(prefix) = metadata["generateName"].as_str().filter(|p| !p.is_empty()) {
                self.prefixes.insert(prefix.to_string());
            }
            let kind = object["kind"].as_str().unwrap_or_default();
            if matches!(kind, "ReplicaSet" | "ReplicationController" | "Service" | "Deployment") {
                self.prefixes.insert(format!("{}-", metadata["name"].as_str().unwrap_or_default()));
            }
        }
        for event in events {
            if let Some(name) = event["involvedObject"]["name"].as_str() {
                self.prefixes.insert(format!("{name}-"));
            }
        }
        // Generated names: numbered within each (kind, namespace, generateName) in the order of
        // the objects' content with every generated name masked.
        let mut groups: BTreeMap<(String, String, String), Vec<(String, String)>> = BTreeMap::new();
        for object in objects {
            let metadata = &object["metadata"];
            let name = metadata["name"].as_str().unwrap_or_default();
            let Some(prefix) = metadata["generateName"].as_str().filter(|p| !p.is_empty() && name.starts_with(p))
            else {
                continue;
            };
            let mut shape = strip(object.clone());
            shape["metadata"].as_object_mut().map(|m| m.remove("name"));
            shape["metadata"].as_object_mut().map(|m| m.remove("uid"));
            self.mask(&mut shape);
            let key = (
                object["kind"].as_str().unwrap_or_default().to_string(),
                metadata["namespace"].as_str().unwrap_or_default().to_string(),
                prefix.to_string(),
            );
            groups.entry(key).or_default().push((shape.to_string(), name.to_string()));
        }
        for ((_, _, prefix), mut members) in groups {
            members.sort();
            for (i, (_, name)) in members.into_iter().enumerate() {
                self.names.push((name, format!("{prefix}#{}", i + 1)));
            }
        }
        self.learn_scheduled_names(objects, events);
        self.names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        for object in objects.iter().filter(|o| o["kind"] == "PersistentVolumeClaim") {
            // The simulated provisioner's volume, named after the claim's uid.
            let name = self.rename(object["metadata"]["name"].as_str().unwrap_or_default());
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                self.exact.insert(format!("pvc-{uid}"), format!("volume({name})"));
            }
        }
        for object in objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            let raw = object["metadata"]["name"].as_str().unwrap_or_default();
            let name = self.exact.get(raw).cloned().unwrap_or_else(|| self.rename(raw));
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                self.exact.insert(uid.to_string(), format!("uid({kind}/{name})"));
            }
            if kind == "Service" {
                // kube-apiserver allocates cluster IPs at random.
                let ips = object["spec"]["clusterIPs"].as_array().into_iter().flatten();
                for ip in ips.chain(std::iter::once(&object["spec"]["clusterIP"])).filter_map(Value::as_str) {
                    self.exact.insert(ip.to_string(), format!("clusterIP({name})"));
                }
            }
            if kind == "Pod" {
                let status = &object["status"];
                let ips = status["podIPs"].as_array().into_iter().flatten().map(|ip| &ip["ip"]);
                for ip in ips.chain(std::iter::once(&status["podIP"])).filter_map(Value::as_str) {
                    self.exact.insert(ip.to_string(), format!("ip({name})"));
                }
            }
        }
    }

    /// A CronJob's Jobs are named `<cronjob>-<scheduled minute since the epoch>`, which differ
    /// between runs: renamed `<cronjob>-<minute+k>`, counted from the earliest minute named in
    /// the snapshot's Jobs and Events.
    fn learn_scheduled_names(&mut self, objects: &[Value], events: &[Value]) {
        let cron_jobs: Vec<&str> =
            objects.iter().filter(|o| o["kind"] == "CronJob").filter_map(|o| o["metadata"]["name"].as_str()).collect();
        let job_names = objects.iter().filter(|o| o["kind"] == "Job").filter_map(|o| o["metadata"]["name"].as_str());
        let messages = events.iter().filter_map(|e| e["message"].as_str());
        let mut found: BTreeSet<(String, u64)> = BTreeSet::new();
        for text in job_names.chain(messages) {
            for cron_job in &cron_jobs {
                let prefix = format!("{cron_job}-");
                for (at, _) in text.match_indices(prefix.as_str()) {
                    let preceded =
                        text[..at].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
                    let digits: String = text[at + prefix.len()..].chars().take_while(char::is_ascii_digit).collect();
                    if !preceded
                        && digits.len() >= 7
                        && let Ok(minute) = digits.parse()
                    {
                        found.insert((format!("{prefix}{digits}"), minute));
                    }
                }
            }
        }
        let Some(first) = found.iter().map(|(_, minute)| *minute).min() else { return };
        for (name, minute) in found {
            let cron_job = name.rsplit_once('-').map(|(c, _)| c).unwrap_or_default();
            self.names.push((name.clone(), format!("{cron_job}-<minute+{}>", minute - first)));
        }
    }

    /// A name (or any text) with the known generated names replaced and unknown ones masked.
    fn rename(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (name, placeholder) in &self.names {
            if text.contains(name.as_str()) {
                text = text.replace(name.as_str(), placeholder);
            }
        }
        self.mask_unknown(&text)
    }

    /// Masks `prefix` + 5 random characters (Kubernetes' `utilrand.String(5)` alphabet) with
    /// `prefix*`.
    fn mask_unknown(&self, text: &str) -> String {
        let mut out = text.to_string();
        for prefix in &self.prefixes {
            let mut from = 0;
            while let Some(at) = out[from..].find(prefix.as_str()) {
                let start = from + at + prefix.len();
                let rest = &out[start..];
                let suffix: String = rest.chars().take(5).collect();
                let after = rest.chars().nth(5);
                let boundary = after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '#'));
                if suffix.len() == 5 && suffix.chars().all(|c| crate::random::ALPHANUMS.contains(c)) && boundary {
                    out.replace_range(start..start + 5, "*");
                    from = start + 1;
                } else {
                    from = start;
                }
            }
        }
        out
    }

    /// Applies every replacement to every string (and key) of `value`.
    fn apply(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|item| self.apply(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                *map = entries
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.apply(&mut item);
                        (self.rename(&key), item)
                    })
                    .collect::<Map<String, Value>>();
            }
            _ => {}
        }
    }

    /// Masks only (for an object's shape): generated names to `prefix*`, IPs, times, uids.
    fn mask(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                let masked = generic_mask(s).unwrap_or_else(|| self.mask_unknown(s));
                *s = if is_ipv4(&masked) { "<ip>".into() } else { masked };
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.mask(item)),
            _ => {}
        }
    }

    fn text(&self, s: &str) -> String {
        if let Some(replacement) = self.exact.get(s) {
            return replacement.clone();
        }
        generic_mask(s).unwrap_or_else(|| self.rename(s))
    }

    /// One Event as a line: type, reason, involved object, message, source.
    fn event_line(&self, event: &Value) -> String {
        let involved = &event["involvedObject"];
        let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let source = match field(&event["source"]["component"]) {
            empty if empty.is_empty() => field(&event["reportingComponent"]),
            component => component,
        };
        let mut message = self.rename(&field(&event["message"]));
        // Longest first, so that `pvc-<uid>` is renamed before the `<uid>` inside it.
        let mut exact: Vec<(&String, &String)> = self.exact.iter().filter(|(raw, _)| raw.len() > 6).collect();
        exact.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        for (raw, replacement) in exact {
            if message.contains(raw.as_str()) {
                message = message.replace(raw.as_str(), replacement);
            }
        }
        // The uid of an object no checkpoint saw (a claim deleted between two).
        let message = mask_uuids(&message);
        format!(
            "{} {} {}/{}: {} (by {source})",
            field(&event["type"]),
            field(&event["reason"]),
            field(&involved["kind"]),
            self.rename(&field(&involved["name"])),
            message
        )
    }
}

/// Placeholders for values that differ on every run whatever the controllers do.
pub(super) fn generic_mask(s: &str) -> Option<String> {
    if is_timestamp(s) {
        Some("<time>".into())
    } else if is_uuid(s) {
        Some("<uid>".into())
    } else if s.contains("-----BEGIN") {
        Some("<pem>".into())
    } else if s.starts_with("eyJ") && s.matches('.').count() == 2 {
        Some("<token>".into())
    } else if let Some(("containerd", _)) = s.split_once("://") {
        // The simulated kubelet's random container IDs.
        Some("containerd://<id>".into())
    } else {
        None
    }
}

/// RFC 3339 times as the API writes them (`2025-11-26T00:33:45Z`, with optional fraction).
pub(super) fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && (s.ends_with('Z') || s[19..].contains(['+', '-']))
}

/// `text` with every UUID in it replaced by `<uid>`.
pub(super) fn mask_uuids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.len() >= 36 && rest.is_char_boundary(36) && is_uuid(&rest[..36]) {
            out.push_str("<uid>");
            rest = &rest[36..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

pub(super) fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() })
}

pub(super) fn is_ipv4(s: &str) -> bool {
    s.parse::<std::net::Ipv4Addr>().is_ok()
}
