//! For the controllers' unit tests: an API server on the loopback that answers every request
//! with one error `Status`, so a test can check that the kind of an API error (a 409 Conflict)
//! reaches the queue through a controller's own error type; or with one object, so a test can
//! see what a write sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::client::{Client, ClientOptions};

/// A server answering every request with one error (or one object), and a client of it.
pub struct ErrorServer {
    /// A client of the server.
    pub client: Client,
    requests: Arc<AtomicUsize>,
    /// Each request's line (`PUT /api/v1/...`) and body, in order.
    received: Arc<Mutex<Vec<(String, String)>>>,
}

impl ErrorServer {
    /// A server whose every answer is a `Status` with this code and reason.
    pub fn answering(code: u16, reason: &str) -> ErrorServer {
        ErrorServer::answering_with(code, reason, serde_json::Value::Null)
    }

    /// [`ErrorServer::answering`] with `details` (e.g. `causes`) in the `Status`.
    pub fn answering_with(code: u16, reason: &str, details: serde_json::Value) -> ErrorServer {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": format!("the test server answers {code} {reason}"), "details": details,
        });
        ErrorServer::serving(code, reason, body.to_string())
    }

    /// A server answering every request with `200 OK` and this object.
    pub fn returning(object: serde_json::Value) -> ErrorServer {
        ErrorServer::serving(200, "OK", object.to_string())
    }

    fn serving(code: u16, reason: &str, body: String) -> ErrorServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let requests = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (counted, recorded) = (requests.clone(), received.clone());
        let reason = reason.to_string();
        std::thread::spawn(move || {
            for socket in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                answer(socket, code, &reason, &body, &recorded);
            }
        });
        let config = crate::client::config::load(None, Some(&url)).expect("a config");
        let client = Client::new(config, ClientOptions::default()).expect("a client");
        ErrorServer { client, requests, received }
    }

    /// A server answering every request with a 409 Conflict.
    pub fn conflict() -> ErrorServer {
        ErrorServer::answering(409, "Conflict")
    }

    /// How many requests it has answered.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The requests it has read: each one's line (`PUT /api/v1/...`) and body.
    pub fn received(&self) -> Vec<(String, String)> {
        self.received.lock().clone()
    }
}

/// Reads one request (head and body), records it and answers it, closing the connection.
fn answer(socket: TcpStream, code: u16, reason: &str, body: &str, received: &Mutex<Vec<(String, String)>>) {
    let mut reader = BufReader::new(socket);
    let mut length = 0;
    let mut request_line = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if request_line.is_none() {
            request_line = Some(line.to_string());
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
    let request = (request_line.unwrap_or_default(), String::from_utf8_lossy(&request_body).into_owned());
    received.lock().push(request);
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut socket = reader.into_inner();
    let _ = socket.write_all(head.as_bytes()).and_then(|()| socket.write_all(body.as_bytes()));
}
