//! Helpers shared by the integration tests that start the binary.
#![allow(dead_code)]

use std::process::Child;

/// The sigwatch binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

/// A free port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed and reaped when dropped, so a failing test never
/// leaves a sigwatch running.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The notification the receiver and delivery tests send: a black-hole
/// alert on one egress node, firing or resolved. Tests change the fields
/// they are about.
pub fn black_hole(state: sigwatch::alert::AlertState) -> sigwatch::alert::Notification {
    use sigwatch::alert::{AlertState, Notification, TopGroup};
    let group = "NE_2rANN76DeYtZ";
    Notification {
        state,
        rule: "egress.black_hole".into(),
        title: "One egress node takes most of the failed recordings".into(),
        severity: "critical".into(),
        group: group.into(),
        labels: Default::default(),
        annotations: Default::default(),
        starts_at: "2026-11-29T12:00:00.000Z".into(),
        ends_at: (state == AlertState::Resolved).then(|| "2026-11-29T12:05:00.000Z".into()),
        count: 48,
        first_seen: None,
        last_seen: None,
        top_groups: vec![TopGroup {
            group: group.into(),
            count: 48,
        }],
        share: Some(0.96),
        samples: vec![
            "{\"msg\":\"egress_failed\",\"error\":\"No space left on the resource.\"}".into(),
        ],
        template: None,
        fingerprint: sigwatch::alert::fingerprint("egress.black_hole", group),
        repeat: false,
        incident: None,
        links: None,
        origins: Vec::new(),
        at: 0,
    }
}

/// A fixture's lines in the order of their own times, with those times
/// (ns) as the built-in decoder reads them (a line without a time of its
/// own stands at the one before it): what a shipper that parses each
/// line's timestamp sends, and what `replay` of the sorted file reads.
pub fn in_time_order(fixture: &str) -> (Vec<String>, Vec<i64>) {
    use sigwatch::source::Source;
    let text =
        std::fs::read_to_string(format!("{}/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
    let set = sigwatch::rules::load_builtin().unwrap();
    let stamp = |lines: &[String]| -> Vec<i64> {
        let mut dec = sigwatch::decode::Decoder::new(&set.keys, false);
        let src = Source::named(fixture);
        let mut last = 0i64;
        lines
            .iter()
            .map(|l| {
                last = dec.prepare(&src, l, None).map_or(last, |p| p.time);
                last
            })
            .collect()
    };
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut times = stamp(&lines);
    for round in 0.. {
        assert!(round < 10, "{fixture}: the order does not settle");
        let mut both: Vec<(i64, String)> = times.into_iter().zip(lines).collect();
        both.sort();
        lines = both.iter().map(|b| b.1.clone()).collect();
        let before: Vec<i64> = both.iter().map(|b| b.0).collect();
        times = stamp(&lines);
        if times == before {
            break;
        }
    }
    (lines, times)
}

/// A CA of the test's own.
pub fn test_ca(name: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, name.to_string());
    rcgen::CertifiedIssuer::self_signed(p, rcgen::KeyPair::generate().unwrap()).unwrap()
}

/// Writes a `localhost` certificate signed by `ca` and its key into
/// tls.crt and tls.key of `dir`, each replaced at once (a rename, as a
/// mounted Secret is updated).
pub fn write_leaf(ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>, dir: &std::path::Path) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, ca)
        .unwrap();
    for (name, text) in [("tls.key", key.serialize_pem()), ("tls.crt", cert.pem())] {
        let tmp = dir.join(format!(".{name}.new"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

/// A client that trusts `ca` only, without a connection pool.
pub fn tls_client(
    ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    port: u16,
) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .resolve(
            "localhost",
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        )
        .pool_max_idle_per_host(0)
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap()
}
