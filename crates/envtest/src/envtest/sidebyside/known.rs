//! The differences between the two binaries' runs that are understood and accepted, each
//! with its reason.

/// A difference that is understood and accepted.
#[derive(Debug)]
pub struct KnownDifference {
    /// The scenario it occurs in; empty for any.
    pub scenario: &'static str,
    /// A part of [`Difference::subject`].
    pub subject_contains: &'static str,
    /// The start of [`Difference::path`] ("" for any).
    pub path_prefix: &'static str,
    /// A part of either side's value ("" for any).
    pub value_contains: &'static str,
    /// Why the difference is accepted.
    pub reason: &'static str,
}

pub(super) const SURVIVOR_TIE: &str = "scaling a ReplicaSet without an owner from 5 to 1, both delete the 2 newest \
     pods, then 2 of the 3 first ones, which tie on every rule of ActivePodsWithRanks (same readiness and \
     creation second, no co-location ranking for an unowned ReplicaSet); upstream breaks the tie with an \
     unstable sort of a randomly ordered lister list, so the survivor's node varies from run to run";

pub(super) const RING_CANNOT_VERIFY: &str = "the request's signature uses what ring, which verifies signatures here, \
     lacks (ECDSA on P-224 or P-521, ECDSA with SHA-1 or SHA-512, RSA below 2048 bits with SHA-384): upstream's \
     signer verifies and signs it, ours cannot verify it, so it never signs it and retries as upstream does for a \
     signature that fails (kcm_base::x509::samples::NOT_VERIFIED, docs/security.md)";

