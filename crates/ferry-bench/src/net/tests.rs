//! Tests of `net`.
