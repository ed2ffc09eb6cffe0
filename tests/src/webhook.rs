//! `WebhookReceiver`: an HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it,
//! as a notification webhook (Slack's incoming webhooks, an on-call tool) receives them. It can
//! refuse the first POSTs with 503 to prove retries. Stops when dropped.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

#[derive(Debug, Default)]
struct Inner {
    received: Vec<Value>,
    refuse: usize,
    refused: usize,
}

/// A running receiver.
#[derive(Debug)]
pub struct WebhookReceiver {
    port: u16,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookReceiver {
    /// Receive at `http://127.0.0.1:PORT/hook`; the first `refuse` POSTs get 503.
    pub async fn start(refuse: usize) -> WebhookReceiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the webhook receiver");
        let port = listener.local_addr().expect("its address").port();
        let inner = Arc::new(Mutex::new(Inner {
            refuse,
            ..Inner::default()
        }));
        let shared = inner.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let shared = shared.clone();
                        async move {
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                            let code = if s.refused < s.refuse {
                                s.refused += 1;
                                503
                            } else {
                                let v = serde_json::from_slice(&body).unwrap_or_else(|_| {
                                    Value::String(String::from_utf8_lossy(&body).into_owned())
                                });
                                s.received.push(v);
                                200
                            };
                            let mut resp = Response::new(Full::new(Bytes::from_static(b"ok")));
                            *resp.status_mut() =
                                http::StatusCode::from_u16(code).unwrap_or_default();
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        WebhookReceiver { port, inner, task }
    }

    /// The URL to POST to.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Every body received (not the refused ones), in order.
    pub fn received(&self) -> Vec<Value> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .received
            .clone()
    }

    /// How many POSTs were refused.
    pub fn refused(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).refused
    }

    /// Wait (at most `timeout`) until `ok` holds of what was received; what was received.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        ok: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>, Vec<Value>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let got = self.received();
            if ok(&got) {
                return Ok(got);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(got);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
