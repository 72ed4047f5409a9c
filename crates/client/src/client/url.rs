//! The few pieces of URL handling the client needs: query encoding and the server's host.

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay as they are).
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Builds `?k=v&…` from the pairs whose value is set.
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> =
        pairs.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", encode(v)))).collect();
    if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
}

/// Why a server URL has no `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostPortError {
    /// No `scheme://`.
    #[error("server URL {0:?} has no scheme")]
    NoScheme(String),
    /// Nothing after `scheme://`.
    #[error("server URL {0:?} has no host")]
    NoHost(String),
}

/// `host:port` of a server URL, the `host` label of the client metrics.
pub fn host_port(server: &str) -> Result<String, HostPortError> {
    let (scheme, rest) = server.split_once("://").ok_or_else(|| HostPortError::NoScheme(server.to_string()))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(HostPortError::NoHost(server.to_string()));
    }
    let has_port = match authority.rfind(']') {
        Some(bracket) => authority[bracket..].contains(':'),
        None => authority.contains(':'),
    };
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if scheme == "http" { 80 } else { 443 })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_selectors() {
        assert_eq!(encode("app in (a,b),tier!=db"), "app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb");
        assert_eq!(query(&[("labelSelector", Some("a=b".into())), ("limit", None)]), "?labelSelector=a%3Db");
        assert_eq!(query(&[("limit", None)]), "");
    }

    #[test]
    fn host_port_defaults_the_port() {
        assert_eq!(host_port("https://10.0.0.1:6443").unwrap(), "10.0.0.1:6443");
        assert_eq!(host_port("https://api.example.com/prefix").unwrap(), "api.example.com:443");
        assert_eq!(host_port("http://[::1]").unwrap(), "[::1]:80");
        assert_eq!(host_port("https://[fd00::1]:6443").unwrap(), "[fd00::1]:6443");
        assert!(host_port("10.0.0.1:6443").is_err());
    }
}
