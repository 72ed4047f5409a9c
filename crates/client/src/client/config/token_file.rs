//! Bearer tokens kept in files that are rotated in place (projected service-account tokens,
//! kubeconfig `tokenFile`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use super::{CachedToken, TokenFile};

/// How often [`TokenFile::token`] looks at the file; between looks it costs one lock.
const RECHECK_INTERVAL: Duration = Duration::from_secs(1);

impl TokenFile {
    /// Reads the token once; fails if the file cannot be read or holds only whitespace.
    pub fn new(path: impl Into<PathBuf>) -> Result<TokenFile, TokenFileError> {
        let path = path.into();
        let (token, stamp) = read_token(&path)?;
        Ok(TokenFile::with_token(path, token, stamp))
    }

    /// A token file whose file could not be read yet: `token` is used until it can be. This is
    /// client-go's behaviour when a kubeconfig sets both `token` and `tokenFile`.
    pub(super) fn with_fallback(path: PathBuf, token: String) -> TokenFile {
        TokenFile::with_token(path, token, Stamp::default())
    }

    fn with_token(path: PathBuf, token: String, stamp: Stamp) -> TokenFile {
        let cached = CachedToken {
            token,
            modified: stamp.modified,
            len: stamp.len,
            checked_at: Instant::now(),
            last_error: None,
        };
        TokenFile { path, cached: Mutex::new(cached) }
    }

    /// The current token: the cached one, re-read first if the file's modification time or
    /// size changed (looked at no more than once per second). When a re-read fails, the last
    /// good token is kept and a warning logged.
    pub fn token(&self) -> String {
        self.token_at(Instant::now())
    }

    fn token_at(&self, now: Instant) -> String {
        let mut cached = self.cached.lock();
        if now.saturating_duration_since(cached.checked_at) >= RECHECK_INTERVAL {
            cached.checked_at = now;
            if let Err(error) = self.refresh(&mut cached) {
                // The text is what is compared: the same problem again is not logged again.
                let message = error.to_string();
                if cached.last_error.as_ref() != Some(&message) {
                    log::warn!("{message}; keeping the previous token");
                    cached.last_error = Some(message);
                }
            }
        }
        cached.token.clone()
    }

    /// Re-reads the file if it changed since the cached token was read.
    fn refresh(&self, cached: &mut CachedToken) -> Result<(), TokenFileError> {
        let stamp = Stamp::of(&self.path)?;
        if stamp == (Stamp { modified: cached.modified, len: cached.len }) {
            return Ok(());
        }
        let (token, stamp) = read_token(&self.path)?;
        cached.token = token;
        cached.modified = stamp.modified;
        cached.len = stamp.len;
        cached.last_error = None;
        Ok(())
    }
}

/// Why a token file gives no token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read (or looked at).
    #[error("cannot read token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The file holds only whitespace.
    #[error("token file {} is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

impl TokenFileError {
    fn read(path: &Path) -> impl FnOnce(std::io::Error) -> TokenFileError + '_ {
        move |source| TokenFileError::Read { path: path.to_path_buf(), source }
    }
}

/// What a token file looked like when it was read; a different stamp means it changed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

impl Stamp {
    fn of(path: &Path) -> Result<Stamp, TokenFileError> {
        let meta = fs::metadata(path).map_err(TokenFileError::read(path))?;
        Ok(Stamp { modified: meta.modified().ok(), len: meta.len() })
    }
}

/// Reads and trims a token (as client-go does), taking the stamp first so that a write racing
/// with the read shows up as a change at the next look.
fn read_token(path: &Path) -> Result<(String, Stamp), TokenFileError> {
    let stamp = Stamp::of(path)?;
    let text = fs::read_to_string(path).map_err(TokenFileError::read(path))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TokenFileError::Empty { path: path.to_path_buf() });
    }
    Ok((token.to_owned(), stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token file in a folder of its own, removed when dropped.
    struct TempToken {
        dir: PathBuf,
        path: PathBuf,
    }

    impl TempToken {
        fn new(test: &str, content: &str) -> TempToken {
            let name = format!("kcm-token-file-{}-{test}", std::process::id());
            let dir = std::env::temp_dir().join(name);
            fs::create_dir_all(&dir).expect("create temp dir");
            let path = dir.join("token");
            fs::write(&path, content).expect("write token");
            TempToken { dir, path }
        }
    }

    impl Drop for TempToken {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn reads_and_trims_the_token() {
        let temp = TempToken::new("trim", "  abc\n");
        let path = temp.path.clone();
        let file = TokenFile::new(&path).expect("token file");
        assert_eq!(file.token(), "abc");
    }

    #[test]
    fn picks_up_a_changed_file_only_after_the_recheck_interval() {
        let temp = TempToken::new("change", "first");
        let path = temp.path.clone();
        let file = TokenFile::new(&path).expect("token file");
        fs::write(&path, "second-token").expect("rewrite token");
        let start = file.cached.lock().checked_at;
        assert_eq!(file.token_at(start), "first", "no look before the interval");
        assert_eq!(file.token_at(start + RECHECK_INTERVAL), "second-token");
    }

    #[test]
    fn keeps_the_last_good_token_when_the_file_breaks() {
        let temp = TempToken::new("broken", "good");
        let path = temp.path.clone();
        let file = TokenFile::new(&path).expect("token file");
        let start = file.cached.lock().checked_at;
        fs::write(&path, "\n\n").expect("empty the token");
        assert_eq!(file.token_at(start + RECHECK_INTERVAL), "good");
        assert!(file.cached.lock().last_error.as_deref().is_some_and(|e| e.contains("is empty")));
        fs::remove_file(&path).expect("remove token");
        assert_eq!(file.token_at(start + 2 * RECHECK_INTERVAL), "good");
        fs::write(&path, "fresh").expect("restore token");
        assert_eq!(file.token_at(start + 3 * RECHECK_INTERVAL), "fresh");
        assert_eq!(file.cached.lock().last_error, None);
    }

    #[test]
    fn fallback_token_is_used_until_the_file_appears() {
        let temp = TempToken::new("fallback", "from-file");
        let path = temp.path.clone();
        let file = TokenFile::with_fallback(path.with_file_name("missing"), "static".into());
        let start = file.cached.lock().checked_at;
        assert_eq!(file.token_at(start + RECHECK_INTERVAL), "static");
        fs::rename(&path, path.with_file_name("missing")).expect("move token in place");
        assert_eq!(file.token_at(start + 2 * RECHECK_INTERVAL), "from-file");
    }

    #[test]
    fn empty_or_missing_files_are_rejected() {
        let temp = TempToken::new("empty", " \n");
        let path = temp.path.clone();
        let err = TokenFile::new(&path).expect_err("empty token").to_string();
        assert_eq!(err, format!("token file {} is empty", path.display()));
        let missing = path.with_file_name("nope");
        let err = TokenFile::new(&missing).expect_err("missing token").to_string();
        assert!(err.starts_with(&format!("cannot read token file {}: ", missing.display())));
    }
}
