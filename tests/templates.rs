//! Template quality on real formats beyond our own: HDFS, ZooKeeper and
//! OpenSSH lines in the shapes of the LogHub collection (He et al., "Loghub:
//! A Large Collection of System Log Datasets"), values varied here. Lines
//! that differ only in their variables must share a template; different
//! messages must not. Each line goes the way `sigwatch templates` and
//! novelty take it: format sniffing, message extraction, then the miner.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

mod common;

use sigwatch::decode::mined::mining_message;
use sigwatch::decode::{Decoder, KeyConfig};
use sigwatch::mining::{Miner, MinerConfig};
use sigwatch::source::Source;

/// Mines `groups` (lines expected to share a template, per group) in an
/// interleaved order and checks the partition; returns the miner.
fn check(groups: &[&[&str]]) -> Miner {
    let mut m = Miner::new(MinerConfig::default());
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); groups.len()];
    let longest = groups.iter().map(|g| g.len()).max().unwrap_or(0);
    let mut t = 0;
    for i in 0..longest {
        for (gi, g) in groups.iter().enumerate() {
            if let Some(line) = g.get(i) {
                let msg = message(line);
                t += 1;
                ids[gi].push(m.add(&msg, t, None).id);
            }
        }
    }
    // The final template of each line: later lines may have merged earlier ones.
    for row in ids.iter_mut() {
        for id in row.iter_mut() {
            *id = m.canonical(*id);
        }
    }
    for (gi, g) in groups.iter().enumerate() {
        let first = ids[gi][0];
        for (i, line) in g.iter().enumerate() {
            assert_eq!(
                ids[gi][i], first,
                "group {gi}: {line:?} got a template of its own"
            );
        }
        for (gj, other) in ids.iter().enumerate() {
            if gj != gi {
                assert_ne!(
                    other[0],
                    first,
                    "groups {gi} and {gj} share a template: {:?}",
                    m.get(first).map(|t| t.text())
                );
            }
        }
    }
    assert_eq!(m.len(), groups.len(), "one template per message kind");
    m
}

/// The message novelty mines from `line`, as the engine reads it (a
/// decoder of its own per line: no stream context carried over).
fn message(line: &str) -> String {
    let mut d = Decoder::new(&KeyConfig::default(), false);
    let src = Source::named("test");
    let p = d
        .prepare(&src, line, None)
        .unwrap_or_else(|| panic!("{line:?} not prepared"));
    let level = d.level(&p);
    mining_message(&p.text, p.format, p.header.as_ref(), level, Some(p.time))
        .unwrap_or_else(|| panic!("no message in {line:?}"))
        .into_owned()
}

fn text_of(m: &Miner, line: &str) -> String {
    let msg = message(line);
    let id = m
        .lookup(&msg)
        .unwrap_or_else(|| panic!("{line:?} has no template"));
    m.get(id).map(|t| t.text()).unwrap()
}

#[test]
fn hdfs() {
    let responder = &[
        "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
        "081109 203807 222 INFO dfs.DataNode$PacketResponder: PacketResponder 0 for block blk_-6952295868487656571 terminating",
        "081110 101402 19 INFO dfs.DataNode$PacketResponder: PacketResponder 2 for block blk_1781953582842324563 terminating",
    ][..];
    let stored = &[
        "081109 204005 35 INFO dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blockMap updated: 10.251.73.220:50010 is added to blk_7128370237687728475 size 67108864",
        "081109 204132 26 INFO dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blockMap updated: 10.251.43.115:50010 is added to blk_3050920587428079149 size 3541231",
    ][..];
    let received = &[
        "081109 204015 308 INFO dfs.DataNode$PacketResponder: Received block blk_8229193803249955061 of size 67108864 from /10.251.43.115",
        "081109 204106 329 INFO dfs.DataNode$PacketResponder: Received block blk_-6670958622368987959 of size 67108864 from /10.250.19.102",
    ][..];
    let allocate = &[
        "081109 204324 34 INFO dfs.FSNamesystem: BLOCK* NameSystem.allocateBlock: /user/root/rand/_temporary/_task_200811092030_0001_m_000590_0/part-00590. blk_-1608999687919862906",
        "081109 204453 34 INFO dfs.FSNamesystem: BLOCK* NameSystem.allocateBlock: /user/root/sortrand/_temporary/_task_200811092030_0002_r_000230_0/part-00230. blk_7547434236269437573",
    ][..];
    let receiving = &[
        "081109 204525 512 INFO dfs.DataNode$DataXceiver: Receiving block blk_572492839287299681 src: /10.251.75.228:53725 dest: /10.251.75.228:50010",
        "081109 204655 556 INFO dfs.DataNode$DataXceiver: Receiving block blk_3587508140051953248 src: /10.251.42.84:57069 dest: /10.251.42.84:50010",
    ][..];
    let serving = &[
        "081109 205035 28 WARN dfs.DataNode$DataXceiver: 10.251.30.6:50010:Got exception while serving blk_-4004451763862624829 to /10.251.90.64:",
        "081111 101558 3372 WARN dfs.DataNode$DataXceiver: 10.251.35.1:50010:Got exception while serving blk_-3102267849859399193 to /10.251.122.79:",
    ][..];
    let m = check(&[responder, stored, received, allocate, receiving, serving]);
    assert_eq!(
        text_of(&m, responder[0]),
        "PacketResponder <*> for block <*> terminating"
    );
    assert_eq!(
        text_of(&m, serving[0]),
        "<*> exception while serving <*> to <*>:"
    );
}

