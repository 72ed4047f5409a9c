//! The `pod-template-hash` of a pod template (upstream `controller.ComputeHash`).
//!
//! Temporary body on this branch: FNV-32a over the template's JSON (upstream hashes a go-spew
//! dump), then the collision count as 8 little-endian bytes, then `rand.SafeEncodeString` of the
//! decimal sum. The exact upstream-compatible version replaces this file when merged.

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// `rand.SafeEncodeString`'s alphabet: no vowels, no confusable characters.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `ComputeHash`: the hash of `template`, salted with `collision_count` when it is set.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut write = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u32::from(*byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    write(&serde_json::to_vec(template).unwrap_or_default());
    if let Some(count) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        write(&bytes);
    }
    hash.to_string().bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": image}]}}))
        .unwrap()
    }

    #[test]
    fn hash_is_stable_safe_and_salted_by_the_collision_count() {
        let hash = pod_template_hash(&template("nginx:1.27"), None);
        assert_eq!(hash, pod_template_hash(&template("nginx:1.27"), None));
        assert!(hash.bytes().all(|b| ALPHANUMS.contains(&b)), "{hash}");
        assert_ne!(hash, pod_template_hash(&template("nginx:1.28"), None));
        assert_ne!(hash, pod_template_hash(&template("nginx:1.27"), Some(1)));
        assert_ne!(
            pod_template_hash(&template("nginx:1.27"), Some(1)),
            pod_template_hash(&template("nginx:1.27"), Some(2))
        );
    }
}
