//! The `iceoryx2` peer: its request-response messaging pattern between two
//! processes, requests and responses of `[u8]` slices of the call's size
//! with the call number in a `u64` user header ([`STOP`] tells the server
//! to exit). Both sides poll without sleeping (iceoryx2's ports have no
//! blocking receive; a `WaitSet` would add an event on top), as the spin
//! floor does.
//!
//! This module owns the service's configuration, the client's side of a
//! call and the server's loop. It measures nothing. Nothing received is
//! trusted: a reply to another call or of another length is an error.

use iceoryx2::port::client::Client as IoxClient;
use iceoryx2::port::server::Server as IoxServer;
use iceoryx2::prelude::*;

use crate::error::Error;

/// The header that tells the server to exit.
pub const STOP: u64 = u64::MAX;

/// The iceoryx2 service kind both sides use (inter-process).
type Svc = ipc::Service;

/// The service: `[u8]` requests and responses with `u64` user headers.
type Factory =
    iceoryx2::service::port_factory::request_response::PortFactory<Svc, [u8], u64, [u8], u64>;

/// A request sent, its response awaited.
type Pending = iceoryx2::pending_response::PendingResponse<Svc, [u8], u64, [u8], u64>;

fn err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error(format!("iceoryx2 {what}: {e:?}"))
}

/// A node with iceoryx2's own logging quietened and no signal handlers
/// of its own (the bench owns its signals).
fn node() -> Result<Node<Svc>, Error> {
    set_log_level(LogLevel::Error);
    NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Svc>()
        .map_err(|e| err("node", e))
}

/// The service both sides open: one client, one server, one request in
/// flight, slices of up to `size` bytes.
fn service(node: &Node<Svc>, name: &str) -> Result<Factory, Error> {
    let name: ServiceName = name.try_into().map_err(|e| err("service name", e))?;
    node.service_builder(&name)
        .request_response::<[u8], [u8]>()
        .request_user_header::<u64>()
        .response_user_header::<u64>()
        .max_clients(1)
        .max_servers(1)
        .max_active_requests_per_client(1)
        .open_or_create()
        .map_err(|e| err("service", e))
}

/// The client's side: its node, service and port.
pub struct Client {
    // Field order is drop order: the port before its service and node.
    port: IoxClient<Svc, [u8], u64, [u8], u64>,
    _service: Factory,
    _node: Node<Svc>,
    calls: u64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("iceoryx::Client")
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of the service `name`, whose server is already up.
    pub fn new(name: &str, size: usize) -> Result<Client, Error> {
        let node = node()?;
        let service = service(&node, name)?;
        let port = service
            .client_builder()
            .initial_max_slice_len(size.max(1))
            .create()
            .map_err(|e| err("client port", e))?;
        Ok(Client {
            port,
            _service: service,
            _node: node,
            calls: 0,
        })
    }

    /// Sends one request of `args` with header `seq`.
    fn send(&self, seq: u64, args: &[u8]) -> Result<Pending, Error> {
        let mut req = self
            .port
            .loan_slice_uninit(args.len())
            .map_err(|e| err("loan", e))?;
        *req.user_header_mut() = seq;
        req.write_from_slice(args)
            .send()
            .map_err(|e| err("send", e))
    }

    /// One call: `args` out, the response's payload into `result` (both
    /// the call's size).
    pub fn call(&mut self, args: &[u8], result: &mut [u8]) -> Result<(), Error> {
        self.calls += 1;
        let pending = loop {
            let pending = self.send(self.calls, args)?;
            // The first request may go out before the client has seen the
            // server's port: it reaches nobody and is sent again.
            if pending.number_of_server_connections() > 0 {
                break pending;
            }
            std::thread::yield_now();
        };
        let response = loop {
            // Read before receiving: a server that answers and drops the
            // request between the two leaves its response to be received.
            let connected = pending.is_connected();
            if let Some(r) = pending.receive().map_err(|e| err("receive", e))? {
                break r;
            }
            if !connected {
                return Err(Error(format!(
                    "iceoryx2: server gone before reply {}",
                    self.calls
                )));
            }
            std::hint::spin_loop();
        };
        let (seq, payload) = (*response.user_header(), response.payload());
        if seq != self.calls || payload.len() != result.len() {
            return Err(Error(format!(
                "iceoryx2: reply {seq} of {} bytes to call {} of {}",
                payload.len(),
                self.calls,
                result.len()
            )));
        }
        result.copy_from_slice(payload);
        Ok(())
    }

    /// Tells the server to exit.
    pub fn stop(&mut self) -> Result<(), Error> {
        self.send(STOP, &[]).map(drop)
    }
}

/// The server's side, made before the client starts: node, service, port.
pub struct Server {
    port: IoxServer<Svc, [u8], u64, [u8], u64>,
    _service: Factory,
    _node: Node<Svc>,
    size: usize,
}

impl Server {
    /// Creates the service `name` for calls of `size` bytes and its server
    /// port.
    pub fn new(name: &str, size: usize) -> Result<Server, Error> {
        let node = node()?;
        let service = service(&node, name)?;
        let port = service
            .server_builder()
            .initial_max_slice_len(size.max(1))
            .create()
            .map_err(|e| err("server port", e))?;
        Ok(Server {
            port,
            _service: service,
            _node: node,
            size,
        })
    }

    /// Answers every request with its payload (copied out into private
    /// memory, then into the response) until `STOP`.
    ///
    /// # Errors
    /// iceoryx2 failing, a request out of order or of the wrong size.
    pub fn serve(self) -> Result<(), Error> {
        let mut buf = vec![0u8; self.size];
        let mut expect = 1u64;
        loop {
            let Some(req) = self.port.receive().map_err(|e| err("receive", e))? else {
                std::hint::spin_loop();
                continue;
            };
            let seq = *req.user_header();
            if seq == STOP {
                return Ok(());
            }
            // A client that resent its first request (see `Client::call`)
            // may leave a stale copy of an earlier number behind.
            if seq < expect {
                continue;
            }
            if seq != expect || req.payload().len() != self.size {
                return Err(Error(format!(
                    "iceoryx2: call {seq} of {} bytes, expected {expect} of {}",
                    req.payload().len(),
                    self.size
                )));
            }
            buf.copy_from_slice(req.payload());
            let mut resp = req
                .loan_slice_uninit(self.size)
                .map_err(|e| err("loan response", e))?;
            *resp.user_header_mut() = seq;
            resp.write_from_slice(&buf)
                .send()
                .map_err(|e| err("send response", e))?;
            expect += 1;
        }
    }
}

/// A service name no other run uses: this process, a counter, the size.
pub fn service_name(size: usize) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "ferry-bench/urpc/{}/{}/{size}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_response_echoes_every_size() {
        for size in [0, 32, 40_000] {
            let name = service_name(size);
            // iceoryx2's ipc ports stay on the thread that made them.
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let server_name = name.clone();
            let t = std::thread::spawn(move || {
                let server = Server::new(&server_name, size)?;
                ready_tx.send(()).unwrap();
                server.serve()
            });
            ready.recv().unwrap();
            let mut client = Client::new(&name, size).unwrap();
            let mut result = vec![0u8; size];
            for i in 0..20u8 {
                let args = vec![i; size];
                client.call(&args, &mut result).unwrap();
                assert_eq!(result, args);
            }
            client.stop().unwrap();
            t.join().unwrap().unwrap();
        }
    }
}
