//! For the controllers' unit tests: an API server on the loopback that answers every request
//! with one error `Status`, so a test can check that the kind of an API error (a 409 Conflict)
//! reaches the queue through a controller's own error type.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::client::{Client, ClientOptions};

/// A server answering every request with one error, and a client of it.
pub struct ErrorServer {
    /// A client of the server.
    pub client: Client,
    requests: Arc<AtomicUsize>,
}

impl ErrorServer {
    /// A server whose every answer is a `Status` with this code and reason.
    pub fn answering(code: u16, reason: &str) -> ErrorServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": format!("the test server answers {code} {reason}"),
        })
        .to_string();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let reason = reason.to_string();
        std::thread::spawn(move || {
            for socket in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                answer(socket, code, &reason, &body);
            }
        });
        let config = crate::client::config::load(None, Some(&url)).expect("a config");
        ErrorServer { client: Client::new(config, ClientOptions::default()).expect("a client"), requests }
    }

    /// A server answering every request with a 409 Conflict.
    pub fn conflict() -> ErrorServer {
        ErrorServer::answering(409, "Conflict")
    }

    /// How many requests it has answered.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one request (head and body) and answers it, closing the connection.
fn answer(socket: TcpStream, code: u16, reason: &str, body: &str) {
    let mut reader = BufReader::new(socket);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut request_body = vec![0; length];
    if reader.read_exact(&mut request_body).is_err() {
        return;
    }
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut socket = reader.into_inner();
    let _ = socket.write_all(head.as_bytes()).and_then(|()| socket.write_all(body.as_bytes()));
}
