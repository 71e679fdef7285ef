//! What the engine keeps for the report when asked: its signature hits,
//! the population sightings of spread and share rules, and the volume of
//! all lines per second (see `Engine::record_hits`).

/// Most hits waiting in the hit log between two [`super::Engine::take_recording`].
pub const MAX_HIT_LOG: usize = 100_000;

/// One signature hit, kept for the replay's report.
#[derive(Debug, Clone, PartialEq)]
pub struct HitRecord {
    /// Rule index in [`super::Engine::rules`].
    pub rule: usize,
    /// The group (node) it counted for.
    pub group: String,
    /// The pod the line came from (its `pod` key: label, prefix or field),
    /// when it has one and the group is not the pod itself.
    pub pod: Option<String>,
    /// Event time (ns).
    pub time: i64,
    /// The line, cut to 400 bytes.
    pub line: String,
}

/// What the report draws besides hits: the population sightings of spread
/// and share rules (a peer that is alive but has no hit) and the volume of
/// all lines, so the picture has a baseline before the first hit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// Signature hits.
    pub hits: Vec<HitRecord>,
    /// Population sightings (sampled as the detectors sample them): rule
    /// index, group, its pod (when not the group itself), event time.
    pub sightings: Vec<(usize, String, Option<String>, i64)>,
    /// Lines per second of event time, run-length encoded: (second, lines,
    /// lines of level error or worse; the levels only when asked, see
    /// [`super::Engine::record_hits`]).
    pub volume: Vec<(i64, u32, u32)>,
    /// Whether `volume` counts levels (they cost a parse per JSON line).
    pub levels: bool,
}
