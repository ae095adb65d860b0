//! # tcpwhy-lab: reproduce TCP latency pathologies on the local kernel
//!
//! Builds a client -- router -- server topology of network namespaces, runs tcpwhy's own
//! traffic in them with the socket options each scenario needs, delays and drops packets in
//! the router through NFQUEUE, captures on a veth with AF_PACKET, and measures every scenario
//! with and without its fix.
//!
//! Architecture invariant: traffic only inside namespaces it made; everything it creates or
//! changes is undone on exit, failure and Ctrl-C, and recorded under /run/tcpwhy-lab so that
//! `tcpwhy lab clean` undoes a run killed with SIGKILL.
#![forbid(unsafe_code)]

/// Live capture and the pcap writer live in tcpwhy-capture; the lab records with them.
pub use tcpwhy_capture::live as capture;
pub mod emulator;
pub mod matrix;
pub mod os;
pub mod run;
pub mod scenarios;
pub mod stats;
pub mod topo;
pub mod traffic;
