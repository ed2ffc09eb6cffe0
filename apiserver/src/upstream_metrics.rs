//! A tower layer on the kube-rs clients that records the latency and status of every call to
//! kube-apiserver (`poddebug_apiserver_upstream_request_duration_seconds`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// Adds [`UpstreamMetrics`] to a service stack.
#[derive(Clone)]
pub struct UpstreamMetricsLayer(pub Arc<Metrics>);

impl<S> Layer<S> for UpstreamMetricsLayer {
    type Service = UpstreamMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        UpstreamMetrics {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// Observes each call's time to response headers and its status code.
#[derive(Clone)]
pub struct UpstreamMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for UpstreamMetrics<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            metrics.observe_upstream(
                &method,
                res.as_ref().ok().map(|r| r.status().as_u16()),
                start.elapsed(),
            );
            res
        })
    }
}
