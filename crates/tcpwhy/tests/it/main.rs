//! The integration tests of the `tcpwhy` binary, in one test binary (one link instead of one
//! per file). The lab and live-host tests (`lab.rs`, `lab_vantage.rs`, `host.rs`) stay binaries
//! of their own: they measure latency on the kernel and must not share the CPU with the rest;
//! `no_alloc.rs` too, as it installs a counting allocator for its whole binary, and
//! `adversarial.rs`, which bounds the peak memory of the runs it starts (the kernel reports
//! the largest child of the whole test binary).
//!
//! Run one file's tests with its module name: `cargo test --test it snapshots::`.

#[path = "../common/mod.rs"]
mod common;

mod analyze;
mod annotate;
mod cli;
mod corpus;
mod detect;
mod duckdb;
mod filter;
mod flood;
mod fuzz_regressions;
mod html;
mod json_schema;
mod lab_fixtures;
mod lab_vantage_fixtures;
mod link_types;
mod parquet_tables;
mod pipes;
mod real_world;
mod schema_doc;
mod snapshots;
mod tcpdump_review;
mod terminal;
mod threads;
mod tshark;
