//! Log-template mining, online. Messages that differ only in their
//! variables — numbers, IDs, addresses, hex, UUIDs, durations, embedded
//! timestamps, and words that take many values in one place — share a
//! template such as `failed to open <*>: no space left on device`.
//! Novelty detection pages on templates never seen before; `sigwatch
//! templates` lists them.
//!
//! How a message finds its template: it is split into tokens and its
//! variables are masked to `<*>` (`tokenize`); a template with exactly
//! those tokens, or with those tokens outside its own wildcards, takes it
//! (a hash lookup, one per wildcard pattern of that length). Otherwise it
//! founds a template. Templates that differ from each other in one
//! position only are siblings; once `variable_after` of them (3) show
//! distinct words there, the position is a variable: they merge into the
//! oldest, whose id the others' lines answer to from then on
//! ([`Miner::canonical`]). A word fills a bare variable only where
//! evidence says words stand there ([`Template::words`]): a name where only
//! numbers or addresses stood names another event until names vary there
//! too. Unlike Drain (He et al., ICWS 2017), which joins
//! a message to the most similar template when enough tokens agree, two
//! messages never share a template because they are *similar*: a different
//! word is a different event until the position proves variable — which is
//! what the ground truth of the standard benchmark (LogHub) says, and what
//! keeps `Received disconnect … Bye Bye` apart from `… disconnected by
//! user`.
//!
//! Written here rather than taken from a crate: the crates found
//! (`logdrain`, `drain3`) stamp templates with the wall clock (replay must
//! stay deterministic, on event time), or lock for multi-threaded use
//! that the single-threaded engine pays for without needing. Here every
//! structure is bounded — templates (one LRU over the whole miner,
//! evictions counted), index entries, aliases, tokens per message — and a
//! cache of exact messages skips tokenising for the structured logs whose
//! messages are constant strings.

pub mod watch;

use crate::decode::severity::Level;
use serde::{Deserialize, Serialize};

mod grow;
mod miner;
mod sample;
mod tokenize;
mod wild;
pub use miner::Miner;
pub use tokenize::tokenize;

/// The placeholder of a variable.
pub const WILDCARD: &str = "<*>";

/// Tokens kept per message; the rest of a longer message is dropped.
pub const MAX_TOKENS: usize = 64;

/// Miner settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinerConfig {
    /// Distinct words in one position, among templates otherwise alike,
    /// that make the position a variable.
    #[serde(default = "default_variable_after")]
    pub variable_after: usize,
    /// Templates in all; past it the least recently used one goes.
    pub max_templates: usize,
}

fn default_variable_after() -> usize {
    4
}

impl Default for MinerConfig {
    fn default() -> Self {
        MinerConfig {
            variable_after: default_variable_after(),
            max_templates: 10_000,
        }
    }
}

/// Lines of a template by level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelCounts {
    /// Fatal, panic, critical.
    #[serde(default)]
    pub fatal: u64,
    /// Error.
    #[serde(default)]
    pub error: u64,
    /// Warning.
    #[serde(default)]
    pub warn: u64,
    /// Info.
    #[serde(default)]
    pub info: u64,
    /// Debug, trace.
    #[serde(default)]
    pub debug: u64,
    /// No level.
    #[serde(default)]
    pub none: u64,
}

impl LevelCounts {
    fn add(&mut self, level: Option<Level>) {
        match level {
            Some(Level::Fatal) => self.fatal += 1,
            Some(Level::Error) => self.error += 1,
            Some(Level::Warn) => self.warn += 1,
            Some(Level::Info) => self.info += 1,
            Some(Level::Debug) => self.debug += 1,
            None => self.none += 1,
        }
    }

    fn merge(&mut self, o: &LevelCounts) {
        self.fatal += o.fatal;
        self.error += o.error;
        self.warn += o.warn;
        self.info += o.info;
        self.debug += o.debug;
        self.none += o.none;
    }

    /// The most severe level seen.
    pub fn highest(&self) -> Option<Level> {
        [
            (self.fatal, Level::Fatal),
            (self.error, Level::Error),
            (self.warn, Level::Warn),
            (self.info, Level::Info),
            (self.debug, Level::Debug),
        ]
        .into_iter()
        .find(|(n, _)| *n > 0)
        .map(|(_, l)| l)
    }
}

