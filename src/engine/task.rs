//! Spawning tasks through one copy of tokio's task machinery per output type.
//!
//! `tokio::spawn(f)` compiles tokio's task harness (poll, shutdown, join-handle and abort
//! paths, about 500 bytes of code) again for every future type `F`, and netperfd spawns about
//! 75 kinds of task. [`spawn`] boxes the future first, so the harness exists once per output
//! type `T`; the future's own code is the same either way. The box is one allocation per
//! task, and netperfd spawns per test, connection or run, never per packet. Same for
//! [`spawn_blocking`] and its closures. Measured in docs/build-settings.md.

use std::future::Future;
use std::pin::Pin;
use tokio::task::JoinHandle;

/// `tokio::spawn`, with the future boxed: runs `f` on the current runtime. Panics, as
/// `tokio::spawn`, outside a runtime.
pub fn spawn<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    let f: Pin<Box<dyn Future<Output = T> + Send>> = Box::pin(f);
    tokio::spawn(f)
}

/// `tokio::task::spawn_blocking`, with the closure boxed: runs `f` on the runtime's blocking
/// thread pool.
pub fn spawn_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let f: Box<dyn FnOnce() -> T + Send> = Box::new(f);
    tokio::task::spawn_blocking(f)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn tasks_return_their_values() {
        let a = super::spawn(async { 6 * 7 });
        let s = String::from("moved in");
        let b = super::spawn_blocking(move || s.len());
        assert_eq!(a.await.ok(), Some(42));
        assert_eq!(b.await.ok(), Some(8));
        let c = super::spawn(std::future::pending::<()>());
        c.abort();
        assert!(c.await.is_err_and(|e| e.is_cancelled()));
    }
}
