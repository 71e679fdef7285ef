//! The block scan: ripgrep's trick applied to detection. Instead of asking
//! every line "does any rule literal occur here?" and "where are the
//! fields the cheap path reads?", one search over a whole block of lines
//! answers both, and line boundaries are looked up only around what it
//! finds. It needs no stream state, so it runs on the reader's thread while
//! the engine works on the previous block ([`crate::source::block`]).
//!
//! The answers are hints, never decisions: a flagged line is still
//! confirmed by the matcher on its unwrapped text, and a line whose text is
//! not a slice of the raw line (colour codes removed, Docker unescaping,
//! partial or multi-line joins) is scanned on its own. So results never
//! depend on where blocks begin or end, and replay stays byte-for-byte
//! deterministic.

use crate::decode::keys::KeyIndex;
use crate::decode::LineHint;
use crate::matcher::LiteralSearch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The searches of one rule set. Built by the engine; a rule reload builds
/// a new one, and hints of the old one are then ignored.
pub struct Scanner {
    generation: u64,
    /// Finds any literal (None: no literals, no line can be a candidate
    /// unless `every_line`).
    literals: Option<LiteralSearch>,
    /// Some condition has no literal: every line is a candidate.
    every_line: bool,
    /// The decoder's field scanner, when a block-wide search is exact.
    keys: Option<Arc<KeyIndex>>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("generation", &self.generation)
            .field("every_line", &self.every_line)
            .finish_non_exhaustive()
    }
}

/// What a scan found in one block.
#[derive(Debug, Default, Clone)]
pub struct Hints {
    generation: u64,
    /// Start offsets of the lines where a literal occurs, ascending.
    flagged: Vec<u32>,
    /// Field-pattern matches: (offset, pattern), ascending.
    keys: Option<Vec<(u32, u16)>>,
    /// Which rare needles occur anywhere in the block: bit 0 an escape
    /// byte (ANSI colours), bit 1 a shipper envelope's `"pod_name"`; their
    /// absence lets the decoder skip a per-line search.
    rare: u8,
    /// Where the group keys' `after:` literals occur, ascending.
    afters: Option<Vec<u32>>,
}

impl Scanner {
    /// A scanner over a literal searcher (the matcher's) and the decoder's
    /// field scanner.
    pub fn new(literals: Option<LiteralSearch>, every_line: bool, keys: Arc<KeyIndex>) -> Scanner {
        Scanner {
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            literals,
            every_line,
            keys: keys.block_safe().then_some(keys),
        }
    }

    /// This scanner's generation (hints carry it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Scans a block of complete lines (blocks larger than 4 GiB are not
    /// hinted).
    pub fn scan(&self, data: &str) -> Hints {
        let mut h = Hints {
            generation: self.generation,
            ..Hints::default()
        };
        if u32::try_from(data.len()).is_err() {
            h.generation = 0;
            return h;
        }
        let b = data.as_bytes();
        if !self.every_line {
            if let Some(ac) = &self.literals {
                let mut pos = 0;
                while pos < b.len() {
                    let Some(m) = ac.find(b, pos) else {
                        break;
                    };
                    let start = memchr::memrchr(b'\n', &b[..m]).map_or(0, |i| i + 1);
                    h.flagged.push(start as u32);
                    pos = memchr::memchr(b'\n', &b[m..]).map_or(b.len(), |i| m + i + 1);
                }
            }
        }
        if let Some(keys) = &self.keys {
            let mut v = Vec::with_capacity(b.len() / 64);
            keys.search(b, |s, pat| v.push((s as u32, pat as u16)));
            h.keys = Some(v);
            let mut afters = Vec::new();
            if keys.after_positions(b, |p| afters.push(p as u32)) {
                afters.sort_unstable();
                h.afters = Some(afters);
            }
        }
        if memchr::memchr(0x1b, b).is_some() {
            h.rare |= 0b001;
        }
        if memchr::memmem::find(b, b"\"pod_name\"").is_some() {
            h.rare |= 0b010;
        }
        h
    }
}

impl Hints {
    /// Hints that say nothing (every line is scanned on its own).
    pub fn none() -> Hints {
        Hints::default()
    }

    /// A cursor that hands out each line's hint, lines in order.
    pub fn cursor(&self, current: u64) -> HintCursor<'_> {
        HintCursor {
            hints: (self.generation != 0 && self.generation == current).then_some(self),
            flagged: 0,
            keys: 0,
            afters: 0,
        }
    }
}

/// Walks a block's hints line by line.
pub struct HintCursor<'h> {
    hints: Option<&'h Hints>,
    flagged: usize,
    keys: usize,
    afters: usize,
}

impl<'h> HintCursor<'h> {
    /// The hint of the line `start..end` (offsets in the block); lines must
    /// be asked for in order.
    pub fn line(&mut self, start: usize, end: usize) -> Option<LineHint<'h>> {
        let h = self.hints?;
        while h
            .flagged
            .get(self.flagged)
            .is_some_and(|&f| (f as usize) < start)
        {
            self.flagged += 1;
        }
        // A line holding newlines (a Loki entry) is flagged by any of its
        // parts.
        let flagged = h
            .flagged
            .get(self.flagged)
            .is_some_and(|&f| (f as usize) < end.max(start + 1));
        let keys = h.keys.as_deref().map(|k| {
            while k.get(self.keys).is_some_and(|&(p, _)| (p as usize) < start) {
                self.keys += 1;
            }
            let rest = &k[self.keys..];
            let n = rest
                .iter()
                .take_while(|&&(p, _)| (p as usize) < end)
                .count();
            &rest[..n]
        });
        let afters = h.afters.as_deref().map(|a| {
            while a.get(self.afters).is_some_and(|&p| (p as usize) < start) {
                self.afters += 1;
            }
            let rest = &a[self.afters..];
            &rest[..rest.iter().take_while(|&&p| (p as usize) < end).count()]
        });
        Some(LineHint {
            flagged,
            keys,
            base: start as u32,
            rare: h.rare,
            afters,
        })
    }
}

/// Where readers find the scanner of the rules in force: the engine
/// replaces it on reload, readers take it once per block.
#[derive(Debug, Clone)]
pub struct ScannerSlot(Arc<Mutex<Arc<Scanner>>>);

impl ScannerSlot {
    /// A slot holding `s`.
    pub fn new(s: Arc<Scanner>) -> ScannerSlot {
        ScannerSlot(Arc::new(Mutex::new(s)))
    }

    /// The scanner in force.
    pub fn get(&self) -> Arc<Scanner> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Puts a new scanner in force.
    pub fn set(&self, s: Arc<Scanner>) {
        match self.0.lock() {
            Ok(mut g) => *g = s,
            Err(p) => *p.into_inner() = s,
        }
    }
}
