//! HTTP/1.1 framing shared by the process's three hand-held HTTP/1.1 exchanges: the watch
//! client (`client::watch_connection`), the secure port (`server::http`) and the test bed's
//! fault proxy (`envtest::faultproxy`). One decoder of each framing, hardened and fuzzed once
//! for all three (docs/reliability.md, "Fuzzing").

pub mod chunked;
pub mod head;
#[cfg(any(test, feature = "fixtures"))]
pub mod testing;
