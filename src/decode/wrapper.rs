//! Container log wrappers, peeled off before the payload is read:
//! `kubectl logs --prefix` (`[pod/NAME/CONTAINER] `), stern (`POD CONTAINER `),
//! `docker compose logs` (`NAME  | `),
//! Docker json-file (`{"log":…,"stream":…,"time":…}`) and the CRI file format
//! (`TIME STREAM P|F CONTENT`).
//!
//! The prefix names the stream (its pod and container): that is what lets a
//! line without a node field still be attributed to its node.

use super::time::parse_rfc3339;
use std::borrow::Cow;

/// A stream prefix found at the start of a line.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefix<'a> {
    /// Pod name.
    pub pod: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Namespace, when the prefix carries one.
    pub namespace: Option<&'a str>,
}

/// Strips a `kubectl logs --prefix` prefix: `[pod/NAME/CONTAINER] rest`.
pub fn kubectl_prefix(line: &str) -> Option<(Prefix<'_>, &str)> {
    let rest = line.strip_prefix("[pod/")?;
    let b = rest.as_bytes();
    let end = memchr::memchr_iter(b']', b).find(|&i| b.get(i + 1) == Some(&b' '))?;
    let inner = &rest[..end];
    let (pod, container) = inner.split_once('/')?;
    if pod.is_empty() || container.is_empty() || container.contains('/') || inner.contains(' ') {
        return None;
    }
    Some((
        Prefix {
            pod,
            container,
            namespace: None,
        },
        &rest[end + 2..],
    ))
}

/// Strips a `docker compose logs` prefix: `NAME<spaces>| rest`, the
/// container's name padded to the widest one (`web-1  | …`, `api_1    | …`
/// in Compose v1). The pod is the container's name, the container the
/// service's (the name without its replica number). A level word
/// (`INFO | …`, some loggers' own separator) is not a name.
pub fn compose_prefix(line: &str) -> Option<(Prefix<'_>, &str)> {
    let b = line.as_bytes();
    let first = *b.first()?;
    if !first.is_ascii_alphanumeric() {
        return None;
    }
    let name_end = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')))?;
    let mut i = name_end;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    if i == name_end || b.get(i) != Some(&b'|') {
        return None;
    }
    let rest = match b.get(i + 1) {
        None => "",
        Some(b' ') => &line[i + 2..],
        Some(_) => return None,
    };
    let name = &line[..name_end];
    if name.bytes().all(|c| c.is_ascii_digit())
        || super::severity::strong_word(name.as_bytes())
        || !name.bytes().any(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    // `web-1` / `project_web_1`: the service is the name before the number.
    let service = match name.rfind(['-', '_']) {
        Some(cut)
            if cut > 0
                && name[cut + 1..].bytes().all(|c| c.is_ascii_digit())
                && cut + 1 < name.len() =>
        {
            &name[..cut]
        }
        _ => name,
    };
    Some((
        Prefix {
            pod: name,
            container: service,
            namespace: None,
        },
        rest,
    ))
}

/// Removes ANSI colour sequences (`ESC [ … m`), which stern adds by default.
pub fn strip_ansi(line: &str) -> Cow<'_, str> {
    // memchr's SIMD search: this runs on every line.
    if memchr::memchr(0x1b, line.as_bytes()).is_none() {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether a name looks like a generated pod name: a Deployment/DaemonSet pod
/// (`name-<hash>-<5 chars>` or `name-<5 chars>`) or a StatefulSet pod (`name-N`).
pub fn looks_like_pod(s: &str) -> bool {
    if !is_dns_label(s) {
        return false;
    }
    let Some((base, suffix)) = s.rsplit_once('-') else {
        return false;
    };
    if base.is_empty() {
        return false;
    }
    let generated = suffix.len() == 5
        && suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let ordinal =
        !suffix.is_empty() && suffix.len() <= 4 && suffix.bytes().all(|b| b.is_ascii_digit());
    generated || ordinal
}

/// Strips a stern prefix: `POD CONTAINER rest`, or `NAMESPACE POD CONTAINER
/// rest` with `--all-namespaces`. A prefix is only accepted when the pod token
/// looks like a generated pod name, so ordinary text is not mistaken for one.
pub fn stern_prefix(line: &str) -> Option<(Prefix<'_>, &str)> {
    // Quick reject: a pod or namespace name starts with [a-z0-9] and the
    // first token has no '=', ':', '"' or '{' (JSON, logfmt, klog, syslog).
    let first = *line.as_bytes().first()?;
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return None;
    }
    let sp = memchr::memchr(b' ', line.as_bytes())?;
    let head = &line.as_bytes()[..sp];
    if head
        .iter()
        .any(|c| matches!(c, b'=' | b':' | b'"' | b'{' | b'/'))
    {
        return None;
    }
    // The first token is a pod (it has a `-`) or a namespace (it has a
    // letter): `081109 203615 148 INFO …` is neither.
    if !head.iter().any(|c| *c == b'-' || c.is_ascii_lowercase()) {
        return None;
    }
    // The first three space-separated tokens and what follows them.
    let bytes = line.as_bytes();
    let sp2 = memchr::memchr(b' ', &bytes[sp + 1..]).map(|i| sp + 1 + i)?;
    let a = &line[..sp];
    let b = &line[sp + 1..sp2];
    let (c, rest3) = match memchr::memchr(b' ', &bytes[sp2 + 1..]) {
        Some(i) => (&line[sp2 + 1..sp2 + 1 + i], Some(&line[sp2 + 2 + i..])),
        None => (&line[sp2 + 1..], None),
    };
    if looks_like_pod(a) && is_dns_label(b) {
        let rest = &line[a.len() + b.len() + 2..];
        return Some((
            Prefix {
                pod: a,
                container: b,
                namespace: None,
            },
            rest,
        ));
    }
    // A namespace and a container name have letters: `2579921 node-140
    // node status …` is a columnar record, not a prefix.
    let lettered = |s: &str| s.bytes().any(|b| b.is_ascii_lowercase());
    if is_dns_label(a) && lettered(a) && looks_like_pod(b) && is_dns_label(c) && lettered(c) {
        let rest = rest3.unwrap_or("");
        return Some((
            Prefix {
                pod: b,
                container: c,
                namespace: Some(a),
            },
            rest,
        ));
    }
    None
}

/// A line after its container-runtime wrapper was removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Unwrapped<'a> {
    /// The application's line.
    pub content: Cow<'a, str>,
    /// The runtime's receive time (ns).
    pub time: Option<i64>,
    /// `stdout` or `stderr`.
    pub stream: Option<&'a str>,
    /// True when this is a partial chunk to be joined with what follows.
    pub partial: bool,
}