/// A template and what is known of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// Stable id (unique for the miner's lifetime, saved with it).
    pub id: u64,
    /// Tokens, variables as [`WILDCARD`].
    pub tokens: Vec<String>,
    /// Messages matched.
    pub count: u64,
    /// Event time of the first and the latest message (ns).
    pub first_seen: i64,
    /// See `first_seen`.
    pub last_seen: i64,
    /// Messages by level.
    pub levels: LevelCounts,
    /// The variable positions that took words: a bit per position whose
    /// variable was proved by distinct words there (or took such
    /// templates in). Only these take a word of a new message; a variable
    /// that only ever held values (numbers, addresses, paths — masked by
    /// their shape) does not make a name in its place part of the event:
    /// `connect to redis failed` is not `connect to <*> failed` of
    /// addresses until words vary there too.
    pub words: u64,
}

impl Template {
    /// The template as text.
    pub fn text(&self) -> String {
        self.tokens.join(" ")
    }
}

/// What [`Miner::add`] found for a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// The template.
    pub id: u64,
    /// The message founded it.
    pub created: bool,
    /// When the template was last seen before this message (ns).
    pub previous: Option<i64>,
}

/// The miner's saved form (`templates.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MinerState {
    /// Format version.
    pub version: u32,
    /// Settings the templates were mined with.
    pub config: Option<MinerConfig>,
    /// Next template id.
    pub next_id: u64,
    /// Event time until which the miner only learns (ns), if set.
    #[serde(default)]
    pub learn_until: Option<i64>,
    /// Lines the learning period still needs after that time, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learn_lines_left: Option<u64>,
    /// Templates evicted so far.
    #[serde(default)]
    pub evicted: u64,
    /// Templates that became new after learning, with when (ns): they stay
    /// new for a while across a restart.
    #[serde(default)]
    pub born: Vec<(u64, i64)>,
    /// Templates a person marked as known (`templates --known`): never new
    /// again, whatever their silences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<u64>,
    /// The templates, by id.
    pub templates: Vec<TemplateState>,
    /// What normal looked like when learning ended (`anomaly`): each
    /// template's lines over the learning period…
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline: Vec<(u64, u64)>,
    /// …and that period's length (ns; 0: none taken).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub baseline_span: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// One saved template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateState {
    /// Id.
    pub id: u64,
    /// The template text (tokens joined by spaces).
    pub template: String,
    /// Tree keys of an older miner (read, not used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// Messages matched.
    pub count: u64,
    /// First message (ns).
    pub first_seen: i64,
    /// Latest message (ns).
    pub last_seen: i64,
    /// Messages by level.
    pub levels: LevelCounts,
    /// [`Template::words`]; a state saved before it existed takes words
    /// at every variable, as its miner did.
    #[serde(default = "every_position")]
    pub words: u64,
}

fn every_position() -> u64 {
    u64::MAX
}

/// Errors loading a miner.
#[derive(Debug, thiserror::Error)]
pub enum MiningError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a template state.
    #[error("{path}: not a template file: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Writes a saved form to `path` atomically (temporary file, rename).
