//! Lines that are parts of one event: a pretty-printed JSON object (a
//! line that is exactly `{` up to its closing brace) joined into one text,
//! and a Kubernetes `List` split into its items. Bounded in bytes and lines.

use super::{Decoder, Prepared};
use std::borrow::Cow;

/// Longest pretty-printed JSON object reassembled, in lines.
pub const MAX_BLOCK_LINES: usize = 100_000;

/// Tracks brace depth through a chunk of JSON text.
fn json_depth(text: &str, mut depth: usize, in_str: &mut bool) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if *in_str => i += 1,
            b'"' => *in_str = !*in_str,
            b'{' | b'[' if !*in_str => depth += 1,
            b'}' | b']' if !*in_str => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    depth
}

impl Decoder {
    /// Joins a pretty-printed JSON object (a line that is exactly `{` up to
    /// its closing brace) into one text; splits a Kubernetes `List` into its
    /// items, the first returned and the rest queued.
    pub(super) fn reassemble_block<'a>(
        &mut self,
        sid: usize,
        text: Cow<'a, str>,
    ) -> Option<Cow<'a, str>> {
        let st = self.slab.get_mut(sid)?;
        let done = match &mut st.block {
            Some((buf, depth, in_str, lines)) => {
                buf.push('\n');
                buf.push_str(&text);
                *depth = json_depth(&text, *depth, in_str);
                *lines += 1;
                if *depth > 0
                    && buf.len() < crate::source::max_line_bytes()
                    && *lines < MAX_BLOCK_LINES
                {
                    return None;
                }
                if *depth > 0 {
                    self.stats.partial_overflow += 1;
                }
                st.block.take().map(|b| b.0)
            }
            None if text.trim_end() == "{" => {
                st.block = Some((text.into_owned(), 1, false, 1));
                return None;
            }
            None => return Some(text),
        };
        let joined = done?;
        self.stats.json_blocks += 1;
        if let Ok(serde_json::Value::Object(mut m)) =
            serde_json::from_str::<serde_json::Value>(&joined)
        {
            let is_list = m
                .get("kind")
                .and_then(|k| k.as_str())
                .is_some_and(|k| k.ends_with("List"));
            if let (true, Some(serde_json::Value::Array(items))) = (is_list, m.remove("items")) {
                let mut texts: Vec<String> = items.iter().map(|i| i.to_string()).collect();
                self.stats.list_items += texts.len() as u64;
                if texts.is_empty() {
                    return Some(Cow::Owned(joined));
                }
                let first = texts.remove(0);
                self.queued.extend(texts.into_iter().map(|t| (sid, t)));
                return Some(Cow::Owned(first));
            }
            // One line, so the text and its samples stay readable.
            return Some(Cow::Owned(serde_json::Value::Object(m).to_string()));
        }
        Some(Cow::Owned(joined))
    }

    /// Whether lines split out of a List wait in the queue.
    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Prepares the next queued line (an item of a split List), if any.
    pub fn prepare_queued(&mut self, arrival: Option<i64>) -> Option<Prepared<'static>> {
        let (sid, text) = self.queued.pop_front()?;
        self.full_scanned = false;
        self.afters_possible = true;
        let source = crate::source::Source::named("");
        let reference = self.reference(sid, None, arrival, &source);
        let format = self.read_header(&text, super::payload::structured_kind(&text), reference);
        let time = self.update_stream(sid, &text, None, arrival, &source, format);
        Some(Prepared {
            text: Cow::Owned(text),
            wrapper_time: None,
            sid,
            time,
            prefiltered: None,
            format,
            level: self.header.1,
            header: self.text_header,
            time_from: self.time_from,
        })
    }
}