/// Differences found, understood and accepted (see each reason). They depend on timing (what
/// triggered a controller's last sync, how events were batched), which no two runs share.
pub const KNOWN_DIFFERENCES: &[KnownDifference] = &[
    KnownDifference {
        scenario: "",
        subject_contains: "Error saving claim: Operation cannot be fulfilled on persistentvolumeclaims",
        path_prefix: "",
        value_contains: "",
        reason: "the binder's write of a new claim's storage-provisioner annotations may meet a conflict with \
                 another controller's write of the claim (both sides do, upstream too): timing",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "Endpoints ",
        path_prefix: ".metadata.annotations",
        value_contains: "endpoints.kubernetes.io/last-change-trigger-time",
        reason: "the endpoints controller sets the trigger-time annotation when the sync that wrote the \
                 Endpoints was triggered by a pod change, and clears it otherwise: timing",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "EndpointSlice ",
        path_prefix: ".metadata.annotations",
        value_contains: "endpoints.kubernetes.io/last-change-trigger-time",
        reason: "as for Endpoints: the annotation follows what triggered the last sync",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "EndpointSlice ",
        path_prefix: ".metadata.generation",
        value_contains: "",
        reason: "how many times a slice was written depends on how the pods' readiness changes fell \
                 between syncs (upstream wrote one slice 3 times within 33 ms as pods became ready, ours \
                 twice within 600 ms); the slice's content ends the same",
    },
    KnownDifference {
        scenario: "replicaset-scale",
        subject_contains: "Pod sbs/cache-#1",
        path_prefix: ".spec.nodeName",
        value_contains: "",
        reason: SURVIVOR_TIE,
    },
    KnownDifference {
        scenario: "replicaset-scale",
        subject_contains: "Pod sbs/cache-#1",
        path_prefix: ".status.hostIP",
        value_contains: "",
        reason: SURVIVOR_TIE,
    },
    KnownDifference {
        scenario: "",
        subject_contains: "Node /node-",
        path_prefix: ".spec.podCIDR",
        value_contains: "10.244.",
        reason: "the three nodes that exist when the controller starts are allocated concurrently (upstream \
                 runs 30 workers), so which of them gets 10.244.1.0/24 or 10.244.2.0/24 varies from run to \
                 run in both; the CIDRs handed out are the same",
    },
    KnownDifference {
        scenario: "node-ipam",
        subject_contains: "Node /static-2",
        path_prefix: ".spec.podCIDR",
        value_contains: "10.244.",
        reason: "after upstream's race below (a CIDR allocated to a node twice, refused with 422 and \
                 released), its CIDR set's next candidate has moved past the released CIDR, so the node \
                 added later gets the one after it (10.244.4.0/24 rather than 10.244.3.0/24)",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "CIDRAssignmentFailed",
        path_prefix: "",
        value_contains: "",
        reason: "upstream's range allocator sometimes handles a node twice before its informer shows \
                 the first PATCH, allocates a second CIDR, gets 422 from kube-apiserver (\"may specify no \
                 more than one CIDR for each IP family\") and records CIDRAssignmentFailed before \
                 releasing it; the node keeps its first CIDR: an upstream race",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "(combined from similar events): Create Pod web-",
        path_prefix: "",
        value_contains: "",
        reason: "the 10th distinct SuccessfulCreate message (Create Pod web-4) makes the Event recorder's \
                 aggregator write a combined Event and forget one remembered message picked at random \
                 (client-go's PopAny over a Go map); when web-1 is recreated by the rolling update, its \
                 message is repeated as is if remembered, or updates the combined Event if it was the one \
                 forgotten (1 in 10): the combined Event ends with web-4 or web-1 at random, in both",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "could not update claim data-web-",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: right after creating a pod the controller updates its claim's owner \
                 references from its cache (upstream's Update of the lister's copy) while the simulated \
                 provisioner binds the claim; when the bind reaches the cache later than the update is \
                 sent, the update gets 409, a FailedUpdate Event is recorded and the next sync retries",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "SuccessfulCreate StatefulSet/web: Create Pod web-",
        path_prefix: "",
        value_contains: "",
        reason: "which SuccessfulCreate messages stay single Events beside the combined one depends on \
                 the aggregator's random PopAny (above) and on the order the pods are created in, which a \
                 retried sync (the claim race above) changes; the pods themselves are compared",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "ClusterIPNotAllocated",
        path_prefix: "",
        value_contains: "",
        reason: "recorded by kube-apiserver's own ipallocator-repair-controller, not by the controller \
                 manager: its periodic repair pass sometimes runs between a Service's creation and the \
                 commit of its cluster IP's allocation, and reports the IP as not allocated",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "already exists (by endpoint-controller)",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: the endpoints controller creates a Service's Endpoints when its cache \
                 has none (upstream's endpointsLister.Get); a second sync (a pod became ready) that runs \
                 before the watch brings the Endpoints it just created tries again, gets AlreadyExists, \
                 records FailedToCreateEndpoint and retries with an update",
    },
    KnownDifference {
        scenario: "resourceclaim",
        subject_contains: "resource claim template \"gpu\": resourceclaimtemplate.resource.k8s.io \"gpu\" not found",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: the pods are created right after their template, on another watch; a \
                 controller whose pod event comes before the template's syncs the pod against a cache \
                 without the template (upstream's templateLister.Get), records FailedResourceClaimCreation \
                 and retries, then generates the claim. Each kind has its own watch cache in \
                 kube-apiserver, so either binary may get the pod first. The missing template's Event \
                 (pod lost) is still compared",
    },
    KnownDifference {
        scenario: "certificates-hostile",
        subject_contains: "CertificateSigningRequest /h-key-rsa1536-sha384",
        path_prefix: ".status.certificate",
        value_contains: "",
        reason: RING_CANNOT_VERIFY,
    },
    KnownDifference {
        scenario: "certificates-hostile",
        subject_contains: "CertificateSigningRequest /h-key-p224-sha256",
        path_prefix: ".status.certificate",
        value_contains: "",
        reason: RING_CANNOT_VERIFY,
    },
    KnownDifference {
        scenario: "certificates-hostile",
        subject_contains: "CertificateSigningRequest /h-key-p256-sha1",
        path_prefix: ".status.certificate",
        value_contains: "",
        reason: RING_CANNOT_VERIFY,
    },
    KnownDifference {
        scenario: "certificates-hostile",
        subject_contains: "CertificateSigningRequest /h-key-p256-sha512",
        path_prefix: ".status.certificate",
        value_contains: "",
        reason: RING_CANNOT_VERIFY,
    },
    KnownDifference {
        scenario: "certificates-hostile",
        subject_contains: "CertificateSigningRequest /h-key-p521-sha512",
        path_prefix: ".status.certificate",
        value_contains: "",
        reason: RING_CANNOT_VERIFY,
    },
];
