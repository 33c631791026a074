//! # tracecast-replay
//!
//! Rebuilds the execution graph of a measured run (CPU threads, runtime
//! calls, GPU streams, launch, stream-order, event and cross-rank collective
//! edges) and re-simulates it with **one** deterministic discrete-event
//! simulator; then projects it — and analytical workload models (LLM, DLRM,
//! MoE with DP/FSDP/TP/PP/SP/EP) — onto other GPUs, link speeds, cluster
//! sizes and parallelism (DESIGN §5). Measured traces and model descriptions
//! both become graphs for the same simulator.
//!
//! This crate is a placeholder until the replay issue lands; it depends on
//! `tracecast-ingest` only, so the one-way crate order is fixed from the start.
#![deny(missing_docs)]
#![warn(unreachable_pub)]