pub fn save(path: &std::path::Path, state: &MinerState) -> Result<(), MiningError> {
    let body = serde_json::to_vec(state).map_err(|e| MiningError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    crate::durable::write_atomic(path, &body).map_err(|e| MiningError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Reads a saved form.
pub fn load(path: &std::path::Path) -> Result<MinerState, MiningError> {
    let text = std::fs::read_to_string(path).map_err(|source| MiningError::Io {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| MiningError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::tokenize::{is_punct, BYTE_CLASS, PUNCT};
    use super::*;

    fn miner() -> Miner {
        Miner::new(MinerConfig::default())
    }

    fn masked(m: &str) -> String {
        tokenize(m).join(" ")
    }

    #[test]
    fn variables_are_masked_by_one_rule_set() {
        // One row per rule of `mask_token` and `tokenize`.
        let rows = [
            (
                "failed to open /data/seg-0042.log: no space left on device",
                "failed to open <*>: no space left on device",
            ),
            (
                "dial tcp 10.0.0.21:6379: i/o timeout after 1.5s",
                "dial tcp <*>: i/o timeout after <*>",
            ),
            // key=value: values with digits, dots, quotes are variables.
            (
                r#"acquire lock=233570404, flags=0x1, tag="View Lock", name=com.android.systemui, ws=null"#,
                "acquire lock=<*>, flags=<*>, tag=<*>, name=<*>, ws=null",
            ),
            ("session opened for user root by (uid=0)", "session opened for user root by (uid=<*>)"),
            ("user=jörg1 team=dév", "user=<*> team=dév"),
            ("logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4", "logname= uid=<*> euid=<*> tty=NODEVssh ruser= rhost=<*>"),
            // Quotes are punctuation: methods stay words.
            (
                r#"10.11.10.1 "GET /v2/servers/detail HTTP/1.1" status: 200 len: 1893 time: 0.2477829"#,
                r#"<*> "GET <*>" status: <*> len: <*> time: <*>"#,
            ),
            // Units and bracketed sizes belong to their numbers; a run of
            // variables is one.
            (
                "close, 1190 bytes (1.16 KB) sent, 1671 bytes (1.63 KB) received, lifetime <1 sec",
                "close, <*> sent, <*> received, lifetime <*>",
            ),
            ("close, 0 bytes sent, 0 bytes received, lifetime 00:01", "close, <*> sent, <*> received, lifetime <*>"),
            ("Fan speeds ( 3552 3534 3375 4245 3515 3479 )", "Fan speeds ( <*> )"),
            // An embedded timestamp is one variable; a bracketed value
            // keeps its place (its neighbour may be a word: `(localhost)`).
            (
                "connection from 24.54.76.216 (host.example.net) at Fri Jun 17 07:07:00 2005",
                "connection from <*> (<*>) at <*>",
            ),
            // Names keep their joined values masked; empty brackets are a value.
            ("cancelNotification,index:0", "cancelNotification,index:<*>"),
            ("onExtend:1514038530000 14 0 4", "onExtend:<*> <*>"),
            ("connection from 202.82.200.188 () at", "connection from <*> (<*>) at"),
            ("synchronized to LOCAL(0), stratum 10", "synchronized to <*>, stratum <*>"),
            // IDs, hex, prefixed IDs; words and constants stay.
            (
                "room RM_hXkTqfzqjBkR closed by deadbeefcafe after EGRESS_FAILED in PacketResponder",
                "room <*> closed by <*> after EGRESS_FAILED in PacketResponder",
            ),
            (
                "Failed password for root from 183.62.140.253 port 54447 ssh2 over ipv6 worker42",
                "Failed password for root from <*> port <*> ssh2 over ipv6 <*>",
            ),
            // A device's severity tag names the event.
            (
                "%LINK-3-UPDOWN: Interface GigabitEthernet0/1, changed state to down",
                "%LINK-3-UPDOWN: Interface <*>, changed state to down",
            ),
            (
                "%ASA-4-106023: Deny tcp src outside:192.0.2.7/4711",
                "%ASA-4-106023: Deny tcp src <*>",
            ),
        ];
        for (line, want) in rows {
            assert_eq!(masked(line), want, "{line}");
        }
        assert_eq!(tokenize("  ").len(), 0);
        assert_eq!(tokenize(&"w ".repeat(500)).len(), MAX_TOKENS);
    }

    #[test]
    fn the_byte_table_agrees_with_is_punct() {
        for c in 0u8..128 {
            assert_eq!(
                BYTE_CLASS[usize::from(c)] & PUNCT != 0,
                is_punct(char::from(c)),
                "{c}"
            );
        }
        assert!((128..256).all(|c| BYTE_CLASS[c] == 0));
    }

    #[test]
    fn a_key_keeps_its_name_when_its_values_vary() {
        let mut m = miner();
        // Word values that vary become `key=<*>`, in either order with a
        // masked value, and the key stays.
        let a = m.add("authentication failure; rhost=10.0.0.1 user=admin", 1, None);
        let b = m.add("authentication failure; rhost=10.0.0.2 user=test9", 2, None);
        let c = m.add("authentication failure; rhost=10.0.0.3 user=root", 3, None);
        assert_eq!(m.canonical(a.id), m.canonical(b.id));
        assert_eq!(m.canonical(c.id), m.canonical(b.id));
        let t = m.get(m.canonical(c.id)).map(|t| t.text());
        assert_eq!(
            t.as_deref(),
            Some("authentication failure; rhost=<*> user=<*>")
        );
        let mut m = miner();
        for (i, u) in ["admin", "root", "guest", "oracle"].iter().enumerate() {
            m.add(
                &format!("session opened for user={u} by (uid=0)"),
                i as i64,
                None,
            );
        }
        let id = m.lookup("session opened for user=nobody by (uid=0)");
        let t = id.and_then(|id| m.get(id)).map(|t| t.text());
        assert_eq!(
            t.as_deref(),
            Some("session opened for user=<*> by (uid=<*>)")
        );
        assert_eq!(m.len(), 1);
        // Another key is another event.
        assert_ne!(m.lookup("session opened for group=wheel by (uid=0)"), id);
        // An empty value is the same event without the value, in either
        // order.
        assert_eq!(m.lookup("session opened for user= by (uid=0)"), id);
        let mut m = miner();
        let empty = m.add("check pass; logname= uid=0 tty=ssh", 1, None).id;
        let valued = m
            .add("check pass; logname=alice7 uid=0 tty=ssh", 2, None)
            .id;
        assert_eq!(m.canonical(empty), m.canonical(valued));
        assert_eq!(m.len(), 1);
        // Another constant word is another event.
        let other = m.add("check fail; logname= uid=0 tty=ssh", 3, None);
        assert!(other.created);
    }

    #[test]
    fn same_shape_joins_and_different_messages_stay_apart() {
        let mut m = miner();
        let a = m.add(
            "Receiving block blk_38865049064139660 src: /10.250.19.102:54106",
            1,
            Some(Level::Info),
        );
        let b = m.add(
            "Receiving block blk_-6952295868487656571 src: /10.250.10.6:40524",
            2,
            Some(Level::Info),
        );
        assert!(a.created && !b.created && a.id == b.id);
        let c = m.add("Deleting block blk_38865049064139660 file /mnt/hadoop/dfs/data/current/subdir9/blk_38865049064139660", 3, None);
        assert_ne!(c.id, a.id);
        assert_eq!(m.get(a.id).map(|t| t.count), Some(2));
        assert_eq!(b.previous, Some(1));
        // One word apart is another event (not Drain's "similar enough").
        let x = m.add(
            "Received disconnect from 10.0.0.1: 11: Bye Bye [preauth]",
            4,
            None,
        );
        let y = m.add(
            "Received disconnect from 10.0.0.2: 11: disconnected by user",
            5,
            None,
        );
        assert_ne!(x.id, y.id);
        // Messages of variables only join each other, never a word.
        let v = m.add("14 0 4", 6, None);
        let w = m.add("7 7 7", 7, None);
        let word = m.add("initEnvironment", 8, None);
        assert_eq!(v.id, w.id);
        assert_ne!(word.id, v.id);
    }

    /// An event's instances keep one template whatever shape their values
    /// take: a bracketed name that reads as a variable (`ld-linux.so.2`)
    /// or as a word (`httpd`), in either order.
    #[test]
    fn a_values_shape_does_not_split_its_event() {
        for first in ["ld-linux.so.2", "httpd"] {
            let mut m = miner();
            let a = m
                .add(
                    &format!("Out of Memory: Killed process 27154 ({first})."),
                    0,
                    None,
                )
                .id;
            for (i, name) in ["httpd", "ld-linux.so.2", "httpd", "sshd"]
                .iter()
                .enumerate()
            {
                let s = m.add(
                    &format!("Out of Memory: Killed process {} ({name}).", 28000 + i),
                    1,
                    None,
                );
                assert_eq!(m.canonical(s.id), m.canonical(a), "{first} then {name}");
            }
            assert_eq!(m.len(), 1);
        }
        // A constant bracketed word after a variable stays a literal of
        // its template. (`user` introduces names: `root`, `cyrus`, `news`
        // and `games` stood after it; without that, `admin` where only a
        // number stood would be an event of its own.)
        let mut m = miner();
        for w in ["root", "cyrus", "news", "games"] {
            m.add(&format!("session closed for user {w}"), 0, None);
        }
        let a = m
            .add(
                "input_userauth_request: invalid user admin [preauth]",
                0,
                None,
            )
            .id;
        let b = m
            .add(
                "input_userauth_request: invalid user 1234 [preauth]",
                0,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        let text = m.get(m.canonical(b)).map(Template::text);
        assert_eq!(
            text.as_deref(),
            Some("input_userauth_request: invalid user <*> [preauth]")
        );
    }

    /// A variable position takes a value of any shape once it is one,
    /// bare or framed (`(<*>)`, `<*>,`, `key=<*>`), in several positions
    /// at once, and templates founded before the position became a
    /// variable join it when it does.
    #[test]
    fn variable_positions_take_values_of_any_shape() {
        let mut m = miner();
        let a = m
            .add(
                "connection from 24.54.76.216 (host1.example.net) at Fri Jun 17 07:07:00 2005",
                0,
                None,
            )
            .id;
        // A word where the address was, a word in the bracket.
        let b = m
            .add(
                "connection from worker-7 (localhost) at Sun Jul 17 12:30:47 2005",
                1,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        let mut m = miner();
        let a = m
            .add("synchronized to 10.100.20.250, stratum 3", 0, None)
            .id;
        let b = m
            .add("synchronized to ntp.example.net, stratum 2", 0, None)
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        // `uid=<*>` takes `uid=root`, not `gid=5`.
        let mut m = miner();
        let a = m.add("session opened by (uid=0)", 0, None).id;
        let b = m.add("session opened by (uid=root)", 0, None).id;
        let c = m.add("session opened by (gid=5)", 0, None).id;
        assert_eq!(m.canonical(a), m.canonical(b));
        assert_ne!(m.canonical(a), m.canonical(c));
        // Founded before the positions were variables: absorbed when they
        // become so.
        let mut m = miner();
        let early = m
            .add(
                "Failed password for invalid user webmaster from 173.234.31.186 port 38926 ssh2",
                0,
                None,
            )
            .id;
        for u in ["admin", "oracle", "test", "guest", "support"] {
            m.add(
                &format!("Failed password for invalid user {u} from 10.0.0.9 port 22 ssh2"),
                1,
                None,
            );
        }
        let later = m
            .add(
                "Failed password for invalid user ftp from 10.0.0.7 port 2201 ssh2",
                2,
                None,
            )
            .id;
        assert_eq!(m.canonical(early), m.canonical(later));
        assert_eq!(m.len(), 1);
    }

    /// A word seen before a variable elsewhere (`user` of `session closed
    /// for user <*>`) makes three values enough where it stands, also for
    /// templates founded before it was known; two are not (`state
    /// 'Active'`, `state 'Inactive'` stay two events).
    #[test]
    fn a_word_known_to_precede_values_needs_fewer_of_them() {
        let mut m = miner();
        for u in ["cyrus", "news", "test"] {
            m.add(&format!("session opened for user {u} by (uid=0)"), 0, None);
        }
        assert_eq!(m.len(), 3, "three users and nothing known yet");
        for u in ["root", "admin", "guest", "mail", "ftp"] {
            m.add(&format!("session closed for user {u}"), 1, None);
        }
        let s = m.add("session opened for user cyrus by (uid=0)", 2, None);
        let text = m.get(s.id).map(Template::text);
        assert_eq!(
            text.as_deref(),
            Some("session opened for user <*> by (uid=<*>)")
        );
        assert_eq!(m.len(), 2);
        let mut m = miner();
        m.add("location state 42 reached", 0, None);
        for s in ["'Active'", "'Inactive'"] {
            m.add(&format!("icon in state {s} is shown"), 0, None);
        }
        assert_eq!(m.len(), 3);
    }

    /// A value that reads as a word beside a variable joins the template
    /// whose variable run stands there.
    #[test]
    fn a_word_beside_a_variable_run_joins_the_run() {
        let mut m = miner();
        let a = m
            .add(
                "BLOCK* NameSystem.allocateBlock: /user/root/part-00742 blk_-7878121102",
                0,
                None,
            )
            .id;
        let b = m
            .add(
                "BLOCK* NameSystem.allocateBlock: httpd blk_-4882986256",
                0,
                None,
            )
            .id;
        assert_eq!(m.canonical(a), m.canonical(b));
        // Not when too little of the line is left to name the event.
        let mut m = miner();
        let a = m
            .add("Launching attempt_1445144423722_0020_m_000000_0", 0, None)
            .id;
        let b = m
            .add("ATTEMPT_START task_1445144423722_0020_m_000000", 0, None)
            .id;
        assert_ne!(m.canonical(a), m.canonical(b));
    }

    /// An address whose first groups read like a clock is one token.
    #[test]
    fn a_mac_address_is_not_a_time_of_day() {
        assert_eq!(
            masked("DHCPDISCOVER from 00:11:43:e3:ba:c3 via eth1"),
            "DHCPDISCOVER from <*> via eth1"
        );
        assert_eq!(masked("at 12:00:40 the job ran"), "at <*> the job ran");
    }

    /// A first word varies only with the evidence of the rest of the
    /// line: many distinct words before a short common text.
    #[test]
    fn a_first_word_generalises_with_enough_distinct_words() {
        let mut m = miner();
        let daemons = [
            "cupsd", "klogd", "syslogd", "atd", "crond", "sshd", "xfs", "portmap",
        ];
        for d in &daemons[..7] {
            m.add(&format!("{d} startup succeeded"), 0, None);
        }
        assert_eq!(m.len(), 7, "seven daemons are not yet evidence");
        let s = m.add(&format!("{} startup succeeded", daemons[7]), 0, None);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m.get(s.id).map(Template::text).as_deref(),
            Some("<*> startup succeeded")
        );
        // One shared word is not enough, however many first words.
        let mut m = miner();
        for d in daemons {
            m.add(&format!("{d} running"), 0, None);
        }
        assert_eq!(m.len(), daemons.len());
    }

    #[test]
    fn a_position_becomes_a_variable_after_enough_distinct_words() {
        let mut m = miner();
        let users = ["alice", "bob", "carol", "dave", "erin"];
        let ids: Vec<Sighting> = users
            .iter()
            .enumerate()
            .map(|(i, u)| m.add(&format!("session closed for user {u}"), i as i64, None))
            .collect();
        // Three users are three templates; the fourth makes the position a
        // variable: all four are one template, the oldest id, and the
        // others' ids answer to it.
        assert!(ids[..3].iter().all(|s| s.created));
        assert_eq!(ids[3].id, ids[0].id);
        assert!(!ids[3].created);
        assert_eq!(m.len(), 1);
        assert_eq!(m.canonical(ids[1].id), ids[0].id);
        assert_eq!(
            m.get(ids[0].id).map(Template::text).as_deref(),
            Some("session closed for user <*>")
        );
        assert_eq!(ids[4].id, ids[0].id);
        assert_eq!(m.get(ids[0].id).map(|t| t.count), Some(5));
        assert_eq!(m.merged(), 3);
        // Three values of a closed set stay three events.
        let methods: Vec<u64> = ["GET", "POST", "DELETE"]
            .iter()
            .map(|v| {
                m.add(&format!("10.0.0.1 \"{v} /x\" status: 200"), 9, None)
                    .id
            })
            .collect();
        assert_eq!(
            methods
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        // A one-word message has no company: `normal`, `running`, `warning`,
        // `failed` stay four.
        let one: Vec<u64> = ["normal", "running", "warning", "failed"]
            .iter()
            .map(|w| m.add(w, 10, None).id)
            .collect();
        assert_eq!(
            one.iter().collect::<std::collections::BTreeSet<_>>().len(),
            4
        );
        // Nor does the first word before a short text: `boot (command 1)`,
        // `wait (command 2)` … are events.
        let first: Vec<u64> = ["boot", "wait", "halt", "reset"]
            .iter()
            .enumerate()
            .map(|(i, w)| m.add(&format!("{w} (command {i})"), 11, None).id)
            .collect();
        assert_eq!(
            first
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            4
        );
    }

    #[test]
    fn caps_evict_least_recently_used_templates_and_count_them() {
        let mut m = Miner::new(MinerConfig {
            max_templates: 3,
            ..MinerConfig::default()
        });
        let mut created = 0;
        for (i, w) in ["alpha", "bravo", "charlie", "delta", "echo"]
            .iter()
            .enumerate()
        {
            created += u64::from(
                m.add(&format!("{w} went away unexpectedly here"), i as i64, None)
                    .created,
            );
            created += u64::from(m.add(&format!("{w} {w} {w} {w}"), i as i64, None).created);
        }
        assert_eq!(m.len(), 3);
        assert!(created >= 8, "{created}");
        assert_eq!(
            m.evicted() + m.merged(),
            created - 3,
            "every template made and gone is counted"
        );
        // The oldest went first: the newest word's templates are still there.
        assert!(m.templates().iter().any(|t| t.text().starts_with("echo")));
        // The indexes stay bounded too, whatever the variety.
        for i in 0..10_000 {
            m.add(&format!("word{i}x unique{i}y thing {i}"), i, None);
        }
        let entries = m.exact.len() + m.masked.len() + m.siblings.len();
        assert!(entries <= 3 * (MAX_TOKENS + 2), "{entries}");
    }

    #[test]
    fn a_name_where_only_values_stood_is_a_new_event_until_names_vary_there() {
        let mut m = miner();
        let addr = m.add("connect to 10.0.0.1 failed: refused", 1, None).id;
        assert_eq!(
            m.add("connect to 10.0.0.2 failed: refused", 2, None).id,
            addr
        );
        // A word in a place that only held addresses names something else.
        let redis = m.add("connect to redis failed: refused", 3, None);
        assert!(redis.created, "a name is no address: a new event");
        assert_ne!(redis.id, addr);
        // The same name again is that event.
        assert_eq!(
            m.add("connect to redis failed: refused", 4, None).id,
            redis.id
        );
        // Many distinct names there prove the place a variable: they and
        // the addresses' template become one.
        for w in ["postgres", "kafka", "minio", "vault"] {
            m.add(&format!("connect to {w} failed: refused"), 5, None);
        }
        let all = m.canonical(addr);
        assert_eq!(m.canonical(redis.id), all);
        assert_eq!(m.add("connect to etcd failed: refused", 6, None).id, all);
        assert_eq!(
            m.add("connect to 10.0.0.9 failed: refused", 7, None).id,
            all
        );

        // Where host names (a value that reads as a name) stood, a plain
        // word is one of them.
        let mut m = miner();
        let host = m.add("lookup db01.example.net timed out", 1, None).id;
        let word = m.add("lookup localhost timed out", 2, None);
        assert_eq!(word.id, host);
        assert!(!word.created);
        // In either order.
        let mut m = miner();
        let word = m.add("lookup localhost timed out", 1, None).id;
        let host = m.add("lookup db01.example.net timed out", 2, None).id;
        assert_eq!(m.canonical(word), host);
        assert_eq!(m.add("lookup gateway timed out", 3, None).id, host);

        // Framed values (`key=<*>`) take words as before: the key says it
        // holds a value.
        let mut m = miner();
        let kv = m.add("auth failed rhost=10.1.2.3 user=user_42", 1, None).id;
        assert_eq!(
            m.add("auth failed rhost=10.1.2.4 user=root", 2, None).id,
            kv
        );
    }

    #[test]
    fn a_state_saved_before_word_evidence_keeps_matching_as_it_did() {
        let mut m = miner();
        m.add("connect to 10.0.0.1 failed: refused", 1, None);
        let mut st = m.state();
        for t in &mut st.templates {
            t.words = u64::MAX;
        }
        let json = serde_json::to_string(&st).unwrap();
        // An older file has no `words`: every variable takes words.
        let old = json.replace(&format!(",\"words\":{}", u64::MAX), "");
        assert!(!old.contains("words"), "{old}");
        let back: MinerState = serde_json::from_str(&old).unwrap();
        let mut r = Miner::restore(&back, MinerConfig::default());
        let s = r.add("connect to redis failed: refused", 2, None);
        assert!(!s.created);
        // A state saved now keeps what each variable learned.
        let mut m = miner();
        m.add("connect to 10.0.0.1 failed: refused", 1, None);
        let mut r = Miner::restore(&m.state(), MinerConfig::default());
        assert!(r.add("connect to redis failed: refused", 2, None).created);
    }

    #[test]
    fn state_round_trips_and_keeps_matching() {
        let mut m = miner();
        let a = m.add("worker 7 crashed with signal 11", 10, Some(Level::Error));
        m.add("worker 9 crashed with signal 6", 20, Some(Level::Error));
        m.add("lease renewed for shard alpha", 30, Some(Level::Info));
        let mut st = m.state();
        st.learn_until = Some(99);
        let dir = std::env::temp_dir().join(format!("sigwatch-mining-{}", std::process::id()));
        let path = dir.join("templates.json");
        save(&path, &st).unwrap();
        let back = load(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(back.learn_until, Some(99));
        let mut r = Miner::restore(&back, MinerConfig::default());
        assert_eq!(r.len(), 2);
        let again = r.add("worker 12 crashed with signal 9", 40, Some(Level::Error));
        assert_eq!(again.id, a.id);
        assert!(!again.created);
        assert_eq!(again.previous, Some(20));
        let fresh = r.add("brand new failure of the flux capacitor", 50, None);
        assert!(fresh.created && fresh.id > a.id);
    }
}