/// Parses a CRI log line: `2024-05-01T12:00:00.553412876Z stderr F content`.
pub fn cri(line: &str) -> Option<Unwrapped<'_>> {
    let b = line.as_bytes();
    if b.len() < 22 || !b[0].is_ascii_digit() || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    // The stamp ends at a space; a tab there is a zap console line.
    let sp1 = memchr::memchr2(b' ', b'\t', b)?;
    if b[sp1] != b' ' {
        return None;
    }
    let rest = &line[sp1 + 1..];
    let (stream, rest) = rest.split_once(' ')?;
    if stream != "stdout" && stream != "stderr" {
        return None;
    }
    let (tag, content) = match rest.split_once(' ') {
        Some((t, c)) => (t, c),
        None => (rest, ""),
    };
    // Tags may carry more attributes after ':' (P:xyz); the first is P or F.
    let first = tag.split(':').next().unwrap_or("");
    let partial = match first {
        "P" => true,
        "F" => false,
        _ => return None,
    };
    let time = parse_rfc3339(&line[..sp1]);
    time?;
    Some(Unwrapped {
        content: Cow::Borrowed(content),
        time,
        stream: Some(stream),
        partial,
    })
}

#[derive(serde::Deserialize)]
struct DockerLine<'a> {
    log: Cow<'a, str>,
    #[serde(borrow, default)]
    stream: Option<Cow<'a, str>>,
    #[serde(default)]
    time: Option<Cow<'a, str>>,
}

