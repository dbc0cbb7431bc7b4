//! Caps that keep the web UI reachable for everyone: TCP connections per client address
//! (checked when actix accepts a connection, [`on_connect`]) and live-update (server-sent
//! event) streams in all and per address ([`live_slot`]). One address with 1,100 idle
//! connections, or 2,000 live streams, used to starve every other user.
//! The counting itself is `crate::conn_limit` (shared with the peer agent).
//! Not for: login rate limits (auth) or the test services' own caps (`runs::traffic`).

use crate::conn_limit::{ConnLimit, Refused, Slot};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};

/// Connections one actix worker serves at once (actix's `max_connections`, per worker; the
/// daemon runs 2 workers): more wait in the listen backlog.
pub(crate) const MAX_CONNECTIONS_PER_WORKER: usize = 1024;
/// TCP connections one client address may hold to the web UI; more are closed at once.
pub(crate) const MAX_CONNECTIONS_PER_ADDRESS: usize = 128;
/// Live-update streams (`/api/runs/{id}/events`) open at once, all addresses; more get 503.
pub(crate) const MAX_LIVE_STREAMS: usize = 64;
/// Live-update streams one client address may hold; more get 429.
pub(crate) const MAX_LIVE_PER_ADDRESS: usize = 8;

static CONNECTIONS: LazyLock<Arc<ConnLimit>> =
    LazyLock::new(|| ConnLimit::new(usize::MAX, MAX_CONNECTIONS_PER_ADDRESS));
static LIVE: LazyLock<Arc<ConnLimit>> =
    LazyLock::new(|| ConnLimit::new(MAX_LIVE_STREAMS, MAX_LIVE_PER_ADDRESS));

/// The board's own address of a web connection (its local address, IPv4-mapped IPv6
/// spelled as IPv4): `req.conn_data::<LocalAddr>()` tells which port a request arrives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalAddr(pub IpAddr);

/// A connection counted for its client address until dropped ([`admit`]).
pub(crate) struct Admitted {
    _held: Slot,
}

/// Count a new connection from `ip` (IPv4-mapped spelled as IPv4), or `None` when that
/// address already holds [`MAX_CONNECTIONS_PER_ADDRESS`] (logged at most once a minute): the
/// caller closes it at once. The HTTPS listener calls this for each accepted TCP connection
/// before its TLS handshake (`web::tls`), so that silent connections count too.
pub(crate) fn admit(ip: IpAddr) -> Option<Admitted> {
    let ip = ip.to_canonical();
    match CONNECTIONS.take(ip) {
        Ok(held) => Some(Admitted { _held: held }),
        Err(_) => {
            crate::rate_warn!(
                "web-per-address",
                %ip,
                "web UI: {MAX_CONNECTIONS_PER_ADDRESS} connections from {ip} already; closing the next"
            );
            None
        }
    }
}

/// actix's `on_connect` hook of a plain-HTTP listener (called when the connection is
/// accepted): note the connection's local address ([`LocalAddr`]); count the connection for
/// its client address, or shut it down at once when that address already holds
/// [`MAX_CONNECTIONS_PER_ADDRESS`] ([`admit`]).
pub(crate) fn on_connect(conn: &dyn std::any::Any, ext: &mut actix_web::dev::Extensions) {
    let Some(s) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() else {
        return;
    };
    if let Ok(local) = s.local_addr() {
        ext.insert(LocalAddr(local.ip().to_canonical()));
    }
    let Ok(peer) = s.peer_addr() else {
        return;
    };
    match admit(peer.ip()) {
        Some(a) => {
            ext.insert(a);
        }
        None => {
            let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Both);
        }
    }
}

/// One live-update stream counted for its address; uncounted when dropped (with the
/// response body).
pub(crate) struct LiveSlot {
    _held: Slot,
}

/// Take a live-update stream slot for the client at `peer`, or the answer to give instead:
/// 429 when the address holds [`MAX_LIVE_PER_ADDRESS`], 503 when [`MAX_LIVE_STREAMS`] are
/// open (both with `Retry-After: 5` and a JSON error).
pub(crate) fn live_slot(peer: Option<SocketAddr>) -> Result<LiveSlot, HttpResponse> {
    let ip = peer
        .map(|p| p.ip().to_canonical())
        .unwrap_or(IpAddr::from([0u8, 0, 0, 0]));
    match LIVE.take(ip) {
        Ok(held) => Ok(LiveSlot { _held: held }),
        Err(refused) => {
            let (status, msg) = if refused == Refused::PerAddress {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("too many live-update streams from this address (at most {MAX_LIVE_PER_ADDRESS}); close one and retry"),
                )
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("too many live-update streams open (at most {MAX_LIVE_STREAMS}); retry shortly"),
                )
            };
            Err(HttpResponse::build(status)
                .insert_header(("Retry-After", "5"))
                .json(serde_json::json!({ "error": msg })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_slots_are_capped_per_address_and_in_all() {
        let a: SocketAddr = "192.0.2.50:1000".parse().unwrap();
        let held: Vec<LiveSlot> = (0..MAX_LIVE_PER_ADDRESS)
            .map(|_| live_slot(Some(a)).expect("slot"))
            .collect();
        let r = live_slot(Some(a)).err().expect("refused");
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        drop(held);
        // Freed with the streams.
        assert!(live_slot(Some(a)).is_ok());
        let c = ConnLimit::new(MAX_LIVE_STREAMS, MAX_LIVE_PER_ADDRESS);
        let mut held = Vec::new();
        for i in 0..MAX_LIVE_STREAMS {
            let ip = IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
            held.push(c.take(ip).expect("slot"));
        }
        let new = IpAddr::from([10, 1, 0, 0]);
        assert_eq!(c.take(new).err(), Some(Refused::Total));
    }
}
