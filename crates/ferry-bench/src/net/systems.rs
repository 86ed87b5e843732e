//! The servers `net` compares: their names on the command line and in the
//! rows.
//!
//! This module owns the names only; the servers are [`super::serve`]'s and
//! Go's program, their runs [`super::run()`]'s.

use crate::error::Error;

/// A server of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum System {
    /// A ferry thread per connection, `ferry::net`.
    Ferry,
    /// A goroutine per connection (`go/echo/`).
    Go,
    /// A Tokio task per connection.
    Tokio,
}

/// The systems, in print order.
pub const SYSTEMS: [System; 3] = [System::Ferry, System::Go, System::Tokio];

impl System {
    /// The name given to `--system` and `--systems`.
    pub fn arg(self) -> &'static str {
        match self {
            System::Ferry => "ferry",
            System::Go => "go",
            System::Tokio => "tokio",
        }
    }

    /// The row label.
    pub fn label(self) -> &'static str {
        match self {
            System::Ferry => "ferry P=2",
            System::Go => "go P=2",
            System::Tokio => "tokio 2 workers",
        }
    }

    /// The system named `arg`.
    pub fn from_arg(arg: &str) -> Result<System, Error> {
        SYSTEMS
            .into_iter()
            .find(|s| s.arg() == arg)
            .ok_or_else(|| Error(format!("unknown system {arg:?}: ferry, go or tokio")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for s in SYSTEMS {
            assert_eq!(System::from_arg(s.arg()), Ok(s));
        }
        assert!(System::from_arg("nginx").unwrap_err().0.contains("nginx"));
    }
}
