//! One DNS question (A or AAAA) to one server: the message format of RFC 1035 §4, over UDP,
//! and over TCP when the UDP answer comes back truncated (RFC 7766).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// Record types (RFC 1035 §3.2.2, RFC 3596).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    A = 1,
    Aaaa = 28,
}

const CLASS_IN: u16 = 1;
const FLAG_RESPONSE: u16 = 0x8000;
const FLAG_TRUNCATED: u16 = 0x0200;
const FLAG_RECURSION_DESIRED: u16 = 0x0100;
const RCODE_NXDOMAIN: u16 = 3;
const HEADER_LEN: usize = 12;
/// A UDP answer without EDNS is at most 512 bytes; a larger buffer costs nothing.
const UDP_BUFFER: usize = 4096;

/// What one server said about one question.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The name exists; these are its addresses of the asked type (none: no such records).
    Addresses(Vec<IpAddr>),
    /// NXDOMAIN: the name does not exist.
    NoSuchName,
}

/// Why one server gave no usable answer to one question.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The look-up's deadline passed before the question could be asked.
    #[error("the request's time limit passed")]
    Deadline,
    /// The name is longer than 253 bytes.
    #[error("{0:?} is longer than a DNS name may be")]
    NameTooLong(String),
    /// The name has an empty or over-long label.
    #[error("{name:?} is not a valid DNS name (label {label:?})")]
    InvalidName {
        /// The name.
        name: String,
        /// Its bad label.
        label: String,
    },
    /// The UDP exchange failed.
    #[error("UDP: {0}")]
    Udp(#[source] std::io::Error),
    /// No UDP answer came in time.
    #[error("UDP: no answer within {0:?}")]
    UdpTimeout(Duration),
    /// The TCP exchange (after a truncated UDP answer) failed.
    #[error("TCP (the UDP answer was truncated): {0}")]
    Tcp(#[source] std::io::Error),
    /// The TCP answer carries another query's id.
    #[error("TCP: the answer does not belong to the query")]
    TcpMismatch,
    /// The answer cannot be parsed.
    #[error("the DNS answer is malformed")]
    Malformed,
    /// The message is a query, not a response.
    #[error("the DNS answer is not a response")]
    NotAResponse,
    /// The server answered with an error code other than NXDOMAIN.
    #[error("the server answered {}", rcode_name(*.0))]
    Rcode(u16),
    /// The answer is about another name.
    #[error("the DNS answer is about {asked:?}, not {name:?}")]
    OtherName {
        /// The name the answer is about.
        asked: String,
        /// The name we asked about.
        name: String,
    },
}

/// Asks `server` for the `record` addresses of `name` within `timeout` (and before `deadline`),
/// over UDP, then over TCP if the answer was truncated. An error says what went wrong.
pub fn ask(
    server: SocketAddr,
    name: &str,
    record: RecordType,
    timeout: Duration,
    deadline: Option<Instant>,
) -> Result<Answer, Error> {
    let id = crate::random::u64() as u16;
    let query = encode_query(id, name, record)?;
    let wait = time_left(timeout, deadline)?;
    let reply = udp_exchange(server, &query, id, wait)?;
    let reply = if header_flags(&reply) & FLAG_TRUNCATED != 0 {
        tcp_exchange(server, &query, id, time_left(timeout, deadline)?)?
    } else {
        reply
    };
    decode_answer(&reply, name, record)
}

fn time_left(timeout: Duration, deadline: Option<Instant>) -> Result<Duration, Error> {
    let Some(deadline) = deadline else { return Ok(timeout) };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Error::Deadline);
    }
    Ok(timeout.min(left))
}

/// A standard query with recursion desired and one question.
pub fn encode_query(id: u16, name: &str, record: RecordType) -> Result<Vec<u8>, Error> {
    let mut message = Vec::with_capacity(HEADER_LEN + name.len() + 6);
    for word in [id, FLAG_RECURSION_DESIRED, 1, 0, 0, 0] {
        message.extend_from_slice(&word.to_be_bytes());
    }
    if name.len() > 253 {
        return Err(Error::NameTooLong(name.to_string()));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(Error::InvalidName { name: name.to_string(), label: label.to_string() });
        }
        message.push(label.len() as u8);
        message.extend_from_slice(label.as_bytes());
    }
    message.push(0);
    message.extend_from_slice(&(record as u16).to_be_bytes());
    message.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(message)
}

