//! The chatter sample: which lines below the paging levels novelty mines.
//!
//! Mining a line costs far more than reading it, and chatter (info, debug,
//! warnings that do not page) is most of a busy log, so novelty mines a
//! sample of it. The sample is bounded two ways: at most
//! `chatter_per_second` lines per second of event time (a replay of a day
//! cannot mine a day's worth of chatter in a minute), and at most one line
//! in [`SHARE`] beyond a floor of a tenth of that rate (a log of 400 lines a
//! second mines about 5 % of them, not a quarter), so what mining costs
//! follows the line rate. A quiet stream (under the floor) is mined whole.
//!
//! It runs on every line of chatter, so its common case is a counter: the
//! gap to the next mined line is drawn once per mined line (uniformly
//! around the mean the last second's rate asks for, from a fixed-seed
//! generator: the same input gives the same sample, and a log that cycles
//! through its messages is not sampled in step with them), and the rate is
//! re-read once per second of event time.

/// Nanoseconds in a second.
const NS: i64 = 1_000_000_000;

/// One line of chatter in this many is mined beyond the floor.
pub const SHARE: u64 = 32;

/// Seconds of `chatter_per_second` mined whole at the start (the first
/// lines of a stream: its start-up messages).
const BURST_SECS: u64 = 10;

/// The floor, `chatter_per_second` divided by this: a stream this quiet
/// is mined whole.
const FLOOR_DIV: u64 = 10;

/// The state of the sample.
#[derive(Debug, Clone)]
pub struct Sample {
    /// `chatter_per_second` (0: every line).
    rate: u64,
    /// Lines still mined whole at the start.
    burst_left: u64,
    /// The end of the current second of event time (ns); `i64::MIN`
    /// before the first line.
    sec_end: i64,
    /// Lines of chatter seen in the current second, and mined.
    seen: u64,
    taken: u64,
    /// Mean lines per mined line, from the last second's rate.
    stride: u64,
    /// Lines to skip before the next mined one.
    skip_left: u64,
    /// xorshift64 state for the gaps.
    rng: u64,
}

impl Sample {
    /// A sample of at most `rate` lines per second of event time (0: no
    /// sampling).
    pub fn new(rate: u32) -> Sample {
        let rate = u64::from(rate);
        Sample {
            rate,
            burst_left: rate.saturating_mul(BURST_SECS),
            sec_end: i64::MIN,
            seen: 0,
            taken: 0,
            stride: 1,
            skip_left: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Whether the line of chatter at event time `time` is mined.
    #[inline]
    pub fn admit(&mut self, time: i64) -> bool {
        if self.rate == 0 {
            return true;
        }
        if time >= self.sec_end {
            self.roll(time);
        }
        self.seen += 1;
        if self.burst_left > 0 {
            self.burst_left -= 1;
            return true;
        }
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return false;
        }
        if self.taken >= self.rate {
            return false;
        }
        self.taken += 1;
        self.skip_left = self.gap();
        true
    }

    /// A new second of event time: the stride from the last one's rate
    /// (a gap of more than a second is quiet: every line again).
    #[inline(never)]
    fn roll(&mut self, time: i64) {
        let quiet = self.sec_end == i64::MIN || time >= self.sec_end.saturating_add(NS);
        let seen = if quiet { 0 } else { self.seen };
        let allowed = self.rate.min(self.rate / FLOOR_DIV + seen / SHARE).max(1);
        self.stride = seen.div_ceil(allowed).max(1);
        self.skip_left = self.skip_left.min(self.stride - 1);
        self.sec_end = time.div_euclid(NS).saturating_add(1).saturating_mul(NS);
        self.seen = 0;
        self.taken = 0;
    }

    /// The lines to skip after a mined one: uniform in 0..=2(stride-1),
    /// so one line in `stride` on average.
    fn gap(&mut self) -> u64 {
        if self.stride <= 1 {
            return 0;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x % (2 * (self.stride - 1) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines at `per_second` for `secs` seconds of event time; returns
    /// how many were mined.
    fn run(s: &mut Sample, per_second: i64, secs: i64) -> u64 {
        let mut n = 0;
        for i in 0..per_second * secs {
            n += u64::from(s.admit(i * (NS / per_second)));
        }
        n
    }

    #[test]
    fn no_rate_mines_everything() {
        let mut s = Sample::new(0);
        assert_eq!(run(&mut s, 100_000, 2), 200_000);
    }

    #[test]
    fn the_share_follows_the_line_rate_and_quiet_streams_stay_whole() {
        // 400 a second for an hour: about 1/32 plus 10 a second.
        let mut s = Sample::new(100);
        let n = 400 * 3600;
        let share = run(&mut s, 400, 3600) as f64 / n as f64;
        assert!((0.045..0.065).contains(&share), "mined {share:.3}");
        // 5 a second: every line.
        let mut s = Sample::new(100);
        assert_eq!(run(&mut s, 5, 3600), 5 * 3600);
        // 100,000 a second: the clock's 100 a second bind (after the burst).
        let mut s = Sample::new(100);
        let mined = run(&mut s, 100_000, 10);
        assert!((1_850..=2_000).contains(&mined), "mined {mined}");
    }

    #[test]
    fn lines_at_one_instant_are_bounded_by_the_burst_and_the_rate() {
        let mut s = Sample::new(100);
        let mined = (0..1_000_000).filter(|_| s.admit(42 * NS)).count();
        assert_eq!(mined, 1_000 + 100);
    }

    #[test]
    fn a_log_that_cycles_through_its_messages_is_sampled_evenly() {
        // Eight messages in turn at 400 a second; the stride (~18) and
        // the cycle would fall in step with a fixed gap.
        let mut s = Sample::new(100);
        let mut per = [0u64; 8];
        for i in 0..400 * 3600i64 {
            if s.admit(i * (NS / 400)) {
                per[(i % 8) as usize] += 1;
            }
        }
        let total: u64 = per.iter().sum();
        for (k, n) in per.iter().enumerate() {
            let share = *n as f64 / total as f64;
            assert!((0.10..0.15).contains(&share), "message {k}: {share:.3}");
        }
    }

    #[test]
    fn the_same_lines_give_the_same_sample() {
        let picks = |s: &mut Sample| -> Vec<bool> {
            (0..20_000i64).map(|i| s.admit(i * (NS / 400))).collect()
        };
        assert_eq!(picks(&mut Sample::new(100)), picks(&mut Sample::new(100)));
    }

    #[test]
    fn a_quiet_gap_mines_every_line_again() {
        let mut s = Sample::new(100);
        run(&mut s, 1_000, 60);
        // An hour later, 5 lines in a second: all mined.
        let t0 = 7200 * NS;
        let mined = (0..5).filter(|i| s.admit(t0 + i * (NS / 5))).count();
        assert_eq!(mined, 5);
    }
}
