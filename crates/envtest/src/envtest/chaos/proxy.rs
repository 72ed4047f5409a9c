//! A plain TCP forwarder per controller-manager replica: each connects upstream from its own
//! loopback source address (127.0.0.N), so kube-apiserver's audit log (`sourceIPs`) tells the
//! replicas apart, and [`Proxy::cut`] partitions one replica from the API alone.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::Arc;

use parking_lot::Mutex;

/// A TCP forwarder from a local port to the API server. [`Proxy::cut`] partitions its replica
/// from the API: open connections are cut and new ones accepted but never answered, so
/// requests hang as behind a dead network.
pub struct Proxy {
    port: u16,
    source: Ipv4Addr,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    cut: bool,
    /// Every socket of every connection, to shut them down on a cut (and to hold them after).
    sockets: Vec<TcpStream>,
}

/// Why a replica's proxy did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No loopback port to listen on.
    #[error("proxy: {source}")]
    Bind {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The port it listens on cannot be read.
    #[error(transparent)]
    Addr(std::io::Error),
}

impl Proxy {
    /// Listens on 127.0.0.1:<free port> and forwards to `upstream` from `source` (any
    /// 127.0.0.0/8 address: Linux answers the whole range on loopback).
    pub fn start(upstream: SocketAddr, source: Ipv4Addr) -> Result<Proxy, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| Error::Bind { source })?;
        let port = listener.local_addr().map_err(Error::Addr)?.port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        // The thread ends with the process; a blocked accept cannot be woken portably.
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                forward(&shared, client, upstream, source);
            }
        });
        Ok(Proxy { port, source, state })
    }

    /// The local port replicas connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:<port>`, the URL to put in the replica's kubeconfig.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The source address kube-apiserver sees (the audit log's `sourceIPs`).
    pub fn source(&self) -> Ipv4Addr {
        self.source
    }

    /// Cuts every open connection and leaves new ones unanswered.
    pub fn cut(&self) {
        let mut state = self.state.lock();
        state.cut = true;
        for socket in state.sockets.drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

fn forward(state: &Mutex<State>, client: TcpStream, upstream: SocketAddr, source: Ipv4Addr) {
    let mut state = state.lock();
    if state.cut {
        state.sockets.push(client);
        return;
    }
    let Ok(server) = connect_from(source, upstream) else { return };
    for (from, to) in [(&client, &server), (&server, &client)] {
        let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else { return };
        std::thread::spawn(move || {
            let mut buffer = [0; 16 * 1024];
            while let Ok(n @ 1..) = from.read(&mut buffer) {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    }
    state.sockets.extend([client, server]);
}

/// A TCP connection to `to` bound to `source` first (std has no bind-before-connect).
fn connect_from(source: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else { return TcpStream::connect(to) };
    let sockaddr = |addr: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns until it is handed to
    // TcpStream (or closed on error); the sockaddr structs outlive the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(SocketAddrV4::new(source, 0));
        if libc::bind(fd, (&raw const local).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sockaddr(to);
        if libc::connect(fd, (&raw const remote).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_from_the_chosen_source_address_until_cut() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = server.local_addr().unwrap();
        let proxy = Proxy::start(upstream, Ipv4Addr::new(127, 0, 0, 7)).unwrap();
        let mut client = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
        let (mut accepted, peer) = server.accept().unwrap();
        assert_eq!(peer.ip(), std::net::IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)));
        client.write_all(b"ping").unwrap();
        let mut buffer = [0; 4];
        accepted.read_exact(&mut buffer).unwrap();
        assert_eq!(&buffer, b"ping");
        proxy.cut();
        let mut rest = Vec::new();
        // The cut closes the upstream side: the server reads end-of-stream.
        assert_eq!(accepted.read_to_end(&mut rest).unwrap_or(0), 0);
    }
}
