//! Where the line being detected was read: its source and, for inputs
//! read from their first line, its line number. Hits carry it so that an
//! alert's samples link back to their lines (a file and line, a Loki
//! stream and time).
//!
//! Kept per source name, bounded: numbered inputs (replayed files) keep
//! their counts for the whole run; live sources, whose blocks name
//! their own streams, are forgotten when the table fills.

use crate::detect::OriginRef;
use crate::source::{Source, SourceKind};

/// Sources remembered before the unnumbered ones are dropped.
const MAX_SOURCES: usize = 1024;

struct Slot {
    name: String,
    stream: Option<Vec<(String, String)>>,
    numbered: bool,
    lines: u64,
}

/// The current line's origin.
#[derive(Default)]
pub(crate) struct Here {
    slots: Vec<Slot>,
    /// Per input of the current block: its slot.
    inputs: Vec<usize>,
    at: Option<(usize, Option<u64>)>,
}

impl Here {
    fn slot(&mut self, src: &Source) -> usize {
        if let Some(i) = self.slots.iter().position(|s| s.name == src.name) {
            return i;
        }
        if self.slots.len() >= MAX_SOURCES {
            self.slots.retain(|s| s.numbered);
        }
        self.slots.push(Slot {
            name: src.name.clone(),
            stream: match src.kind {
                SourceKind::Loki(n) => Some(src.labels.iter().take(n).cloned().collect()),
                _ => None,
            },
            numbered: src.kind == SourceKind::Numbered,
            lines: 0,
        });
        self.slots.len() - 1
    }

    /// A block of lines from `sources` begins.
    pub(crate) fn begin(&mut self, sources: &[Source]) {
        self.inputs.clear();
        for s in sources {
            let i = self.slot(s);
            self.inputs.push(i);
        }
    }

    /// The next line of the block comes from input `input` (no such
    /// input: unknown).
    pub(crate) fn line(&mut self, input: usize) {
        let slot = self.inputs.get(input).copied();
        self.at = slot.map(|i| self.count(i));
    }

    /// The next line, fed alone, comes from `src`.
    pub(crate) fn line_of(&mut self, src: &Source) {
        let i = self.slot(src);
        self.at = Some(self.count(i));
    }

    fn count(&mut self, i: usize) -> (usize, Option<u64>) {
        let s = &mut self.slots[i];
        s.lines += 1;
        (i, s.numbered.then_some(s.lines))
    }

    /// The current line's origin.
    pub(crate) fn origin(&self) -> Option<OriginRef<'_>> {
        let (i, line) = self.at?;
        let s = self.slots.get(i)?;
        Some(OriginRef {
            source: &s.name,
            stream: s.stream.as_deref(),
            line,
        })
    }
}
