//! The gRPC service and the serving loop.

use std::{future::Future, path::Path, sync::Arc, time::Duration};

use cuzk_service::Service;
use tokio::sync::Notify;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Identity, Server, ServerTlsConfig},
    Request, Response, Status,
};

use crate::{
    auth::RequireToken,
    config::{Access, DaemonConfig, Listen},
    convert,
    wire::{self as pb, proving_engine_server::ProvingEngineServer},
};

/// `cuzk.v1.ProvingEngine` over a [`Service`].
#[derive(Clone)]
pub struct Api {
    service: Service,
    plan: Option<crate::config::StartupPlan>,
}

impl Api {
    pub fn new(service: Service) -> Self {
        Self {
            service,
            plan: None,
        }
    }

    /// The same API reporting `plan` in `GetStatus`.
    pub fn with_plan(mut self, plan: Option<crate::config::StartupPlan>) -> Self {
        self.plan = plan;
        self
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(Service) -> T + Send + 'static,
    ) -> Result<T, Status> {
        let svc = self.service.clone();
        tokio::task::spawn_blocking(move || f(svc))
            .await
            .map_err(|e| Status::internal(format!("the handler failed: {e}")))
    }

    async fn submit(&self, r: pb::SubmitProofRequest) -> Result<cuzk_service::Submitted, Status> {
        let (kind, request) = convert::request(r)?;
        self.blocking(move |svc| svc.submit(kind, request))
            .await?
            .map_err(convert::request_error)
    }
}

/// Cancels and forgets a job whose `Prove` caller went away (the call's future
/// was dropped before the result was handed over), so its memory is freed and
/// no result waits for nobody.
struct AbandonOnDrop {
    service: Service,
    job_id: String,
    armed: bool,
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(
                job_id = self.job_id,
                "Prove caller went away: job abandoned"
            );
            self.service.abandon(&self.job_id);
        }
    }
}