#[test]
fn zookeeper() {
    let timeout = &[
        "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - Notification time out: 3200",
        "2015-07-29 19:04:12,394 - INFO  [QuorumPeer[myid=3]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - Notification time out: 6400",
    ][..];
    let interrupting = &[
        "2015-07-29 19:21:36,502 - WARN  [RecvWorker:188978561024:QuorumCnxManager$RecvWorker@765] - Interrupting SendWorker",
        "2015-07-30 11:02:07,611 - WARN  [RecvWorker:216172782113783808:QuorumCnxManager$RecvWorker@765] - Interrupting SendWorker",
    ][..];
    let leaving = &[
        "2015-07-29 19:21:39,604 - WARN  [SendWorker:188978561024:QuorumCnxManager$SendWorker@688] - Send worker leaving thread",
        "2015-07-30 11:02:07,612 - WARN  [SendWorker:216172782113783808:QuorumCnxManager$SendWorker@688] - Send worker leaving thread",
    ][..];
    let accepted = &[
        "2015-07-30 15:46:30,158 - INFO  [NIOServerCxn.Factory:0.0.0.0/0.0.0.0:2181:NIOServerCnxnFactory@197] - Accepted socket connection from /10.10.34.11:43405",
        "2015-07-30 15:46:30,171 - INFO  [NIOServerCxn.Factory:0.0.0.0/0.0.0.0:2181:NIOServerCnxnFactory@197] - Accepted socket connection from /10.10.34.13:51776",
    ][..];
    let closed = &[
        "2015-07-30 15:46:30,244 - INFO  [CommitProcessor:1:NIOServerCnxn@1001] - Closed socket connection for client /10.10.34.11:43405 which had sessionid 0x14ede63a5a70000",
        "2015-07-30 15:46:31,356 - INFO  [CommitProcessor:2:NIOServerCnxn@1001] - Closed socket connection for client /10.10.34.13:51776 which had sessionid 0x14ede63a5a70001",
    ][..];
    let unexpected = &[
        "2015-07-30 15:38:13,734 - ERROR [LearnerHandler-/10.10.34.13:42241:LearnerHandler@562] - Unexpected exception causing shutdown while sock still open",
        "2015-07-31 09:01:55,100 - ERROR [LearnerHandler-/10.10.34.12:36010:LearnerHandler@562] - Unexpected exception causing shutdown while sock still open",
    ][..];
    let m = check(&[timeout, interrupting, leaving, accepted, closed, unexpected]);
    assert_eq!(text_of(&m, timeout[0]), "Notification time out: <*>");
    assert_eq!(
        text_of(&m, closed[1]),
        "Closed socket connection for client <*> which had sessionid <*>"
    );
}

