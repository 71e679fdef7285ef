//! A line's event time and its stream's context: the line's own time
//! (forced by the transport, a time key, the header's stamp, rarer keys
//! and spellings), else its wrapper's, else its stream's previous one,
//! else a stand-in (arrival, the file's modification time) — and the
//! stream's sticky values (`nodeID` from a startup line) kept up.

use super::{names, payload, quick, time, Decoder, TimeFrom, SANE_TIME_MAX, SANE_TIME_MIN};
use crate::source::Source;

/// Whether a time is one a log line can have (one line from the year
/// 30000 must not move the watermark there).
fn sane(t: &i64) -> bool {
    (SANE_TIME_MIN..SANE_TIME_MAX).contains(t)
}

impl Decoder {
    /// Reads the line's time and keeps its stream's context up; returns
    /// the time the line stands at.
    pub(super) fn update_stream(
        &mut self,
        sid: usize,
        text: &str,
        wrapper_time: Option<i64>,
        arrival: Option<i64>,
        source: &Source,
        format: &str,
    ) -> i64 {
        let global = self.last_time;
        if sid >= self.slab.len() {
            self.time_from = TimeFrom::None;
            return global.or(arrival).unwrap_or(0);
        }
        if !self.full_scanned {
            self.small.scan(text, &mut self.small_spans);
        }
        let own = self.own_time(sid, text, format);
        let (time, from) = self.pick_time(sid, own, wrapper_time, arrival, source);
        if !from.is_own() {
            // Counted one by one: a line without a time of its own.
            self.stats.untimed += 1;
        }
        self.time_from = from;
        if !matches!(from, TimeFrom::Modified | TimeFrom::None) {
            // A stand-in time is no neighbour: it completes no stamp.
            self.slab[sid].last_time = Some(time);
        }
        self.update_sticky(sid, text);
        if from.moves_clocks() {
            self.last_time = Some(global.map_or(time, |g| g.max(time)));
        }
        time
    }

    /// The line's own time, if it has a sane one (an insane one is
    /// counted and dropped).
    fn own_time(&mut self, sid: usize, text: &str, format: &str) -> Option<i64> {
        let small_time = |d: &Decoder| {
            d.small_time_slots
                .iter()
                .find_map(|slot| time::parse_any(&d.small_span(*slot)?.value(text)?))
        };
        let keyed = matches!(format, "json" | "logfmt");
        let mut own = if let Some(t) = self.forced_time {
            Some(t)
        } else if keyed {
            small_time(self)
        } else {
            self.header.0.or_else(|| small_time(self))
        };
        if own.is_none() && (keyed || memchr::memchr(b'=', text.as_bytes()).is_some()) {
            // Rarer time keys (journald's µs, events' lastTimestamp…).
            self.ensure_full_scan(text);
            own = self.time_slots.iter().enumerate().find_map(|(n, slot)| {
                let v = self.spans.get(*slot).copied().flatten()?.value(text)?;
                // TIME_FIELDS[0] is journald's __REALTIME_TIMESTAMP, in µs.
                if n == 0 {
                    return v.parse::<i64>().ok().map(|us| us.saturating_mul(1000));
                }
                time::parse_any(&v)
            });
            if own.is_none() {
                own = rare_time(text, format);
            }
            if own.is_none() && keyed && self.spelled_time.try_now() {
                // Another spelling (`Timestamp`, `timeUnixNano`, log4j's
                // `instant`…): read from the decoded payload.
                if names::may_hold_time(text) {
                    let r = st_last_or(self, sid);
                    own = payload::decode(text, r).time;
                }
                self.spelled_time.record(own.is_some());
            }
        }
        if own.is_some_and(|t| !sane(&t)) {
            self.stats.bad_time += 1;
            own = None;
        }
        own
    }

