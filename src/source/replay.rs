//! Replay input: several files merged by event time.
//!
//! Files such as one log per pod overlap in time. Read one after the other,
//! every later file would arrive "late" and be squeezed to the watermark;
//! merged by each line's own time (ties to the file named first), replay
//! sees the cluster as it happened, whatever the files' sizes or order.

use super::block::{Block, BlockSource, ReadBlocks, ReadError, BLOCK_BYTES};
use super::stdin::{LineReader, ReadStats};
use super::Source;

/// Estimates a raw line's event time; the merge orders lines by it. The
/// two references complete stamps without a year: the previous line's
/// time of that input, else the file's modification time. The decoder
/// provides one ([`crate::decode::peek_time`]): reading a time is
/// decoding, not reading.
pub type TimeOf = fn(&str, Option<i64>, Option<i64>) -> Option<i64>;
use std::io::{self, BufRead};

struct Input {
    name: String,
    /// File size at open (None for stdin).
    size: Option<u64>,
    source: Source,
    lines: LineReader<Box<dyn BufRead + Send>>,
    next: Option<(i64, String)>,
    last: Option<i64>,
}

impl Input {
    fn open(f: &str) -> Result<Input, ReadError> {
        let err = |e| ReadError {
            path: f.to_string(),
            source: e,
        };
        let reader: Box<dyn BufRead + Send> = if f == "-" {
            Box::new(io::BufReader::with_capacity(1 << 16, io::stdin()))
        } else {
            Box::new(io::BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(f).map_err(err)?,
            ))
        };
        let source = source_for(f);
        let size = if f == "-" {
            None
        } else {
            std::fs::metadata(f).ok().map(|m| m.len())
        };
        Ok(Input {
            name: f.to_string(),
            size,
            source,
            lines: LineReader::new(reader),
            next: None,
            last: None,
        })
    }

    /// Reads the next line; a line without a time of its own sorts with the
    /// line before it.
    fn advance(&mut self, time_of: TimeOf) -> Result<(), ReadError> {
        let line = self.lines.next_line().map_err(|e| ReadError {
            path: self.name.clone(),
            source: e,
        })?;
        self.next = line.map(|l| {
            let t = time_of(&l, self.last, self.source.modified)
                .or(self.last)
                .unwrap_or(i64::MIN);
            if t != i64::MIN {
                self.last = Some(t);
            }
            (t, l)
        });
        Ok(())
    }
}

/// The source of a replayed file (`-`: stdin): named by its path, with
/// the pod, container and namespace a kubelet log path names (as `run
/// --file` reads them), its file name as the `file` label, the last-resort
/// identity of its lines' node, and its modification time. Standard input redirected from
/// a file has that file's; a pipe has none, and the time replay starts
/// stands in for it (the lines are being written now).
pub fn source_for(f: &str) -> Source {
    let mut source = Source::named(if f == "-" { "stdin" } else { f });
    source.kind = super::SourceKind::Numbered;
    if f != "-" {
        let path = std::path::Path::new(f);
        source.labels = super::file::labels_from_path(path);
        let base = path.file_name().map(|b| b.to_string_lossy().into_owned());
        source
            .labels
            .push(("file".to_string(), base.unwrap_or_else(|| f.to_string())));
        source.modified = std::fs::metadata(f)
            .ok()
            .as_ref()
            .and_then(super::modified_ns);
    } else {
        source.modified = stdin_modified();
    }
    source
}

/// Standard input's modification time: its file's when redirected from
/// one, else now.
fn stdin_modified() -> Option<i64> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata("/dev/stdin") {
            if meta.is_file() {
                return super::modified_ns(&meta).or(Some(meta.mtime() * 1_000_000_000));
            }
        }
    }
    Some(crate::clock::wall_ns())
}

/// Replay input ready to be read in blocks.
pub struct ReplayInput {
    /// The blocks (one file read directly, several merged by time).
    pub blocks: Box<dyn BlockSource + Send>,
    /// The source of each input, by the index blocks' runs use.
    pub sources: Vec<Source>,
    /// Total bytes when every input is a file.
    pub total: Option<u64>,
}

/// Opens files for replay; fails on the first that cannot be opened.
/// Several files are merged by `time_of`.
pub fn open(files: &[String], time_of: TimeOf) -> Result<ReplayInput, ReadError> {
    if let [f] = files {
        let err = |e| ReadError {
            path: f.to_string(),
            source: e,
        };
        let (blocks, total): (Box<dyn BlockSource + Send>, Option<u64>) = if f == "-" {
            (Box::new(ReadBlocks::new(f, io::stdin(), false)), None)
        } else {
            let file = std::fs::File::open(f).map_err(err)?;
            let total = file.metadata().ok().map(|m| m.len());
            (Box::new(ReadBlocks::new(f, file, false)), total)
        };
        return Ok(ReplayInput {
            blocks,
            sources: vec![source_for(f)],
            total,
        });
    }
    let merged = Merged::open(files, time_of)?;
    let sources = merged.sources();
    let total = merged.progress().1;
    Ok(ReplayInput {
        blocks: Box::new(MergedBlocks::new(merged)),
        sources,
        total,
    })
}

