//! The peer systems of `urpc` ([`System`]) and the client's end of one
//! run with one of them ([`Connection`]): it starts the server process
//! ([`super::child`]) with what that system needs (a memfd, a socket,
//! two pipe ends, a service name), waits until it is ready, makes calls
//! through it and ends it.
//!
//! This module owns which system needs what; the protocols are in
//! [`super::shm`], [`super::stream`] and [`super::iceoryx`].

use std::io::{PipeReader, PipeWriter};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::child::ServerProcess;
use super::{iceoryx, shm, stream};
use crate::error::Error;

/// How long a server process may take to be ready, and to exit.
const START_LIMIT: Duration = Duration::from_secs(10);
const EXIT_LIMIT: Duration = Duration::from_secs(5);

/// A system ferry's calls are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// Two processes spinning on one word of a shared mapping.
    SpinFloor,
    /// A `SOCK_STREAM` socketpair.
    UnixSocket,
    /// A pipe each way.
    Pipe,
    /// Shared memory and process-shared futex words, both sides asleep.
    FutexShm,
    /// iceoryx2's request-response.
    Iceoryx2,
}

impl System {
    /// Every peer, in table order.
    pub const ALL: [System; 5] = [
        System::SpinFloor,
        System::UnixSocket,
        System::Pipe,
        System::FutexShm,
        System::Iceoryx2,
    ];

    /// The row's system name.
    pub fn name(self) -> &'static str {
        match self {
            System::SpinFloor => "spin floor",
            System::UnixSocket => "unix socket",
            System::Pipe => "pipe",
            System::FutexShm => "futex shm",
            System::Iceoryx2 => "iceoryx2",
        }
    }

    /// The name on the server's command line.
    pub fn arg(self) -> &'static str {
        match self {
            System::SpinFloor => "spin-floor",
            System::UnixSocket => "unix-socket",
            System::Pipe => "pipe",
            System::FutexShm => "futex-shm",
            System::Iceoryx2 => "iceoryx2",
        }
    }

    /// The system named `arg` on a command line.
    pub fn from_arg(arg: &str) -> Result<System, Error> {
        System::ALL
            .into_iter()
            .find(|s| s.arg() == arg)
            .ok_or_else(|| Error(format!("no urpc system {arg:?}")))
    }
}

/// The client's side of a connection.
#[derive(Debug)]
enum Link {
    Shm(shm::Client),
    Socket(stream::Client<UnixStream, UnixStream>),
    Pipe(stream::Client<PipeReader, PipeWriter>),
    Iceoryx(Box<iceoryx::Client>),
}

/// A server process of one system and the client's end of it.
#[derive(Debug)]
pub struct Connection {
    // Field order is drop order: the link (closing sockets and pipes, so
    // a server blocked in a read sees end of stream) before the process.
    link: Link,
    server: ServerProcess,
}

impl Connection {
    /// Starts a server of `system` for calls of `size` bytes on CPU `cpu`
    /// and connects to it once it is ready.
    pub fn open(system: System, size: usize, cpu: Option<usize>) -> Result<Connection, Error> {
        let mut args = vec![
            "--system".to_owned(),
            system.arg().to_owned(),
            "--size".to_owned(),
            size.to_string(),
        ];
        if let Some(cpu) = cpu {
            args.extend(["--cpu".to_owned(), cpu.to_string()]);
        }
        // Every run gets a service name of its own (iceoryx2 only).
        let name = iceoryx::service_name(size);
        if system == System::Iceoryx2 {
            args.extend(["--name".to_owned(), name.clone()]);
        }
        let io = |what: &str, e: std::io::Error| Error(format!("{what}: {e}"));
        // The server's descriptors stay open here until it is ready, then
        // are closed (so that end of stream reaches whoever reads).
        let (link, theirs): (Option<Link>, Vec<OwnedFd>) = match system {
            System::SpinFloor | System::FutexShm => {
                let kind = if system == System::SpinFloor {
                    shm::Kind::Spin
                } else {
                    shm::Kind::Futex
                };
                let client = shm::Client::new(kind, size)?;
                let fd = client.fd().try_clone_to_owned().map_err(|e| io("dup", e))?;
                (Some(Link::Shm(client)), vec![fd])
            }
            System::UnixSocket => {
                let (ours, theirs) = UnixStream::pair().map_err(|e| io("socketpair", e))?;
                let rx = ours.try_clone().map_err(|e| io("dup", e))?;
                let link = Link::Socket(stream::Client::new(rx, ours));
                (Some(link), vec![theirs.into()])
            }
            System::Pipe => {
                let (call_r, call_w) = std::io::pipe().map_err(|e| io("pipe", e))?;
                let (reply_r, reply_w) = std::io::pipe().map_err(|e| io("pipe", e))?;
                let link = Link::Pipe(stream::Client::new(reply_r, call_w));
                (Some(link), vec![call_r.into(), reply_w.into()])
            }
            System::Iceoryx2 => {
                // The client port is made once the server's is there.
                (None, vec![])
            }
        };
        for fd in &theirs {
            args.extend(["--fd".to_owned(), fd.as_raw_fd().to_string()]);
        }
        let raw: Vec<_> = theirs.iter().map(AsRawFd::as_raw_fd).collect();
        let mut server = ServerProcess::spawn(&args, &raw)?;
        server.wait_ready(START_LIMIT)?;
        drop(theirs);
        let link = match link {
            Some(link) => link,
            None => Link::Iceoryx(Box::new(iceoryx::Client::new(&name, size)?)),
        };
        Ok(Connection { link, server })
    }

    /// One round trip: `args` to the server, its result into `result`.
    pub fn call(&mut self, args: &[u8], result: &mut [u8]) -> Result<(), Error> {
        match &mut self.link {
            Link::Shm(c) => c.call(args, result),
            Link::Socket(c) => c.call(args, result),
            Link::Pipe(c) => c.call(args, result),
            Link::Iceoryx(c) => c.call(args, result),
        }
    }

    /// Tells the server to exit and waits until it has, successfully.
    pub fn close(mut self) -> Result<(), Error> {
        match &mut self.link {
            Link::Shm(c) => c.stop(),
            Link::Socket(c) => c.stop()?,
            Link::Pipe(c) => c.stop()?,
            Link::Iceoryx(c) => c.stop()?,
        }
        let Connection { link, server } = self;
        drop(link);
        server.finish(EXIT_LIMIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for s in System::ALL {
            assert_eq!(System::from_arg(s.arg()), Ok(s));
        }
        assert!(System::from_arg("carrier-pigeon").is_err());
    }
}