    /// The time the line stands at, and where it came from: its own, its
    /// wrapper's, its stream's previous one (or the input's), the arrival
    /// time when live, the file's modification time in a replay.
    fn pick_time(
        &self,
        sid: usize,
        own: Option<i64>,
        wrapper_time: Option<i64>,
        arrival: Option<i64>,
        source: &Source,
    ) -> (i64, TimeFrom) {
        let (global, live) = (self.last_time, self.live);
        let wrapper_time = wrapper_time.filter(sane);
        let st_last = self.slab[sid].last_time;
        if let Some(t) = own {
            let from = if self.forced_time.is_some() {
                TimeFrom::Transport
            } else {
                TimeFrom::Line
            };
            (t, from)
        } else if let Some(t) = wrapper_time {
            (t, TimeFrom::Wrapper)
        } else if let Some(t) = st_last.or(global) {
            (t, TimeFrom::Previous)
        } else if let (true, Some(a)) = (live, arrival) {
            (a, TimeFrom::Arrival)
        } else if let (false, Some(m)) = (live, source.modified) {
            (m, TimeFrom::Modified)
        } else {
            (0, TimeFrom::None)
        }
    }

    /// The stream's sticky values, from the keys on this line (a stream
    /// whose values flip back and forth mixes producers: it is marked and
    /// inherits nothing from then on).
    fn update_sticky(&mut self, sid: usize, text: &str) {
        // A stream known to mix producers inherits nothing: its sticky
        // values are never read, so they are not kept up either (with a
        // key on every line that changes every line, that was a string
        // compare, an allocation and a shift per line).
        let sticky_slots = if self.slab[sid].multiplexed {
            0
        } else {
            self.sticky_slots.len()
        };
        for i in 0..sticky_slots {
            let slot = self.sticky_slots[i].0;
            let Some(v) = self
                .small_span(slot)
                .and_then(|sp| sp.value(text))
                .filter(|v| !v.is_empty())
            else {
                self.slab[sid].keyless = true;
                continue;
            };
            let key = &self.sticky_slots[i].1;
            let st = &mut self.slab[sid];
            match st.sticky.iter().position(|(k, _)| k == key) {
                Some(i) if st.sticky[i].1 == v => {}
                Some(i) => {
                    // Once a stream is known to mix producers its sticky
                    // values are not used, so their churn changes nothing.
                    if !st.multiplexed {
                        st.sticky_version += 1;
                    }
                    let old = std::mem::replace(&mut st.sticky[i].1, v.into_owned());
                    let flips_back = st
                        .previous
                        .iter()
                        .any(|(k, p)| k == key && *p == st.sticky[i].1);
                    if flips_back && !st.multiplexed {
                        st.multiplexed = true;
                        self.stats.multiplexed_streams += 1;
                        let stream = st.key.as_deref().unwrap_or("");
                        if st.keyless {
                            tracing::warn!(stream, key = key.as_str(), "Stream mixes several producers; lines without {key} no longer inherit it from the line before (counted as multiplexed_streams).");
                        } else {
                            // Every line so far names its own: nothing is lost.
                            tracing::debug!(
                                stream,
                                key = key.as_str(),
                                "Stream mixes several producers; each line names its own {key}."
                            );
                        }
                    }
                    st.previous.push((key.clone(), old));
                    if st.previous.len() > 8 {
                        st.previous.remove(0);
                    }
                }
                None => {
                    if !st.multiplexed {
                        st.sticky_version += 1;
                    }
                    st.sticky.push((key.clone(), v.into_owned()));
                }
            }
        }
    }
}

/// The time a stream's stamps without a year are completed from: its
/// previous line's, else the input's latest.
fn st_last_or(d: &Decoder, sid: usize) -> Option<i64> {
    d.slab.get(sid).and_then(|s| s.last_time).or(d.last_time)
}

/// Time keys of a few producers, searched only when no common one was
/// there: MongoDB's `"t":{"$date":…}`, Serilog's `@t`, Grafana's logfmt
/// `t=`.
#[cold]
fn rare_time(text: &str, format: &str) -> Option<i64> {
    let rare: &[&str] = if format == "json" {
        &["$date", "@t"]
    } else {
        &["t"]
    };
    rare.iter()
        .find_map(|k| quick::quick_get(text, k).and_then(|v| time::parse_any(&v)))
}
