//! Lines pushed by the shippers people already run: the bodies of Loki's
//! push API (what Promtail, Alloy, Fluent Bit and Vector send to Loki) and
//! of OTLP/HTTP logs (the OpenTelemetry SDKs and Collector), decoded into
//! the same [`Entry`] the Loki source reads, so a pushed line has exactly
//! the labels it would have when read back from Loki and groups the same.
//!
//! Decoding is bounded: a body's decompressed size is capped (a small gzip
//! or snappy body cannot expand into gigabytes), lines longer than the line
//! bound are cut, invalid UTF-8 is replaced, and a malformed body is an
//! error that says what was wrong — never a panic, never part of it taken.

pub mod loki;
pub mod otlp;
pub mod syslog;

pub use crate::source::loki::Entry;

/// Why a pushed body was not taken, with the HTTP status it is answered.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PushError {
    /// A body that does not decode (400, with the reason).
    #[error("{0}")]
    Malformed(String),
    /// A content type or encoding this endpoint does not take (415).
    #[error("{0}")]
    Unsupported(String),
    /// A body over the limit, compressed or not (413).
    #[error("the body is larger than {limit} bytes{}", if *.decompressed { " once decompressed" } else { "" })]
    TooLarge {
        /// The limit.
        limit: usize,
        /// Whether it was the decompressed size.
        decompressed: bool,
    },
}

impl PushError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        match self {
            PushError::Malformed(_) => 400,
            PushError::Unsupported(_) => 415,
            PushError::TooLarge { .. } => 413,
        }
    }
}

/// Undoes a `Content-Encoding` (`gzip`, `deflate`, `snappy`, or none),
/// stopping at `limit` decompressed bytes.
pub fn decode_encoding(encoding: &str, body: &[u8], limit: usize) -> Result<Vec<u8>, PushError> {
    use std::io::Read;
    let too_large = PushError::TooLarge {
        limit,
        decompressed: true,
    };
    let bounded = |r: &mut dyn Read| -> Result<Vec<u8>, PushError> {
        let mut out = Vec::new();
        r.take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| PushError::Malformed(format!("the body does not decompress: {e}")))?;
        if out.len() > limit {
            return Err(too_large.clone());
        }
        Ok(out)
    };
    match encoding.trim().to_ascii_lowercase().as_str() {
        "" | "identity" => Ok(body.to_vec()),
        "gzip" | "x-gzip" => bounded(&mut flate2::read::GzDecoder::new(body)),
        "deflate" => bounded(&mut flate2::read::ZlibDecoder::new(body)),
        "snappy" => snappy(body, limit),
        other => Err(PushError::Unsupported(format!(
            "Content-Encoding {other:?} is not supported (gzip, deflate, snappy, or none)"
        ))),
    }
}

/// Snappy's block format (what Loki's protobuf pushes are compressed
/// with), its declared length checked against `limit` before anything is
/// allocated.
pub fn snappy(body: &[u8], limit: usize) -> Result<Vec<u8>, PushError> {
    let n = snap::raw::decompress_len(body)
        .map_err(|e| PushError::Malformed(format!("the body is not snappy-compressed: {e}")))?;
    if n > limit {
        return Err(PushError::TooLarge {
            limit,
            decompressed: true,
        });
    }
    snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| PushError::Malformed(format!("the body is not snappy-compressed: {e}")))
}

/// Bytes as a line: invalid UTF-8 replaced and a longer line than the
/// bound cut on a character boundary, both counted as the readers count
/// them.
pub(crate) fn line_text(bytes: &[u8]) -> String {
    let mut s = match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            crate::stats::count_invalid_utf8();
            String::from_utf8_lossy(bytes).into_owned()
        }
    };
    let max = crate::source::max_line_bytes();
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        crate::stats::count_truncated();
    }
    s
}

/// A `Content-Type`'s media type, lower case, without its parameters
/// (`application/json; charset=utf-8` → `application/json`).
pub(crate) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A JSON body as text: invalid UTF-8 inside it (a line's bytes) is
/// replaced and counted, not a reason to refuse the push.
pub(crate) fn body_text(body: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(body) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => {
            crate::stats::count_invalid_utf8();
            String::from_utf8_lossy(body)
        }
    }
}

/// What a decoded body holds: its entries in time order.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The entries, by time, then stream, then line.
    pub entries: Vec<Entry>,
    /// Records that carried no line at all (OTLP: an empty body), skipped.
    pub skipped: u64,
}

impl Decoded {
    /// Puts the entries in the order the Loki source gives them.
    pub(crate) fn sort(&mut self) {
        self.entries.sort_by(|a, b| {
            a.ts.cmp(&b.ts)
                .then_with(|| a.labels.cmp(&b.labels))
                .then_with(|| a.line.cmp(&b.line))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn encodings_are_undone_within_the_limit() {
        let text = "x".repeat(10_000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(
            decode_encoding("gzip", &gz, 20_000).unwrap(),
            text.as_bytes()
        );
        assert_eq!(
            decode_encoding("gzip", &gz, 9_999),
            Err(PushError::TooLarge {
                limit: 9_999,
                decompressed: true
            })
        );
        let sn = snap::raw::Encoder::new()
            .compress_vec(text.as_bytes())
            .unwrap();
        assert_eq!(
            decode_encoding("snappy", &sn, 10_000).unwrap(),
            text.as_bytes()
        );
        assert_eq!(snappy(&sn, 9_999).unwrap_err().status(), 413);
        assert_eq!(
            snappy(b"\xff\xff\xff\xff\xff", 100).unwrap_err().status(),
            400
        );
        assert_eq!(
            decode_encoding("gzip", b"not gzip", 100)
                .unwrap_err()
                .status(),
            400
        );
        assert_eq!(decode_encoding("br", b"", 100).unwrap_err().status(), 415);
        assert_eq!(decode_encoding("", b"plain", 100).unwrap(), b"plain");
    }

    #[test]
    fn lines_are_repaired_and_cut() {
        assert_eq!(line_text(b"ok \xff"), "ok \u{fffd}");
        let long = "é".repeat(crate::source::max_line_bytes());
        let cut = line_text(long.as_bytes());
        assert!(cut.len() <= crate::source::max_line_bytes());
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
