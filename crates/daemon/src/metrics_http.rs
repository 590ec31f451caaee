//! The Prometheus endpoint: `GET /metrics` over plain HTTP/1.1, one response per
//! connection. The text is the same as `GetMetrics` returns.

use cuzk_service::Service;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use crate::server::ServeError;

/// Largest request head read (a scraper's GET is a few hundred bytes).
const MAX_HEAD: usize = 8 << 10;

/// Binds `addr` and serves `/metrics` on a task until it is aborted.
pub async fn spawn(addr: &str, service: Service) -> Result<JoinHandle<()>, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.to_owned(),
            source,
        })?;
    tracing::info!(addr, "serving /metrics");
    Ok(tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                continue;
            };
            let svc = service.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(conn, &svc).await {
                    tracing::debug!(%e, "metrics connection failed");
                }
            });
        }
    }))
}

async fn answer(mut conn: TcpStream, service: &Service) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut buf))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "slow client"))??;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) =
        if method == "GET" && (path == "/metrics" || path.starts_with("/metrics?")) {
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                service.metrics_text(),
            )
        } else {
            (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "cuzk serves GET /metrics only\n".to_owned(),
            )
        };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body.as_bytes()).await?;
    conn.shutdown().await
}
