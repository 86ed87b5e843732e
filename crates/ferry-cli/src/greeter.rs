//! The tour's gRPC interface (`ferry serve --grpc ADDR`): one typed
//! interface served on both paths at once, locally in a runtime directory
//! and over gRPC through `ferry-grpc`, and called through either with the
//! same client type.
//!
//! This module owns the interface and its implementation; it must not
//! start processes or measure (the tour's `grpc` stop does).

/// The tour's typed interface, reachable over gRPC (service
/// `ferry.Greeter`).
#[ferry::interface(grpc)]
pub trait Greeter {
    /// A greeting for `name` that says which process answered and which
    /// logical thread it answered for (see [`greeting`]).
    fn greet(&self, name: String) -> String;
}

/// The implementation `ferry serve --grpc` serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Greetings;

impl Greeter for Greetings {
    fn greet(&self, name: String) -> String {
        let caller = ferry::rpc::chain().map(|c| (c.id.thread, c.id.pid));
        greeting(&name, std::process::id(), caller)
    }
}

/// The greeting of `name` by process `pid` for `caller` (its thread and
/// origin pid; `None` for a caller that brought no logical thread).
pub fn greeting(name: &str, pid: u32, caller: Option<(u64, u32)>) -> String {
    match caller {
        Some((thread, origin)) => {
            format!("hello {name}, from pid {pid}, for thread {thread} of pid {origin}")
        }
        None => format!("hello {name}, from pid {pid}, for a caller without a logical thread"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_greeting_names_the_server_and_the_caller() {
        assert_eq!(
            greeting("tour", 7, Some((3, 5))),
            "hello tour, from pid 7, for thread 3 of pid 5"
        );
        assert!(greeting("x", 7, None).ends_with("without a logical thread"));
        assert_eq!(GreeterGrpc::PROTO.matches("rpc Greet").count(), 1);
    }
}
