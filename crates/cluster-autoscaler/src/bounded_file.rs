//! Reading the files the CLI and the live shell are given (kubeconfigs and the files they name,
//! service-account tokens and CAs, `--config`, `plan --snapshot`, scenarios, traces), each with
//! a size limit, so that a file that is `/dev/zero`, `/dev/urandom` or simply far too large is
//! refused with an error naming the file and the limit instead of being read until memory runs
//! out.
//!
//! It decides nothing about a file's content, and it must never read more than its limit (plus
//! one byte, to tell "exactly the limit" from "more"). Files read as a stream (trace CSVs) are
//! bounded per line by [`LineBounded`].

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

const MIB: u64 = 1024 * 1024;

/// A kubeconfig (`--kubeconfig`, `KUBECONFIG`, `--cloud-config`): kubectl's merged configs with
/// hundreds of contexts and embedded certificates stay in the single megabytes.
pub const KUBECONFIG_LIMIT: u64 = 16 * MIB;
/// A certificate, key or CA bundle named by a kubeconfig or mounted in the pod: a full public
/// CA bundle is about 0.3 MiB.
pub const CERTIFICATE_LIMIT: u64 = 4 * MIB;
/// A bearer token file (service-account tokens are about 1 KiB; no API server takes a header
/// near this size).
pub const TOKEN_LIMIT: u64 = MIB;
/// A `--config` `ClusterAutoscaler` resource.
pub const CONFIG_LIMIT: u64 = 16 * MIB;
/// A scenario file (`simulate`): workloads are described, not listed object by object.
pub const SCENARIO_LIMIT: u64 = 64 * MIB;
/// A `plan --snapshot` file: a cluster's objects as YAML. A 15,000-node cluster with 30 pods
/// per node is some hundreds of MiB; parsing takes a few times the file in memory.
pub const SNAPSHOT_LIMIT: u64 = 1024 * MIB;
/// One line of a trace CSV (a row is eight short columns).
pub const TRACE_LINE_LIMIT: u64 = 64 * 1024;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file cannot be opened or read.
    #[error("cannot read {what} {}: {error}", path.display())]
    Read {
        /// What the file is (`snapshot file`, `--kubeconfig`).
        what: String,
        /// The file.
        path: PathBuf,
        /// The system's error (part of the message, not a separate cause, so it prints once).
        error: std::io::Error,
    },
    /// The file holds more than the limit.
    #[error(
        "{what} {} is larger than {} (the limit for this file; is it the right file?)",
        path.display(),
        size(*limit)
    )]
    TooLarge {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{what} {} is not UTF-8 text: {error}", path.display())]
    NotText {
        /// What the file is.
        what: String,
        /// The file.
        path: PathBuf,
        /// Where the first invalid byte is.
        error: std::str::Utf8Error,
    },
}

/// `bytes` in the largest binary unit that divides it (`16 MiB`, `64 KiB`).
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

/// The bytes of `path`, at most `limit` of them; `what` names the file in errors.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let read_error = |error| FileError::Read {
        what: what.to_string(),
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    // The size a regular file announces sizes the buffer; devices announce 0.
    let hint = file.metadata().map(|m| m.len()).unwrap_or(0).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            what: what.to_string(),
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// The UTF-8 text of `path`, at most `limit` bytes; `what` names the file in errors.
pub fn read_bounded_text(path: &Path, limit: u64, what: &str) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| FileError::NotText {
        what: what.to_string(),
        path: path.to_path_buf(),
        error: e.utf8_error(),
    })
}

/// A line-by-line reader whose `read_line` refuses a line longer than its limit (an
/// `InvalidData` error naming the limit) after reading at most the limit plus one buffer.
#[derive(Debug)]
pub struct LineBounded<R> {
    inner: R,
    limit: u64,
}

impl<R: BufRead> LineBounded<R> {
    /// `inner`, with lines of at most `limit` bytes (line break included).
    pub fn new(inner: R, limit: u64) -> LineBounded<R> {
        LineBounded { inner, limit }
    }
}

impl<R: BufRead> Read for LineBounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl<R: BufRead> BufRead for LineBounded<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt)
    }

    fn read_line(&mut self, buf: &mut String) -> std::io::Result<usize> {
        let mut line = Vec::new();
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if (line.len() + take) as u64 > self.limit {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("line longer than {}", size(self.limit)),
                ));
            }
            line.extend_from_slice(&chunk[..take]);
            self.inner.consume(take);
            if done {
                break;
            }
        }
        let text = std::str::from_utf8(&line).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8: {e}"))
        })?;
        buf.push_str(text);
        Ok(line.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ca-bounded-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn endless_devices_are_refused_at_the_limit_naming_file_and_limit() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            let e = read_bounded(Path::new(dev), 4096, "snapshot file").unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e, FileError::TooLarge { limit: 4096, .. }),
                "{msg}"
            );
            assert!(msg.contains(dev) && msg.contains("4 KiB"), "{msg}");
            assert!(msg.contains("snapshot file"), "{msg}");
        }
    }

    #[test]
    fn a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_not() {
        let p = temp("exact", &[b'a'; 100]);
        assert_eq!(read_bounded(&p, 100, "x").unwrap().len(), 100);
        assert_eq!(read_bounded_text(&p, 100, "x").unwrap(), "a".repeat(100));
        assert!(matches!(
            read_bounded(&p, 99, "x"),
            Err(FileError::TooLarge { .. })
        ));
    }

    #[test]
    fn missing_and_binary_files_name_the_file() {
        let e = read_bounded(Path::new("/nonexistent/f"), 10, "--config").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read --config /nonexistent/f: "),
            "{e}"
        );
        let p = temp("binary", &[0xff, 0xfe, 0x00]);
        let e = read_bounded_text(&p, 10, "scenario")
            .unwrap_err()
            .to_string();
        assert!(e.contains("scenario") && e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(1024 * MIB), "1024 MiB");
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn lines_longer_than_the_limit_are_refused_and_shorter_ones_read_whole() {
        let text = "short\nexactly-10\nthis one is too long\n";
        // A small buffer, so a line spans several fills.
        let mut r = LineBounded::new(std::io::BufReader::with_capacity(4, text.as_bytes()), 11);
        let mut buf = String::new();
        assert_eq!(r.read_line(&mut buf).unwrap(), 6);
        assert_eq!(buf, "short\n");
        buf.clear();
        assert_eq!(r.read_line(&mut buf).unwrap(), 11);
        assert_eq!(buf, "exactly-10\n");
        buf.clear();
        let e = r.read_line(&mut buf).unwrap_err();
        assert!(e.to_string().contains("longer than 11 bytes"), "{e}");
        // /dev/zero has no line break at all.
        let zero = std::io::BufReader::new(std::fs::File::open("/dev/zero").unwrap());
        let e = LineBounded::new(zero, 1024)
            .read_line(&mut String::new())
            .unwrap_err();
        assert!(e.to_string().contains("1 KiB"), "{e}");
        // The last line needs no line break.
        let mut r = LineBounded::new("a\nb".as_bytes(), 4);
        let mut buf = String::new();
        r.read_line(&mut buf).unwrap();
        r.read_line(&mut buf).unwrap();
        assert_eq!(buf, "a\nb");
        assert_eq!(r.read_line(&mut buf).unwrap(), 0);
    }
}