#[tonic::async_trait]
impl pb::proving_engine_server::ProvingEngine for Api {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        let s = self.submit(request.into_inner()).await?;
        Ok(Response::new(pb::SubmitProofResponse {
            job_id: s.job_id,
            queue_position: s.queue_position,
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        request: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = request.into_inner();
        let fut = self.service.result(&r.job_id);
        let out = if r.timeout_ms == 0 {
            fut.await
        } else {
            match tokio::time::timeout(Duration::from_millis(r.timeout_ms), fut).await {
                Ok(x) => x,
                Err(_) => return Ok(Response::new(convert::timed_out(r.job_id))),
            }
        };
        let result = out.map_err(convert::lookup_error)?;
        Ok(Response::new(convert::result(result)))
    }

    async fn prove(
        &self,
        request: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest.submit is missing"))?;
        let s = self.submit(submit).await?;
        let mut guard = AbandonOnDrop {
            service: self.service.clone(),
            job_id: s.job_id.clone(),
            armed: true,
        };
        let out = self.service.result(&s.job_id).await;
        guard.armed = false;
        let result = out.map_err(convert::lookup_error)?;
        Ok(Response::new(pb::ProveResponse {
            result: Some(convert::result(result)),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let id = request.into_inner().job_id;
        let was_running = self
            .blocking(move |svc| svc.cancel(&id))
            .await?
            .map_err(convert::lookup_error)?;
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let s = self.blocking(|svc| svc.status()).await?;
        let mut status = convert::status(s);
        if let Some(p) = &self.plan {
            status.plan = p.text.clone();
            status.plan_json = p.json.clone();
        }
        Ok(Response::new(status))
    }

    async fn get_metrics(
        &self,
        _request: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        Ok(Response::new(pb::GetMetricsResponse {
            prometheus_text: self.service.metrics_text(),
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let (already_loaded, took) = self
            .blocking(move |svc| svc.preload(&id))
            .await?
            .map_err(convert::params_error)?;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded,
            load_time_ms: took.as_millis() as u64,
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let freed = self
            .blocking(move |svc| svc.evict(&id))
            .await?
            .map_err(convert::params_error)?;
        Ok(Response::new(pb::EvictSrsResponse {
            was_loaded: freed.is_some(),
            freed_bytes: freed.unwrap_or(0),
        }))
    }
}

/// Serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("{0}")]
    Access(String),
}

/// A running daemon's shutdown trigger (what SIGTERM pulls).
#[derive(Clone, Default)]
pub struct Shutdown {
    notify: Arc<Notify>,
}

impl Shutdown {
    pub fn trigger(&self) {
        self.notify.notify_one();
    }

    fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let n = self.notify.clone();
        async move { n.notified().await }
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn termination_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
        }
        _ => {
            tracing::error!("could not install signal handlers; only the trigger stops the daemon");
            std::future::pending::<()>().await
        }
    }
}

/// A bound listener, so callers (tests) can learn the port before serving.
pub enum Bound {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, std::path::PathBuf),
}

impl Bound {
    /// Binds `listen` with the default access (a Unix socket 0660).
    pub async fn bind(listen: &Listen) -> Result<Self, ServeError> {
        Self::bind_with(listen, &Access::default()).await
    }

    /// Binds `listen`. A Unix socket's path is taken over only from a stale
    /// socket (a socket file nobody accepts on, left by a daemon that died):
    /// anything else there (a file, a directory, a live daemon's socket) is an
    /// error and is left alone. The new socket gets `access`'s mode and group.
    pub async fn bind_with(listen: &Listen, access: &Access) -> Result<Self, ServeError> {
        let err = |source| ServeError::Bind {
            addr: listen.to_string(),
            source,
        };
        match listen {
            Listen::Tcp(addr) => Ok(Bound::Tcp(
                tokio::net::TcpListener::bind(addr).await.map_err(err)?,
            )),
            Listen::Unix(path) => {
                take_over_stale_socket(path)?;
                let l = tokio::net::UnixListener::bind(path).map_err(err)?;
                if let Err(e) = restrict_socket(path, access) {
                    let _ = std::fs::remove_file(path);
                    return Err(e);
                }
                Ok(Bound::Unix(l, path.clone()))
            }
        }
    }

    /// The address as clients name it (`host:port` with the real port, or
    /// `unix:///path`).
    pub fn address(&self) -> String {
        match self {
            Bound::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|e| format!("unknown ({e})")),
            Bound::Unix(_, p) => format!("unix://{}", p.display()),
        }
    }
}

/// Removes `path` if it is a stale Unix socket; refuses anything else there.
fn take_over_stale_socket(path: &Path) -> Result<(), ServeError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ServeError::Access(format!(
                "{}: cannot inspect it: {e}",
                path.display()
            )))
        }
    };
    if !meta.file_type().is_socket() {
        return Err(ServeError::Access(format!(
            "{} exists and is not a socket: not removed; remove it or listen elsewhere",
            path.display()
        )));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(ServeError::Access(format!(
            "{}: another process is accepting connections on it (a daemon already running?)",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing a stale socket");
            std::fs::remove_file(path).map_err(|e| {
                ServeError::Access(format!(
                    "{}: stale socket not removable: {e}",
                    path.display()
                ))
            })
        }
        Err(e) => Err(ServeError::Access(format!(
            "{}: a socket that cannot be probed ({e}): not removed",
            path.display()
        ))),
    }
}

/// Gives a bound socket `access`'s mode and group.
fn restrict_socket(path: &Path, access: &Access) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(group) = &access.socket_group {
        let gid = crate::auth::group_id(group).map_err(ServeError::Access)?;
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(|e| {
            ServeError::Access(format!(
                "{}: could not give it group {group}: {e}",
                path.display()
            ))
        })?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(access.socket_mode)).map_err(
        |e| {
            ServeError::Access(format!(
                "{}: could not set mode {:o}: {e}",
                path.display(),
                access.socket_mode
            ))
        },
    )
}