fn udp_exchange(server: SocketAddr, query: &[u8], id: u16, wait: Duration) -> Result<Vec<u8>, Error> {
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let io = Error::Udp;
    let socket = UdpSocket::bind(local).map_err(io)?;
    // A connected socket only receives datagrams from the server itself.
    socket.connect(server).map_err(io)?;
    socket.send(query).map_err(io)?;
    let until = Instant::now() + wait;
    let mut buffer = vec![0; UDP_BUFFER];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::UdpTimeout(wait));
        }
        socket.set_read_timeout(Some(left)).map_err(io)?;
        match socket.recv(&mut buffer) {
            // Stale or spoofed answers to other queries are dropped; the wait goes on.
            Ok(n) if n >= HEADER_LEN && buffer[..2] == id.to_be_bytes() => return Ok(buffer[..n].to_vec()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(Error::UdpTimeout(wait));
            }
            Err(e) => return Err(io(e)),
        }
    }
}

fn tcp_exchange(server: SocketAddr, query: &[u8], id: u16, wait: Duration) -> Result<Vec<u8>, Error> {
    let io = Error::Tcp;
    let mut stream = TcpStream::connect_timeout(&server, wait).map_err(io)?;
    stream.set_read_timeout(Some(wait)).map_err(io)?;
    stream.set_write_timeout(Some(wait)).map_err(io)?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed).map_err(io)?;
    let mut length = [0; 2];
    stream.read_exact(&mut length).map_err(io)?;
    let mut reply = vec![0; u16::from_be_bytes(length) as usize];
    stream.read_exact(&mut reply).map_err(io)?;
    if reply.len() < HEADER_LEN || reply[..2] != id.to_be_bytes() {
        return Err(Error::TcpMismatch);
    }
    Ok(reply)
}

fn header_flags(message: &[u8]) -> u16 {
    u16::from_be_bytes([message[2], message[3]])
}

/// Reads the addresses of type `record` from an answer to the question (`name`, `record`).
/// Records of other types (the CNAME chain a recursive server adds) are skipped.
pub fn decode_answer(message: &[u8], name: &str, record: RecordType) -> Result<Answer, Error> {
    let malformed = || Error::Malformed;
    if message.len() < HEADER_LEN {
        return Err(malformed());
    }
    let flags = header_flags(message);
    let count = |at: usize| u16::from_be_bytes([message[at], message[at + 1]]);
    if flags & FLAG_RESPONSE == 0 {
        return Err(Error::NotAResponse);
    }
    match flags & 0x000f {
        0 => {}
        RCODE_NXDOMAIN => return Ok(Answer::NoSuchName),
        code => return Err(Error::Rcode(code)),
    }
    let (questions, answers) = (count(4), count(6));
    let mut at = HEADER_LEN;
    for _ in 0..questions {
        let (asked, next) = read_name(message, at).ok_or_else(malformed)?;
        if !asked.eq_ignore_ascii_case(name) {
            return Err(Error::OtherName { asked, name: name.to_string() });
        }
        at = next + 4;
    }
    let mut addresses = Vec::new();
    for _ in 0..answers {
        let (_, next) = read_name(message, at).ok_or_else(malformed)?;
        let fixed = message.get(next..next + 10).ok_or_else(malformed)?;
        let kind = u16::from_be_bytes([fixed[0], fixed[1]]);
        let class = u16::from_be_bytes([fixed[2], fixed[3]]);
        let length = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        let data = message.get(next + 10..next + 10 + length).ok_or_else(malformed)?;
        if class == CLASS_IN && kind == record as u16 {
            match (record, data.len()) {
                (RecordType::A, 4) => addresses.push(IpAddr::from(<[u8; 4]>::try_from(data).unwrap_or_default())),
                (RecordType::Aaaa, 16) => addresses.push(IpAddr::from(<[u8; 16]>::try_from(data).unwrap_or_default())),
                _ => return Err(malformed()),
            }
        }
        at = next + 10 + length;
    }
    Ok(Answer::Addresses(addresses))
}