/// Files (`-` for stdin) merged into one stream of lines by event time.
pub struct Merged {
    inputs: Vec<Input>,
    current: Option<usize>,
    line: String,
    time_of: TimeOf,
}

impl Merged {
    /// Opens every file; fails on the first that cannot be opened. Lines
    /// are merged by `time_of`.
    pub fn open(files: &[String], time_of: TimeOf) -> Result<Merged, ReadError> {
        let mut inputs = files
            .iter()
            .map(|f| Input::open(f))
            .collect::<Result<Vec<_>, _>>()?;
        // A single file needs no merge and so no lookahead.
        if inputs.len() > 1 {
            for i in &mut inputs {
                i.advance(time_of)?;
            }
        }
        Ok(Merged {
            inputs,
            current: None,
            line: String::new(),
            time_of,
        })
    }

    /// The next line in time order, borrowed until the next call, with the
    /// index of the input it came from (see [`Merged::sources`]).
    pub fn next_indexed(&mut self) -> Result<Option<(usize, &str)>, ReadError> {
        if self.inputs.len() == 1 {
            return Ok(self.next_single()?.map(|(_, l)| (0, l)));
        }
        if let Some(i) = self.current.take() {
            self.inputs[i].advance(self.time_of)?;
        }
        let pick = self
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(i, inp)| inp.next.as_ref().map(|(t, _)| (*t, i)))
            .min();
        let Some((_, i)) = pick else { return Ok(None) };
        self.current = Some(i);
        match self.inputs[i].next.take() {
            Some((_, l)) => {
                self.line = l;
                Ok(Some((i, self.line.as_str())))
            }
            None => Ok(None),
        }
    }

    /// The source (name, labels) of each input, by index.
    pub fn sources(&self) -> Vec<Source> {
        self.inputs.iter().map(|i| i.source.clone()).collect()
    }

    fn next_single(&mut self) -> Result<Option<(&Source, &str)>, ReadError> {
        let Some(inp) = self.inputs.first_mut() else {
            return Ok(None);
        };
        let line = inp.lines.next_line_ref().map_err(|e| ReadError {
            path: inp.name.clone(),
            source: e,
        })?;
        Ok(line.map(|l| (&inp.source, l)))
    }

    /// (bytes read so far, total bytes when every input is a file).
    pub fn progress(&self) -> (u64, Option<u64>) {
        let read = self.inputs.iter().map(|i| i.lines.consumed).sum();
        let total = self.inputs.iter().map(|i| i.size).sum::<Option<u64>>();
        (read, total)
    }

    /// Reader counters per file.
    pub fn stats(&self) -> Vec<(String, ReadStats)> {
        self.inputs
            .iter()
            .map(|i| (i.name.clone(), i.lines.stats))
            .collect()
    }
}

/// Blocks from several files merged by time, each run of lines tagged
/// with its file.
pub struct MergedBlocks {
    merged: Merged,
}

impl MergedBlocks {
    /// Wraps opened inputs.
    pub fn new(merged: Merged) -> MergedBlocks {
        MergedBlocks { merged }
    }
}

impl BlockSource for MergedBlocks {
    fn next_block(&mut self) -> Result<Option<Block>, ReadError> {
        let mut b = Block::default();
        let mut last: Option<usize> = None;
        while b.data.len() < BLOCK_BYTES {
            let Some((i, line)) = self.merged.next_indexed()? else {
                break;
            };
            b.close_run(last, i);
            last = Some(i);
            b.data.push_str(line);
            b.data.push('\n');
        }
        b.close_run(last, usize::MAX);
        b.consumed = self.merged.progress().0;
        b.index_lines();
        Ok((!b.data.is_empty()).then_some(b))
    }

    fn stats(&self) -> Vec<(String, ReadStats)> {
        self.merged.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_interleave_by_time_and_untimed_lines_follow_their_neighbour() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let b = dir.path().join("b.log");
        std::fs::write(
            &a,
            "{\"ts\":10,\"msg\":\"a1\"}\nplain a2\n{\"ts\":30,\"msg\":\"a3\"}\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "{\"ts\":20,\"msg\":\"b1\"}\n{\"ts\":10,\"msg\":\"b0\"}\n",
        )
        .unwrap();
        let files = vec![a.display().to_string(), b.display().to_string()];
        let mut m = Merged::open(&files, crate::decode::peek_time).unwrap();
        let sources = m.sources();
        let mut got = Vec::new();
        while let Some((i, l)) = m.next_indexed().unwrap() {
            got.push(format!("{}:{l}", sources[i].labels[0].1));
        }
        let short: Vec<&str> = got
            .iter()
            .map(|s| s.split("msg\":\"").nth(1).map_or(s.as_str(), |r| &r[..2]))
            .collect();
        assert_eq!(short, vec!["a1", "a.log:plain a2", "b1", "b0", "a3"]);
        assert!(Merged::open(
            &["/nonexistent/x.log".to_string()],
            crate::decode::peek_time
        )
        .is_err());
    }
}
