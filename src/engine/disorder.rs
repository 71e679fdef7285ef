//! How far out of order the input actually arrives, so a live clock waits
//! for late lines only as long as they really come late.
//!
//! The watermark stands `lateness` (5 s by default) behind the newest event
//! so that lines arriving a little out of order still count in their own
//! windows, and a live run counts what a replay of the same lines counts.
//! But an absence is made by time alone: on the watermark it would page five
//! seconds late even on a stream that is in order (`kubectl logs -f` of one
//! pod, a file being appended to). The live clock decides absences after
//! twice the disorder seen over the last minute or two of event time
//! instead, at least [`MIN_LIVE_LATENESS_NS`], at most the configured
//! lateness. A line that would have ended the absence and comes later than
//! that resolves it, as any later line does.

/// The least a live clock waits for late lines (500 ms).
pub const MIN_LIVE_LATENESS_NS: i64 = 500_000_000;

/// Event time per bucket of the running maximum (60 s).
const BUCKET_NS: i64 = 60_000_000_000;

/// The largest "behind" seen in this bucket and the one before, by event
/// time: behind the newest event, or behind the live clock.
#[derive(Debug, Clone, Default)]
pub(super) struct Disorder {
    current: i64,
    previous: i64,
    /// Event time at which the current bucket ends (0: none yet).
    ends: i64,
}

impl Disorder {
    /// A timed line at `t` when the newest event time (or the live clock,
    /// if later) is `max` (≥ t).
    #[inline]
    pub(super) fn note(&mut self, t: i64, max: i64) {
        if max >= self.ends {
            self.roll(max);
        }
        let behind = max - t;
        if behind > self.current {
            self.current = behind;
        }
    }

    #[cold]
    fn roll(&mut self, max: i64) {
        // A gap of more than one bucket forgets the old disorder too.
        self.previous = if self.ends != 0 && max < self.ends.saturating_add(BUCKET_NS) {
            self.current
        } else {
            0
        };
        self.current = 0;
        self.ends = max.saturating_add(BUCKET_NS);
    }

    /// How long a live clock waits for late lines, given the configured
    /// allowance.
    pub(super) fn live_lateness(&self, configured: i64) -> i64 {
        let seen = self.current.max(self.previous);
        seen.saturating_mul(2)
            .max(MIN_LIVE_LATENESS_NS)
            .min(configured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: i64 = 1_000_000_000;

    #[test]
    fn ordered_input_waits_the_least_and_disorder_is_remembered_for_a_while() {
        let mut d = Disorder::default();
        for i in 0..100 {
            d.note(i * S, i * S);
        }
        assert_eq!(d.live_lateness(5 * S), MIN_LIVE_LATENESS_NS);
        d.note(99 * S + 4 * S / 10, 100 * S);
        assert_eq!(d.live_lateness(5 * S), 12 * S / 10, "twice the 0.6 s seen");
        d.note(90 * S, 100 * S);
        assert_eq!(d.live_lateness(5 * S), 5 * S, "never past the configured");
        // Ordered again: still remembered in the next bucket, gone after.
        for i in 101..300 {
            d.note(i * S, i * S);
            if i < 150 {
                assert_eq!(d.live_lateness(5 * S), 5 * S, "at {i}");
            }
        }
        assert_eq!(d.live_lateness(5 * S), MIN_LIVE_LATENESS_NS);
    }

    #[test]
    fn the_live_clock_decides_an_absence_after_the_disorder_not_the_lateness() {
        use crate::alert::AlertState;
        use crate::source::Source;
        let text = r#"novelty: {enabled: false}
rules:
  - id: t.gone
    title: Heartbeat lost
    severity: warning
    match: {contains: ["beat"]}
    group_by: node
    detect: {absent: {for: 1m}}
"#;
        let t0 = 1_714_570_000i64;
        let run = |live: bool| {
            let mut e = crate::engine::test_engine(text);
            let mut out = Vec::new();
            for i in 0..=10 {
                let l = format!(r#"{{"ts":{}.0,"msg":"beat","nodeID":"a"}}"#, t0 + i);
                e.push_line(&Source::named("s"), &l, None, &mut out);
            }
            // 60.6 s after the last beat at +10 s.
            let now = (t0 + 70) * S + 6 * S / 10;
            if live {
                e.advance_live(now, &mut out);
                // The watermark's own tick, later, takes nothing back.
                e.advance_to(now + S, &mut out);
            } else {
                e.advance_to(now, &mut out);
            }
            out.iter().map(|n| n.state).collect::<Vec<_>>()
        };
        assert_eq!(run(true), vec![AlertState::Firing]);
        assert!(run(false).is_empty(), "the watermark waits 5 s more");
    }

    #[test]
    fn a_long_gap_forgets() {
        let mut d = Disorder::default();
        d.note(0, 2 * S);
        assert_eq!(d.live_lateness(5 * S), 4 * S);
        d.note(3600 * S, 3600 * S);
        assert_eq!(d.live_lateness(5 * S), MIN_LIVE_LATENESS_NS);
        assert_eq!(d.live_lateness(S / 10), S / 10, "a smaller configured wins");
    }
}
