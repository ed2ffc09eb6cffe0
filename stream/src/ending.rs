//! Ending a relayed stream from the server's side, with a word to the client: why the server
//! ends a session and what the client is told. The relay ends the stream at the next frame
//! boundary with the [`Ending`]'s error on the error channel (a `Status` on v4/v5, its message as
//! text before) and a close (WebSocket close frame, SPDY GOAWAY).
//!
//! Each stream has one [`EndSignal`]: whoever may end it (the recording, a termination, the
//! relay itself when the client breaks the protocol) holds a clone and calls
//! [`EndSignal::end`]; the relay waits on [`ended`]. The first ending wins.

use std::time::Duration;

use poddebug_types::ApiError;
use tokio::sync::watch;

use crate::websocket::frame::{CLOSE_GOING_AWAY, CLOSE_POLICY_VIOLATION, CLOSE_PROTOCOL_ERROR};

/// The message streams end with at shutdown.
pub const SHUTDOWN_MESSAGE: &str = "the poddebug API server is shutting down";

/// Why the server ends a stream, and what the client is told.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    /// The error the client gets on the error channel.
    pub error: ApiError,
    /// The WebSocket close code.
    pub close_code: u16,
    /// Why, as the stream's log line and audit record say it.
    pub label: &'static str,
}

impl Ending {
    /// The ending of every stream when the server shuts down.
    pub fn shutdown() -> Ending {
        Ending {
            error: ApiError::ServiceUnavailable(SHUTDOWN_MESSAGE.to_owned()),
            close_code: CLOSE_GOING_AWAY,
            label: "server shutting down",
        }
    }

    /// The ending of a session whose client sent something poddebug does not forward: bytes
    /// that are not the protocol, or a message it cannot classify the way the kubelet would.
    pub fn refused(why: &str) -> Ending {
        Ending {
            error: ApiError::BadRequest(format!(
                "the attach stream was ended: the client sent what poddebug does not forward \
                 ({why})"
            )),
            close_code: CLOSE_PROTOCOL_ERROR,
            label: "client protocol violation",
        }
    }

    /// The ending of a session whose client opened a stream, or sent a message, that its
    /// request and session mode do not grant ([`crate::Grants`]): a `403 Forbidden`.
    pub fn ungranted(why: &str) -> Ending {
        Ending {
            error: ApiError::ForbiddenMessage(format!(
                "the attach stream was ended: the client sent what this session does not grant \
                 ({why})"
            )),
            close_code: CLOSE_POLICY_VIOLATION,
            label: "client stream not granted",
        }
    }

    /// The ending of a session whose upstream (kube-apiserver) sent bytes that are not the
    /// protocol it negotiated.
    pub fn upstream_broken(why: &str) -> Ending {
        Ending {
            error: ApiError::ServiceUnavailable(format!(
                "the attach stream was ended: the Kubernetes API sent what poddebug cannot read \
                 ({why})"
            )),
            close_code: CLOSE_PROTOCOL_ERROR,
            label: "upstream protocol violation",
        }
    }

    /// The ending of a session nothing was sent on, either way, for `timeout`.
    pub fn idle(timeout: Duration) -> Ending {
        Ending {
            error: ApiError::Timeout(format!(
                "the attach stream was idle for {}s and was ended (--stream-idle-timeout)",
                timeout.as_secs()
            )),
            close_code: CLOSE_POLICY_VIOLATION,
            label: "idle timeout",
        }
    }

    /// What the error channel carries: the Status (v4/v5) or its message (older protocols).
    pub fn payload(&self, status_errors: bool) -> Vec<u8> {
        if status_errors {
            self.error.to_json()
        } else {
            self.error.message().as_bytes().to_vec()
        }
    }
}

/// The way to end one stream; cheap to clone.
#[derive(Clone, Debug)]
pub struct EndSignal {
    tx: watch::Sender<Option<Ending>>,
}

impl Default for EndSignal {
    fn default() -> Self {
        EndSignal {
            tx: watch::channel(None).0,
        }
    }
}

impl EndSignal {
    /// End the stream with `ending`, unless it is already being ended.
    pub fn end(&self, ending: Ending) {
        self.tx.send_if_modified(|e| {
            if e.is_some() {
                return false;
            }
            *e = Some(ending);
            true
        });
    }

    /// The ending, once there is one.
    pub fn current(&self) -> Option<Ending> {
        self.tx.borrow().clone()
    }

    /// What the relay waits on.
    pub fn subscribe(&self) -> watch::Receiver<Option<Ending>> {
        self.tx.subscribe()
    }
}

/// Resolves with the ending once there is one; never if every signal is gone.
pub async fn ended(rx: &mut watch::Receiver<Option<Ending>>) -> Ending {
    let ending = rx
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|e| e.clone());
    match ending {
        Some(e) => e,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_ending_wins() {
        let s = EndSignal::default();
        let mut rx = s.subscribe();
        s.end(Ending::refused("a stream of type \"stdinx\""));
        s.end(Ending::shutdown());
        let e = ended(&mut rx).await;
        assert_eq!(e.label, "client protocol violation");
        assert_eq!(e.close_code, CLOSE_PROTOCOL_ERROR);
        let status: serde_json::Value = serde_json::from_slice(&e.payload(true)).expect("a Status");
        assert_eq!(status["code"], 400);
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains("\"stdinx\"")),
            "{status}"
        );
        assert_eq!(e.payload(false), e.error.message().as_bytes());
    }
}