/// Reads a possibly compressed name (RFC 1035 §4.1.4) at `at`; returns it and where the
/// record continues. Pointers may only point backwards, so a loop cannot happen.
pub(super) fn read_name(message: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut labels: Vec<String> = Vec::new();
    let mut resume = None;
    loop {
        let length = *message.get(at)? as usize;
        match length {
            0 => return Some((labels.join("."), resume.unwrap_or(at + 1))),
            l if l & 0xc0 == 0xc0 => {
                let target = ((l & 0x3f) << 8) | *message.get(at + 1)? as usize;
                if target >= at {
                    return None;
                }
                resume.get_or_insert(at + 2);
                at = target;
            }
            l if l <= 63 => {
                labels.push(String::from_utf8_lossy(message.get(at + 1..at + 1 + l)?).into_owned());
                at += 1 + l;
            }
            _ => return None,
        }
    }
}

fn rcode_name(code: u16) -> String {
    match code {
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        other => format!("error code {other}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An answer to `query` (as a server builds it): the question echoed, then the records
    /// (type, data), each named by a pointer to the question's name.
    pub(crate) fn reply(query: &[u8], rcode: u16, truncated: bool, records: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut message = query[..2].to_vec();
        let flags =
            FLAG_RESPONSE | FLAG_RECURSION_DESIRED | 0x0080 | rcode | if truncated { FLAG_TRUNCATED } else { 0 };
        for word in [flags, 1, records.len() as u16, 0, 0] {
            message.extend_from_slice(&word.to_be_bytes());
        }
        message.extend_from_slice(&query[HEADER_LEN..]);
        for (kind, data) in records {
            message.extend_from_slice(&[0xc0, HEADER_LEN as u8]);
            for word in [*kind, CLASS_IN, 0, 60, data.len() as u16] {
                message.extend_from_slice(&word.to_be_bytes());
            }
            message.extend_from_slice(data);
        }
        message
    }

    #[test]
    fn encodes_a_standard_query() {
        let query = encode_query(0xabcd, "api.k8s", RecordType::Aaaa).unwrap();
        let expected =
            [&[0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..], b"\x03api\x03k8s\x00", &[0, 28, 0, 1]].concat();
        assert_eq!(query, expected);
        assert!(encode_query(1, "a..b", RecordType::A).unwrap_err().to_string().contains("not a valid DNS name"));
        assert!(encode_query(1, &"x".repeat(64), RecordType::A).is_err());
    }

    #[test]
    fn decodes_addresses_past_a_cname() {
        let query = encode_query(7, "api.example", RecordType::A).unwrap();
        let mut cname = b"\x03lb1".to_vec();
        cname.extend_from_slice(&[0xc0, HEADER_LEN as u8]);
        let records = [(5, cname), (1, vec![10, 0, 0, 1]), (1, vec![10, 0, 0, 2])];
        let answer = decode_answer(&reply(&query, 0, false, &records), "api.example", RecordType::A).unwrap();
        assert_eq!(answer, Answer::Addresses(vec![IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2])]));
    }

    #[test]
    fn decodes_nxdomain_and_failures() {
        let query = encode_query(7, "api.example", RecordType::A).unwrap();
        let nx = decode_answer(&reply(&query, 3, false, &[]), "api.example", RecordType::A).unwrap();
        assert_eq!(nx, Answer::NoSuchName);
        let servfail =
            decode_answer(&reply(&query, 2, false, &[]), "api.example", RecordType::A).unwrap_err().to_string();
        assert_eq!(servfail, "the server answered SERVFAIL");
        let other =
            decode_answer(&reply(&query, 0, false, &[]), "other.example", RecordType::A).unwrap_err().to_string();
        assert!(other.contains("not \"other.example\""), "{other}");
        let mut cut = reply(&query, 0, false, &[(1, vec![10, 0, 0, 1])]);
        cut.truncate(cut.len() - 2);
        assert_eq!(
            decode_answer(&cut, "api.example", RecordType::A).unwrap_err().to_string(),
            "the DNS answer is malformed"
        );
    }

    #[test]
    fn rejects_forward_pointers() {
        let message = [0xc0, 0x00];
        assert_eq!(read_name(&message, 0), None);
        assert_eq!(read_name(b"\x01a\x00", 0), Some(("a".into(), 3)));
    }
}
