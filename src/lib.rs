//! sigwatch recognises the log signatures of known incidents, aggregates them
//! per node and across the cluster, and pages on-call.
//!
//! The pipeline follows the data: [`source`] → [`decode`] → [`matcher`] →
//! [`detect`] → [`alert`] → [`notify`]. [`Engine`] wires the middle stages
//! into one synchronous, deterministic state machine: it is fed lines (and,
//! when live, clock ticks) and returns notifications. The binary adds the
//! sources and the delivery around it.
//!
//! Input mostly arrives in blocks ([`source::block`]): a reader thread
//! reads them and runs the [`scan`] over each — one search for every rule
//! literal and one for the fields the cheap path reads — while the engine,
//! on the other core, works through the previous block line by line with
//! those hints ([`Engine::push_block`]). Lines pushed one at a time
//! ([`Engine::push_line`]) give exactly the same results.

#![deny(missing_docs)]

pub mod alert;
pub mod app;
pub mod clock;
pub mod config;
pub mod decode;
pub mod detect;
pub mod engine;
pub mod explain;
pub mod matcher;
pub mod notify;
pub mod rules;
pub mod ruletest;
pub mod scan;
pub mod server;
pub mod source;
pub mod stats;

pub use engine::{
    check_examples, Engine, ExampleFailure, Options, ReloadSummary, Stats, DEFAULT_LATENESS_NS,
};
