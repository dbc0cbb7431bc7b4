//! Streamed response bodies: a blocking job writes the body (e.g. JSON rows read one at a
//! time from the store) into a writer whose 64 KiB chunks go to the client as they are made,
//! with back-pressure (the job waits while 4 chunks are queued). Memory stays bounded
//! whatever the body's size. A job that fails midway ends the body early (the client sees
//! a truncated document; the error is logged).

use actix_web::{web, HttpResponse, HttpResponseBuilder};
use std::io::Write;

/// Bytes per chunk sent to the client.
pub(crate) const CHUNK: usize = 64 * 1024;
/// Chunks queued before the writing job waits for the client.
const QUEUE: usize = 4;

/// A writer sending [`CHUNK`]-sized pieces down a channel.
pub(crate) struct ChanWriter {
    tx: tokio::sync::mpsc::Sender<web::Bytes>,
    buf: Vec<u8>,
}

impl ChanWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let b = web::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(b)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"))
    }
}

impl Write for ChanWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// Answer with `builder` and a body written by `job` on a blocking thread.
pub(crate) fn streamed<F>(
    mut builder: HttpResponseBuilder,
    what: &'static str,
    job: F,
) -> HttpResponse
where
    F: FnOnce(&mut ChanWriter) -> Result<(), String> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<web::Bytes>(QUEUE);
    crate::engine::task::spawn_blocking(move || {
        let mut w = ChanWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        };
        let r = job(&mut w).and_then(|()| w.flush().map_err(|e| e.to_string()));
        if let Err(e) = r {
            tracing::warn!("{what}: the streamed answer ended early: {e}");
        }
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(rx);
    builder.streaming(futures_util::StreamExt::map(
        body,
        Ok::<_, actix_web::Error>,
    ))
}