/// Parses a Docker json-file line. The `log` value keeps its trailing newline
/// when the line was complete; its absence marks a partial (16 KiB) chunk.
pub fn docker(line: &str) -> Option<Unwrapped<'static>> {
    if !line.starts_with("{\"log\":") {
        return None;
    }
    let d: DockerLine<'_> = serde_json::from_str(line).ok()?;
    let partial = !d.log.ends_with('\n');
    let content = d.log.strip_suffix('\n').unwrap_or(&d.log);
    let content = content.strip_suffix('\r').unwrap_or(content).to_string();
    let stream = match d.stream.as_deref() {
        Some("stdout") => Some("stdout"),
        Some("stderr") => Some("stderr"),
        _ => None,
    };
    Some(Unwrapped {
        content: Cow::Owned(content),
        time: d.time.as_deref().and_then(parse_rfc3339),
        stream,
        partial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_prefix_is_split() {
        let (p, rest) =
            kubectl_prefix("[pod/livekit-server-7c9d8f6b5-x2x7q/livekit-server] {\"a\":1}")
                .unwrap();
        assert_eq!(p.pod, "livekit-server-7c9d8f6b5-x2x7q");
        assert_eq!(p.container, "livekit-server");
        assert_eq!(rest, "{\"a\":1}");
        assert!(kubectl_prefix("[pod/x] y").is_none());
        assert!(kubectl_prefix("[INFO] pod/x/y started").is_none());
    }

    #[test]
    fn stern_prefix_needs_a_pod_like_name() {
        let (p, rest) = stern_prefix("egress-5f7d9c8b4-qx2lm egress {\"level\":\"info\"}").unwrap();
        assert_eq!(
            (p.pod, p.container, rest),
            ("egress-5f7d9c8b4-qx2lm", "egress", "{\"level\":\"info\"}")
        );
        let (p, _) = stern_prefix("livekit livekit-server-0 livekit-server hello").unwrap();
        assert_eq!((p.namespace, p.pod), (Some("livekit"), "livekit-server-0"));
        assert!(stern_prefix("back-off restarting failed container").is_none());
        assert!(stern_prefix("could not register node: READONLY").is_none());
        assert!(stern_prefix("redis: 2024/05/01 12:00:03 pool.go:762: x").is_none());
        // LogHub's HPC: id, node, component; not namespace, pod, container.
        assert!(stern_prefix("2568643 node-70 action start 1074119817 1 x").is_none());
        assert_eq!(strip_ansi("\x1b[31mpod-abcde\x1b[0m c m"), "pod-abcde c m");
    }

    #[test]
    fn compose_prefix_names_container_and_service() {
        let (p, rest) = compose_prefix("web-1  | {\"level\":\"error\"}").unwrap();
        assert_eq!(
            (p.pod, p.container, rest),
            ("web-1", "web", "{\"level\":\"error\"}")
        );
        // Compose v1's `project_service_N`, padded wider.
        let (p, rest) =
            compose_prefix("shop_redis_1    | 1:M 30 May 2024 12:50:13.457 * Ready").unwrap();
        assert_eq!((p.pod, p.container), ("shop_redis_1", "shop_redis"));
        assert_eq!(rest, "1:M 30 May 2024 12:50:13.457 * Ready");
        // An empty line keeps its prefix only.
        assert_eq!(compose_prefix("db-1  |").map(|(_, r)| r), Some(""));
        // A logger's own `LEVEL | message`, a table, text: no prefix.
        assert!(compose_prefix("INFO | started").is_none());
        assert!(compose_prefix("2024-05-30 12:50:13.457 | INFO     | app:main:1 - hi").is_none());
        assert!(compose_prefix("42 | 17").is_none());
        assert!(compose_prefix("a|b").is_none());
        assert!(compose_prefix("web-1  |x").is_none());
    }

    #[test]
    fn cri_full_and_partial() {
        let u = cri("2024-05-01T12:00:00.553412876Z stderr F {\"msg\":\"x\"}").unwrap();
        assert_eq!(
            (u.content.as_ref(), u.stream, u.partial),
            ("{\"msg\":\"x\"}", Some("stderr"), false)
        );
        assert_eq!(u.time, Some(1_714_564_800_553_412_876));
        let p = cri("2024-05-01T12:00:01.000000001Z stdout P part one").unwrap();
        assert!(p.partial);
        assert!(cri("2024-05-01T12:00:01Z stdout X nope").is_none());
        assert!(cri("2024-07-17T12:01:25.055Z\tINFO\tlivekit").is_none());
        let e = cri("2024-05-01T12:00:01.000000001Z stdout F").unwrap();
        assert_eq!(e.content, "");
    }

    #[test]
    fn docker_unescapes_and_detects_partials() {
        let u = docker(r#"{"log":"{\"msg\":\"a \u003cb\u003e\"}\n","stream":"stderr","time":"2024-05-01T12:00:00.553412876Z"}"#).unwrap();
        assert_eq!(u.content, "{\"msg\":\"a <b>\"}");
        assert!(!u.partial);
        assert_eq!(u.stream, Some("stderr"));
        let p = docker(
            r#"{"log":"chunk without newline","stream":"stdout","time":"2024-05-01T12:00:00Z"}"#,
        )
        .unwrap();
        assert!(p.partial);
    }
}