#[test]
fn openssh() {
    let breakin = &[
        "Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking getaddrinfo for ns.marryaldkfaczcz.com [173.234.31.186] failed - POSSIBLE BREAK-IN ATTEMPT!",
        "Dec 10 07:08:28 LabSZ sshd[24208]: reverse mapping checking getaddrinfo for 190-13-84-12.static.example.net [190.13.84.12] failed - POSSIBLE BREAK-IN ATTEMPT!",
    ][..];
    let invalid = &[
        "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186",
        "Dec 10 07:07:38 LabSZ sshd[24206]: Invalid user test9 from 52.80.34.196",
        "Dec 10 07:11:42 LabSZ sshd[24224]: Invalid user chen from 202.100.179.208",
        "Dec 10 07:13:01 LabSZ sshd[24230]: Invalid user oracle from 5.188.10.180",
    ][..];
    let failed_invalid = &[
        "Dec 10 06:55:48 LabSZ sshd[24200]: Failed password for invalid user webmaster from 173.234.31.186 port 38926 ssh2",
        "Dec 10 07:07:45 LabSZ sshd[24206]: Failed password for invalid user test9 from 52.80.34.196 port 36060 ssh2",
        "Dec 10 07:11:44 LabSZ sshd[24224]: Failed password for invalid user chen from 202.100.179.208 port 51822 ssh2",
        "Dec 10 07:13:03 LabSZ sshd[24230]: Failed password for invalid user oracle from 5.188.10.180 port 40112 ssh2",
    ][..];
    let failed_root = &[
        "Dec 10 09:12:35 LabSZ sshd[24492]: Failed password for root from 183.62.140.253 port 54447 ssh2",
        "Dec 10 09:12:44 LabSZ sshd[24494]: Failed password for root from 183.62.140.253 port 57025 ssh2",
    ][..];
    let closed = &[
        "Dec 10 07:02:47 LabSZ sshd[24203]: Connection closed by 212.47.254.145 [preauth]",
        "Dec 10 07:28:03 LabSZ sshd[24245]: Connection closed by 5.36.59.76 [preauth]",
    ][..];
    let pam = &[
        "Dec 10 06:55:48 LabSZ sshd[24200]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=173.234.31.186",
        "Dec 10 09:12:35 LabSZ sshd[24492]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=183.62.140.253",
    ][..];
    let pam_user = &[
        "Dec 10 07:07:38 LabSZ sshd[24206]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=52.80.34.196  user=test9",
        "Dec 10 11:03:40 LabSZ sshd[25455]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=103.99.0.122  user=admin",
    ][..];
    let m = check(&[
        breakin,
        invalid,
        failed_invalid,
        failed_root,
        closed,
        pam,
        pam_user,
    ]);
    assert_eq!(text_of(&m, invalid[2]), "Invalid user <*> from <*>");
    assert_eq!(
        text_of(&m, failed_root[0]),
        "Failed password for root from <*> port <*> ssh2"
    );
    assert_eq!(
        text_of(&m, pam_user[1]),
        "pam_unix(sshd:auth): authentication failure; logname= uid=<*> euid=<*> tty=ssh ruser= rhost=<*> user=<*>"
    );
}

/// `sigwatch templates --lines --json`: every line with its template's
/// final id (a template merged after the line was read answers with the
/// survivor's), the same from a file (read twice) and from stdin (held);
/// `--template ID` keeps that template's lines only.
#[test]
fn the_lines_command_gives_every_line_its_final_template() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    // Interleaved: the user name becomes a variable only at the fourth
    // name, after the first lines were given templates of their own.
    let groups: [&[&str]; 3] = [
        &[
            "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186",
            "Dec 10 07:07:38 LabSZ sshd[24206]: Invalid user guest from 52.80.34.196",
            "Dec 10 07:11:42 LabSZ sshd[24224]: Invalid user chen from 202.100.179.208",
            "Dec 10 07:13:01 LabSZ sshd[24230]: Invalid user oracle from 5.188.10.180",
        ],
        &[
            "Dec 10 07:02:47 LabSZ sshd[24203]: Connection closed by 212.47.254.145 [preauth]",
            "Dec 10 07:28:03 LabSZ sshd[24245]: Connection closed by 5.36.59.76 [preauth]",
        ],
        &[
            "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
            "081109 203807 222 INFO dfs.DataNode$PacketResponder: PacketResponder 0 for block blk_-6952295868487656571 terminating",
        ],
    ];
    let mut lines: Vec<(usize, &str)> = Vec::new();
    for i in 0..4 {
        for (g, group) in groups.iter().enumerate() {
            if let Some(l) = group.get(i) {
                lines.push((g, l));
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.log");
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let run = |args: &[&str], stdin: Option<&str>| -> Vec<serde_json::Value> {
        let mut child = Command::new(common::BIN)
            .args(["templates", "--lines", "--json", "--log-level", "error"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let file = path.to_str().unwrap();
    let got = run(&[file], None);
    assert_eq!(got.len(), lines.len());
    let id = |v: &serde_json::Value| v["template"].as_u64().unwrap();
    for (k, ((g, line), v)) in lines.iter().zip(&got).enumerate() {
        assert_eq!(v["n"].as_u64(), Some(k as u64 + 1));
        assert_eq!(v["text"].as_str(), Some(*line));
        for ((h, _), w) in lines.iter().zip(&got) {
            assert_eq!(g == h, id(v) == id(w), "{line} / {}", w["text"]);
        }
    }
    // stdin: the same lines, the same ids.
    assert_eq!(run(&["-"], Some(&text)), got);
    // One template's lines.
    let users = id(&got[0]).to_string();
    let only = run(&[file, "--template", &users], None);
    assert_eq!(only.len(), groups[0].len());
    assert!(only
        .iter()
        .all(|v| v["text"].as_str().unwrap().contains("Invalid user")));
}
