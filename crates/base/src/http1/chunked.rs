//! The chunked transfer coding (RFC 9112 §7.1), decoded by one decoder for the three HTTP/1.1
//! users of this process: the watch client pushes bytes into it as its non-blocking socket
//! yields them ([`ChunkedDecoder::decode`]), the secure port reads a request body whole
//! ([`read_body`]) and the fault proxy copies a body with its framing ([`copy_body`]).
//!
//! As strict as Go's `net/http/internal` chunked reader, which kube-apiserver and upstream's
//! secure port use: a chunk size is hex digits only (no sign, no `0x`, no overflow), its line is
//! at most [`MAX_SIZE_LINE`] bytes with its extensions, a chunk's data is followed by CRLF, and
//! the trailers end at an empty line. A declared chunk over the body's limit is refused before
//! any of it is read.

use std::io::{self, BufRead, Write};

/// The longest chunk-size line with its extensions and line end (Go's `maxLineLength`).
pub const MAX_SIZE_LINE: usize = 4096;
/// The longest trailer section (as a head: kube-apiserver sends none).
pub const MAX_TRAILERS: usize = 64 * 1024;

/// Where the decoder is in the body.
#[derive(Debug)]
enum State {
    /// Reading a chunk-size line (the bytes so far).
    Size(Vec<u8>),
    /// Inside a chunk: this many data bytes are left.
    Data(usize),
    /// After a chunk's data: its CRLF (how many of the two bytes are left).
    DataEnd(u8),
    /// After the last chunk: trailers up to the empty line (the current line so far, and the
    /// section's size so far).
    Trailers(Vec<u8>, usize),
    Done,
}

/// A chunked body's decoder, fed any split of the wire bytes.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// How many more data bytes the body may declare.
    allowed: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder for a body of any size (a watch stream has no end in sight).
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder::with_limit(usize::MAX)
    }

    /// A decoder for a body of at most `max_data` bytes of data.
    pub fn with_limit(max_data: usize) -> ChunkedDecoder {
        ChunkedDecoder { state: State::Size(Vec::new()), allowed: max_data }
    }

    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Decodes from the start of `input`, appending the body's data to `out`, and returns how
    /// many bytes of `input` belong to the body: all of them unless the body ended inside it
    /// (what follows is the next message's).
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<usize> {
        let mut rest = input;
        while !rest.is_empty() {
            match &mut self.state {
                State::Size(line) => {
                    let end = rest.iter().position(|b| *b == b'\n');
                    let take = end.map_or(rest.len(), |e| e + 1);
                    line.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if line.len() > MAX_SIZE_LINE {
                        return Err(invalid(format!("a chunk-size line longer than {MAX_SIZE_LINE} bytes")));
                    }
                    if end.is_some() {
                        let size = chunk_size(line)?;
                        if size > self.allowed {
                            return Err(invalid(format!("a chunk of {size} bytes over the body's limit")));
                        }
                        self.allowed -= size;
                        self.state = if size == 0 { State::Trailers(Vec::new(), 0) } else { State::Data(size) };
                    }
                }
                State::Data(left) => {
                    let take = rest.len().min(*left);
                    out.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    *left -= take;
                    if *left == 0 {
                        self.state = State::DataEnd(2);
                    }
                }
                State::DataEnd(left) => {
                    let expected = if *left == 2 { b'\r' } else { b'\n' };
                    if rest[0] != expected {
                        return Err(invalid("a chunk's data is not followed by CRLF".into()));
                    }
                    rest = &rest[1..];
                    *left -= 1;
                    if *left == 0 {
                        self.state = State::Size(Vec::new());
                    }
                }
                State::Trailers(line, total) => {
                    let byte = rest[0];
                    rest = &rest[1..];
                    line.push(byte);
                    *total += 1;
                    if *total > MAX_TRAILERS {
                        return Err(invalid(format!("a chunked body's trailers longer than {MAX_TRAILERS} bytes")));
                    }
                    if byte == b'\n' {
                        if line.as_slice() == b"\n" || line.as_slice() == b"\r\n" {
                            self.state = State::Done;
                        } else {
                            line.clear();
                        }
                    }
                }
                State::Done => break,
            }
        }
        Ok(input.len() - rest.len())
    }
}

/// The size of a chunk-size line (`1a3f;ext\r\n`).
fn chunk_size(line: &[u8]) -> io::Result<usize> {
    let text = std::str::from_utf8(line).map_err(|_| invalid("a chunk-size line is not text".into()))?;
    let digits = text.trim_end_matches(['\r', '\n']).split(';').next().unwrap_or_default().trim();
    // from_str_radix alone would take a sign (`+5`); Go's chunked reader takes hex digits only.
    let hex = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit());
    let size = hex.then(|| usize::from_str_radix(digits, 16).ok()).flatten();
    size.ok_or_else(|| invalid(format!("bad chunk size {digits:?}")))
}

/// Reads a whole chunked body of at most `max_data` bytes of data from `reader`, leaving what
/// follows it unread.
pub fn read_body(reader: &mut impl BufRead, max_data: usize) -> io::Result<Vec<u8>> {
    let mut decoder = ChunkedDecoder::with_limit(max_data);
    let mut body = Vec::new();
    while !decoder.is_done() {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Err(cut_short());
        }
        let used = decoder.decode(available, &mut body)?;
        reader.consume(used);
    }
    Ok(body)
}

/// Copies a chunked body from `reader` to `out` as it arrives, framing and all, checking the
/// framing as it goes; `out` is flushed after each read, so that a watch's events pass one by
/// one. What follows the body is left unread.
pub fn copy_body(reader: &mut impl BufRead, out: &mut impl Write) -> io::Result<()> {
    let mut decoder = ChunkedDecoder::new();
    let mut scratch = Vec::new();
    while !decoder.is_done() {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Err(cut_short());
        }
        scratch.clear();
        let used = decoder.decode(available, &mut scratch)?;
        out.write_all(&available[..used])?;
        out.flush()?;
        reader.consume(used);
    }
    Ok(())
}

fn cut_short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "end of stream inside a chunked body")
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests;
