//! Spawning tasks through one copy of tokio's task machinery per output type.
//!
//! `tokio::spawn(f)` compiles tokio's task harness (poll, shutdown, join-handle and abort
//! paths, about 500 bytes of code) again for every future type `F`, and netperfd spawns about
//! 75 kinds of task. [`spawn`] boxes the future first, so the harness exists once per output
//! type `T`; the future's own code is the same either way. The box is one allocation per
//! task, and netperfd spawns per test, connection or run, never per packet. Same for
//! [`spawn_blocking`] and its closures, and [`spawn_on`] for a runtime's `Handle`. Measured in
//! docs/build-settings.md; clippy.toml's `disallowed-methods` keeps tokio's own spawns out of
//! the rest of the code.

use std::future::Future;
use std::pin::Pin;
use tokio::task::JoinHandle;

/// `tokio::spawn`, with the future boxed: runs `f` on the current runtime. Panics, as
/// `tokio::spawn`, outside a runtime.
pub(crate) fn spawn<T: Send + 'static>(
    f: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<T> {
    let f: Pin<Box<dyn Future<Output = T> + Send>> = Box::pin(f);
    #[allow(clippy::disallowed_methods)] // the boxed-spawn helper itself
    tokio::spawn(f)
}

/// `Handle::spawn`, with the future boxed: runs `f` on the runtime of `rt`, from any thread
/// (inside that runtime or not).
pub(crate) fn spawn_on<T: Send + 'static>(
    rt: &tokio::runtime::Handle,
    f: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<T> {
    let f: Pin<Box<dyn Future<Output = T> + Send>> = Box::pin(f);
    #[allow(clippy::disallowed_methods)] // the boxed-spawn helper itself
    rt.spawn(f)
}

/// `tokio::task::spawn_blocking`, with the closure boxed: runs `f` on the runtime's blocking
/// thread pool.
pub(crate) fn spawn_blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let f: Box<dyn FnOnce() -> T + Send> = Box::new(f);
    #[allow(clippy::disallowed_methods)] // the boxed-spawn helper itself
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
        // From a thread outside the runtime, through its handle.
        let rt = tokio::runtime::Handle::current();
        let d = std::thread::spawn(move || super::spawn_on(&rt, async { "on the handle" }))
            .join()
            .expect("thread");
        assert_eq!(d.await.ok(), Some("on the handle"));
    }
}