/// `served`, or `Ok` once `limit` passes (the calls still in flight are dropped).
async fn within<E>(
    served: impl Future<Output = Result<(), E>>,
    limit: impl Future<Output = ()>,
    timeout: std::time::Duration,
) -> Result<(), E> {
    tokio::select! {
        r = served => r,
        () = limit => {
            tracing::warn!(
                "calls still in flight {} s after the shutdown signal (shutdown_timeout_s): stopping without them",
                timeout.as_secs()
            );
            Ok(())
        }
    }
}

/// Serves `service` on `bound` (and `/metrics` if configured) until `shutdown`
/// fires; then stops accepting, finishes or cancels the jobs accepted (as
/// `cfg.shutdown` says), waits for the calls in flight, and stops the engine.
pub async fn serve(
    cfg: &DaemonConfig,
    service: Service,
    bound: Bound,
    shutdown: Shutdown,
) -> Result<(), ServeError> {
    let metrics_task = match &cfg.metrics_listen {
        Some(addr) => Some(crate::metrics_http::spawn(addr, service.clone()).await?),
        None => None,
    };
    let token = RequireToken::from_access(&cfg.access).map_err(ServeError::Access)?;
    // The token is checked on the call's headers, before its message is read.
    let api = InterceptedService::new(
        ProvingEngineServer::new(Api::new(service.clone()).with_plan(cfg.plan.clone()))
            .max_decoding_message_size(cfg.max_message_bytes)
            .max_encoding_message_size(cfg.max_message_bytes),
        token,
    );
    let mut builder = Server::builder()
        .max_concurrent_streams(Some(cfg.max_streams_per_connection))
        .concurrency_limit_per_connection(cfg.max_streams_per_connection as usize)
        // A client that vanished (its host died) is noticed, so its `Prove`
        // jobs are abandoned rather than proved for nobody.
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)));
    if let Some((cert, key)) = &cfg.access.tls {
        let read = |p: &std::path::PathBuf| {
            std::fs::read(p).map_err(|e| ServeError::Access(format!("{}: {e}", p.display())))
        };
        let identity = Identity::from_pem(read(cert)?, read(key)?);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let mode = cfg.shutdown;
    let svc = service.clone();
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let stop = async move {
        shutdown.wait().await;
        // New jobs are refused from here; in cancel mode the accepted ones end now,
        // so the calls waiting for them return and the server can drain.
        svc.begin_shutdown(mode);
        let _ = stopping.send(());
    };
    let timeout = cfg.shutdown_timeout;
    // The server drains the calls in flight, but a call that is not a job (a
    // PreloadSRS compiling a 32 GiB circuit for minutes) ends only when its work
    // does: `shutdown_timeout` after the signal, the daemon stops without it.
    let drain_limit = async move {
        match stopped.await {
            Ok(()) => tokio::time::sleep(timeout).await,
            Err(_) => std::future::pending::<()>().await,
        }
    };
    let router = builder.add_service(api);
    let served = match bound {
        Bound::Tcp(l) => {
            tracing::info!(addr = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving gRPC");
            let served = router.serve_with_incoming_shutdown(TcpListenerStream::new(l), stop);
            within(served, drain_limit, timeout).await
        }
        Bound::Unix(l, path) => {
            tracing::info!(path = %path.display(), "serving gRPC on a Unix socket");
            let served = router.serve_with_incoming_shutdown(UnixListenerStream::new(l), stop);
            let r = within(served, drain_limit, timeout).await;
            let _ = std::fs::remove_file(&path);
            r
        }
    };
    let _ = tokio::task::spawn_blocking(move || service.shutdown(mode, timeout)).await;
    if let Some(t) = metrics_task {
        t.abort();
    }
    served?;
    tracing::info!("daemon stopped");
    Ok(())
}
