//! `PageServer`: one HTML page served over plain HTTP on 127.0.0.1, on a port of its own: the
//! "page on another origin" of the cross-site tests, which a browser opens while the user's
//! `kubectl proxy` runs. Every path answers the same page; the server stops when dropped.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// A running page server.
#[derive(Debug)]
pub struct PageServer {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl PageServer {
    /// Serve `html` at every path of `http://127.0.0.1:PORT/`.
    pub async fn start(html: String) -> PageServer {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the page server");
        let port = listener.local_addr().expect("its address").port();
        let page = Bytes::from(html);
        let task = tokio::spawn(async move {
            // Connections belong to this task: aborting it (on drop) ends them too.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                let page = page.clone();
                connections.spawn(async move {
                    let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                        let page = page.clone();
                        async move {
                            let mut resp = Response::new(Full::new(page));
                            resp.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static("text/html; charset=utf-8"),
                            );
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        PageServer { port, task }
    }

    /// The page's origin, `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
