//! The simulator: `cluster-autoscaler simulate` and `cluster-autoscaler bench`.
//!
//! `simulate` runs the real decision core against a simulated cluster (the world of
//! `autoscaler-world`) in virtual time and reports what happened: the scenario file is read
//! ([`scenario`]) with its options layered on the command line's (`autoscaler-options`), the
//! loop is driven ([`driver`]) with pods from workloads or a replayed trace ([`trace`]), seen
//! through the informer a live process has ([`informer`]), checked against the safety rules every
//! loop ([`safety`]), and summed up ([`report`], [`bound`], [`cost`], [`svg`]). `bench` times each
//! phase of one loop on a synthetic cluster generated in memory.
//!
//! It decides nothing about the cluster itself: every decision is the core's, every action is
//! carried out by the actuation crate on the world. It never talks to a real cluster, never reads
//! the real clock inside a run (wall time is measured around it and printed to stderr only), and
//! the same scenario and seed give a byte-identical report.
#![warn(missing_docs)]

mod arrival;
mod bench;
mod bound;
mod capacity_report;
mod cost;
mod cpu_clock;
mod distance;
mod driver;
// The fuzz suite; its generators and bounds are shared with the binary's suite (`testing`).
#[cfg(any(test, feature = "test-util"))]
mod fuzz;
mod informer;
mod report;
mod safety;
mod scenario;
mod simulate;
mod svg;
mod text;
mod trace;

pub use bench::{BenchArgs, run as bench};
pub use simulate::{SimulateArgs, load, run};

/// The fuzz suite's generators and bounds, shared with the binary's own suite (`test-util`).
#[cfg(any(test, feature = "test-util"))]
pub mod testing {
    pub use crate::fuzz::{accepted, bounded, duration, mutated, number, quantity};
}
