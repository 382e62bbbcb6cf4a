//! Reading the files the CLI and the live shell are given (kubeconfigs and the files they name,
//! service-account tokens and CAs, `--config`, `plan --snapshot`, scenarios, traces), each with
//! a size limit, so that a file that is `/dev/zero`, `/dev/urandom` or simply far too large is
//! refused with an error naming the file and the limit instead of being read until memory runs
//! out.
//!
//! It decides nothing about a file's content, and it must never read more than its limit (plus
//! one byte, to tell "exactly the limit" from "more"). Trace CSVs are read as a stream, a line at a time;
//! their parser bounds each line.

use std::io::Read;
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
}
