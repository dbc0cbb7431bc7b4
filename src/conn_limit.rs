//! Counts of open connections per client address, taken when a listener accepts a TCP
//! connection (before any TLS or HTTP work) and given back when it ends: the web UI's
//! listeners (`web::limits`) and the peer agent's (`peer::agent`) close a connection at once
//! when its address already holds its cap, so one address with hundreds of silent
//! connections cannot take every slot. Not for: rate limits over time (`model::secrets`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Counts {
    total: usize,
    per: HashMap<IpAddr, usize>,
}

/// A cap on things held at once (connections, streams): at most `max_total` in all and
/// `max_per_address` per client address (IPv4-mapped IPv6 counted as IPv4).
pub(crate) struct ConnLimit {
    max_total: usize,
    max_per_address: usize,
    counts: Mutex<Counts>,
}

/// Why [`ConnLimit::take`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The address already holds its `max_per_address`.
    PerAddress,
    /// `max_total` are held in all.
    Total,
}

/// One thing counted for its address until dropped.
pub(crate) struct Slot {
    limit: Arc<ConnLimit>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.limit.lock();
        if let Some(n) = c.per.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per.remove(&self.ip);
            }
            c.total = c.total.saturating_sub(1);
        }
    }
}

impl ConnLimit {
    /// A cap of `max_total` in all (`usize::MAX`: none) and `max_per_address` per address.
    pub(crate) fn new(max_total: usize, max_per_address: usize) -> Arc<ConnLimit> {
        Arc::new(ConnLimit {
            max_total,
            max_per_address,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count one more for `ip`, or say which cap it is over (the per-address one first).
    pub(crate) fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refused> {
        let ip = ip.to_canonical();
        let mut c = self.lock();
        let n = c.per.get(&ip).copied().unwrap_or(0);
        if n >= self.max_per_address {
            return Err(Refused::PerAddress);
        }
        if c.total >= self.max_total {
            return Err(Refused::Total);
        }
        c.per.insert(ip, n + 1);
        c.total += 1;
        Ok(Slot {
            limit: self.clone(),
            ip,
        })
    }

    /// How many `ip` holds now.
    #[cfg(test)]
    pub(crate) fn held(&self, ip: IpAddr) -> usize {
        self.lock()
            .per
            .get(&ip.to_canonical())
            .copied()
            .unwrap_or(0)
    }
}

/// A connection's stream with what it holds for its life (`S`: its [`Slot`], or a listener's
/// own slot type with what it knows of the connection): reads and writes go to `io`; what it
/// holds is dropped (the slot given back) when the connection is dropped.
pub(crate) struct Counted<T, S = Slot> {
    io: T,
    held: S,
}

impl<T, S> Counted<T, S> {
    /// `io` holding `held` for its life.
    pub(crate) fn new(io: T, held: S) -> Counted<T, S> {
        Counted { io, held }
    }

    /// What the connection holds.
    pub(crate) fn held(&self) -> &S {
        &self.held
    }
}

impl<T: tokio::io::AsyncRead + Unpin, S: Unpin> tokio::io::AsyncRead for Counted<T, S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin, S: Unpin> tokio::io::AsyncWrite for Counted<T, S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_per_address_and_in_all_and_given_back() {
        let l = ConnLimit::new(4, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        let s1 = l.take(a).unwrap();
        let _s2 = l.take(mapped).unwrap();
        assert_eq!(l.take(a).err(), Some(Refused::PerAddress));
        assert_eq!(l.held(a), 2);
        let _b = l.take("192.0.2.2".parse().unwrap()).unwrap();
        let _c = l.take("192.0.2.3".parse().unwrap()).unwrap();
        assert_eq!(
            l.take("192.0.2.4".parse().unwrap()).err(),
            Some(Refused::Total)
        );
        drop(s1);
        assert_eq!(l.held(a), 1);
        assert!(l.take("192.0.2.4".parse().unwrap()).is_ok());
    }
}
