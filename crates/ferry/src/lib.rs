//! ferry: threads that cost a few procedure calls, on processors that keep
//! running when a thread blocks, and calls into other processes over shared
//! memory.
//!
//! This crate is being built in layers (see `docs/architecture.md`). Present so
//! far: [`arch`]'s context switch and [`stack`]'s guarded stacks, the floor the
//! user-level threads stand on.

#![deny(missing_docs)]

pub mod arch;
pub mod stack;
