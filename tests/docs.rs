//! The worked examples of docs/rules.md are real: every `# example: NAME
//! (rules)` block is a rule file that loads, and its `(tests)` block passes
//! against it with `sigwatch test`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::collections::BTreeMap;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sigwatch");

fn examples() -> BTreeMap<String, (Option<String>, Option<String>)> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/rules.md")).unwrap();
    let mut out: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
    let mut rest = doc.as_str();
    while let Some(i) = rest.find("```yaml\n# example: ") {
        let block = &rest[i + "```yaml\n".len()..];
        let end = block.find("```").unwrap();
        let body = &block[..end];
        let head = body.lines().next().unwrap();
        let name = head["# example: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        let e = out.entry(name).or_default();
        if head.ends_with("(rules)") {
            e.0 = Some(body.to_string());
        } else if head.ends_with("(tests)") {
            e.1 = Some(body.to_string());
        } else {
            panic!("example block without (rules)/(tests): {head}");
        }
        rest = &block[end..];
    }
    out
}

#[test]
fn every_detector_kind_has_a_worked_example_that_passes() {
    let ex = examples();
    for kind in ["count", "persist", "spread", "share", "absent", "sequence"] {
        assert!(ex.contains_key(kind), "no worked example for {kind}");
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, (rules, tests)) in &ex {
        let rules = rules
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no rules block"));
        let tests = tests
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no tests block"));
        let r = dir.path().join(format!("{name}.rules.yaml"));
        let t = dir.path().join(format!("{name}.tests.yaml"));
        std::fs::write(&r, rules).unwrap();
        std::fs::write(&t, tests).unwrap();
        let out = Command::new(BIN)
            .arg("test")
            .arg("--rules")
            .arg(&r)
            .arg(&t)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "docs example {name} fails:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
