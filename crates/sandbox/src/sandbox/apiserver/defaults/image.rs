//! Image references, read as `pkg/util/parsers.ParseImageName` reads them (through
//! `github.com/distribution/reference.ParseNormalizedNamed`), far enough to find the tag that
//! decides a container's default `imagePullPolicy`.

/// `imagePullPolicy` for a container that sets none (`SetDefaults_Container`): `Always` when the
/// tag is `latest` (which no tag and no digest implies), `IfNotPresent` otherwise, including for
/// references that do not parse.
pub(super) fn pull_policy(image: &str) -> &'static str {
    if tag(image) == Some("latest") { "Always" } else { "IfNotPresent" }
}

/// Repository names (domain included) longer than this are rejected (`NameTotalLengthMax`).
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// The tag `ParseImageName` reports: the explicit tag, `latest` when there is neither a tag nor
/// a digest, `""` for a digest alone; `None` when the reference does not parse.
fn tag(image: &str) -> Option<&str> {
    // A bare 64-hex string is an image ID, not a name.
    if image.len() == 64 && image.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let (domain, remainder) = split_docker_domain(image);
    // The repository (before any tag) must be lowercase; a domain may have capitals.
    let repository = remainder.split(':').next().unwrap_or_default();
    if repository.chars().any(char::is_uppercase) {
        return None;
    }
    let (name_and_tag, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if digest.is_some_and(|d| !is_digest(d)) {
        return None;
    }
    let (name, tag) = match name_and_tag.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (name_and_tag, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) || !is_name(name) {
        return None;
    }
    // The length limit applies to the normalized name (`docker.io/library/…`).
    let implied = match domain {
        Some(_) => 0,
        None if remainder.contains('/') => "docker.io/".len(),
        None => "docker.io/library/".len(),
    };
    if implied + name.len() > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    Some(match (tag, digest) {
        (Some(tag), _) => tag,
        (None, None) => "latest",
        (None, Some(_)) => "",
    })
}

/// `splitDockerDomain`: the first path segment is a registry when it has a `.` or `:`, is
/// `localhost`, or has capitals; otherwise the image is on Docker Hub.
fn split_docker_domain(image: &str) -> (Option<&str>, &str) {
    match image.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':']) || first == "localhost" || first.chars().any(char::is_uppercase) =>
        {
            (Some(first), rest)
        }
        _ => (None, image),
    }
}

/// A repository name: path components, optionally after a registry host.
fn is_name(name: &str) -> bool {
    let is_path = |path: &str| path.split('/').all(is_path_component);
    is_path(name) || name.split_once('/').is_some_and(|(domain, path)| is_domain(domain) && is_path(path))
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or one or more `-`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator_start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[separator_start..i];
        if !matches!(separator, "." | "_" | "__") && !separator.bytes().all(|b| b == b'-') {
            return false;
        }
    }
}

/// A registry host (DNS name or bracketed IPv6 address) with an optional port.
fn is_domain(domain: &str) -> bool {
    let (host, port) = if domain.starts_with('[') {
        match domain.find(']') {
            Some(end) => domain.split_at(end + 1),
            None => return false,
        }
    } else {
        match domain.find(':') {
            Some(colon) => domain.split_at(colon),
            None => (domain, ""),
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => !ipv6.is_empty() && ipv6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':'),
        None => host.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
                && bytes[0] != b'-'
                && bytes[bytes.len() - 1] != b'-'
        }),
    };
    port_ok && host_ok
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes[1..].iter().all(|&b| word(b) || b == b'.' || b == b'-')
}

/// A digest of an algorithm go-digest knows, with its exact length of lowercase hex.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, encoded)) = digest.split_once(':') else { return false };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    encoded.len() == length && encoded.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        let sha = "sha256:".to_string() + &"a".repeat(64);
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("docker.io/library/nginx:latest", "Always"),
            ("localhost:5000/team/app", "Always"),
            ("localhost:5000/team/app:v2", "IfNotPresent"),
            ("registry.example.com:443/a/b-c__d.e:latest", "Always"),
            ("[::1]:5000/app", "Always"),
            (&format!("nginx@{sha}"), "IfNotPresent"),
            (&format!("nginx:latest@{sha}"), "Always"),
            ("nginx@sha256:abc", "IfNotPresent"),
            ("Nginx", "IfNotPresent"),
            ("nginx:Latest", "IfNotPresent"),
            ("MyRegistry.io/app", "Always"),
            ("", "IfNotPresent"),
            ("nginx:", "IfNotPresent"),
            ("a..b", "IfNotPresent"),
            (&"g".repeat(64), "Always"),
            (&"f".repeat(64), "IfNotPresent"),
            (&"x".repeat(240), "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(pull_policy(image), want, "{image}");
        }
    }
}
