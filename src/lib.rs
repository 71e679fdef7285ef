//! sigwatch recognises the log signatures of known incidents, aggregates them
//! per node and across the cluster, and pages on-call.
//!
//! The modules follow the data, and each imports only those before it
//! (`tests/architecture.rs` checks it; docs/architecture.md explains it):
//!
//! ```text
//!                 reader thread                         detection thread
//!  ┌────────┐ blocks ┌──────┐ hints  ┌────────┐ Event ┌─────────┐ Hit ┌────────┐ Status ┌───────┐ Notification ┌────────┐
//!  │ source │───────▶│ scan │───────▶│ decode │──────▶│ matcher │────▶│ detect │───────▶│ alert │─────────────▶│ notify │
//!  └────────┘        └──────┘        └────────┘       └─────────┘     └────────┘        └───────┘              └────────┘
//!   stdin, files,     literal and      wrappers,       one automaton,  per rule and      lifecycle,             lanes: queue,
//!   Loki, replay      field search     formats, time,  confirm         group, in         dedup, evidence        retry, rate, spool;
//!   merge             over a block     stream context                  event time                               stdout, webhook, AM,
//!                                                                                                               Slack, PagerDuty
//!                    └──────────────────────── engine: decode → match → detect → alert ──────────────────────┘
//! ```
//!
//! - [`clock`], [`stats`], `durable`, [`cause`], [`duration`], `text`:
//!   the ground floor every stage may use — the wall clock and RFC 3339 at
//!   the edges, process-wide counters, crash-safe state files, errors with
//!   their causes, durations as written in files, truncation and bounded
//!   regexes.
//! - [`source`]: where lines come from, read in bounded blocks on a thread
//!   of their own.
//! - [`decode`]: raw lines to events — wrappers, payload formats, time,
//!   stream context (labels, sticky fields), group keys.
//! - [`rules`]: the rule language, validated with `file:line:column`.
//! - `matcher`: every literal in one automaton; regexes and fields only
//!   confirm.
//! - `scan`: the block-wide literal and field searches, as hints. It
//!   runs before decoding (on the reader thread) but imports [`decode`],
//!   whose field patterns it searches.
//! - `detect`: one detector per kind (count, persist, spread, share,
//!   absent, sequence), bounded per rule.
//! - [`alert`]: pending → firing → resolved, fingerprints, evidence.
//! - [`engine`]: the stages above as one deterministic state machine.
//! - [`mining`]: log templates of error and warning messages (novelty).
//! - `incident`: related alerts joined into incidents, with their story.
//! - [`links`]: from an alert back to its lines (Loki, Grafana, file:line).
//! - `report`: the replay's HTML timeline and the live status page.
//! - [`notify`]: delivery, one lane per receiver, routes and fallbacks.
//! - [`server`]: `/healthz`, `/readyz`, `/metrics`, the status page.
//! - `ingest`: pushed lines (Loki push, OTLP, syslog): the listeners,
//!   the bodies decoded, one queue bounded in bytes, the write-ahead log
//!   that makes a 2xx durable.
//! - `explain`, `ruletest`: `sigwatch explain` and `sigwatch test`.
//! - [`config`]: the `sigwatch.yaml` model.
//! - [`app`]: the assembled pipeline behind `run` and `replay`.

#![deny(missing_docs)]
// Tests unwrap: a panic is how a test fails.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod alert;
pub mod app;
pub mod cause;
pub mod clock;
pub mod config;
pub mod decode;
pub(crate) mod detect;
pub(crate) mod durable;
pub mod duration;
pub mod engine;
pub(crate) mod explain;
pub(crate) mod incident;
pub(crate) mod ingest;
pub mod links;
pub(crate) mod matcher;
pub mod mining;
pub mod notify;
pub(crate) mod report;
pub mod rules;
pub(crate) mod ruletest;
pub(crate) mod scan;
pub mod server;
pub mod silence;
pub mod source;
pub mod stats;
pub(crate) mod text;

pub use engine::{Engine, Options, ReloadSummary, Stats, DEFAULT_LATENESS_NS};
pub use explain::{check_examples, ExampleFailure};
