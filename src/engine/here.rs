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
    /// Slot of each source name.
    index: std::collections::HashMap<String, usize>,
    /// Per input of the current block: its slot.
    inputs: Vec<usize>,
    at: Option<(usize, Option<u64>)>,
}

impl Here {
    fn slot(&mut self, src: &Source) -> usize {
        if let Some(&i) = self.index.get(&src.name) {
            return i;
        }
        self.index.insert(src.name.clone(), self.slots.len());
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

    /// Room for `n` more sources: past [`MAX_SOURCES`] the unnumbered
    /// ones are forgotten (before a block, so its inputs stay valid; one
    /// block's own sources are always kept).
    fn make_room(&mut self, n: usize) {
        if self.slots.len() + n > MAX_SOURCES {
            self.slots.retain(|s| s.numbered);
            self.index = self
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i))
                .collect();
        }
    }

    /// A block of lines from `sources` begins.
    pub(crate) fn begin(&mut self, sources: &[Source]) {
        let new = sources
            .iter()
            .filter(|s| !self.index.contains_key(&s.name))
            .count();
        self.make_room(new);
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
        if !self.index.contains_key(&src.name) {
            self.make_room(1);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, kind: SourceKind) -> Source {
        Source {
            kind,
            labels: vec![("pod".into(), name.into()), ("trace".into(), "t".into())],
            ..Source::named(name)
        }
    }

    #[test]
    fn files_are_numbered_per_input_and_loki_streams_keep_their_labels() {
        let mut h = Here::default();
        let sources = [
            src("a.log", SourceKind::Numbered),
            src("{pod=\"b\"}", SourceKind::Loki(1)),
        ];
        h.begin(&sources);
        let mut seen = Vec::new();
        for input in [0, 0, 1, 0] {
            h.line(input);
            let o = h.origin().unwrap();
            seen.push((o.source.to_string(), o.line, o.stream.map(<[_]>::len)));
        }
        assert_eq!(
            seen,
            [
                ("a.log".to_string(), Some(1), None),
                ("a.log".to_string(), Some(2), None),
                ("{pod=\"b\"}".to_string(), None, Some(1)),
                ("a.log".to_string(), Some(3), None),
            ]
        );
        // The next block of the same inputs goes on counting.
        h.begin(&sources);
        h.line(0);
        assert_eq!(h.origin().unwrap().line, Some(4));
        h.line(9);
        assert!(h.origin().is_none(), "an input the block does not have");
    }

    #[test]
    fn live_sources_are_forgotten_when_the_table_fills_numbered_ones_are_not() {
        let mut h = Here::default();
        h.begin(&[src("a.log", SourceKind::Numbered)]);
        h.line(0);
        for i in 0..MAX_SOURCES + 10 {
            h.begin(&[src(&format!("{{pod=\"{i}\"}}"), SourceKind::Loki(1))]);
            h.line(0);
            assert!(h.slots.len() <= MAX_SOURCES);
        }
        h.begin(&[src("a.log", SourceKind::Numbered)]);
        h.line(0);
        assert_eq!(
            h.origin().unwrap().line,
            Some(2),
            "the file's count survived"
        );
    }
}
