//! Watch every debug container of the cluster with kube-runtime's `watcher`, keeping a
//! `reflector` store of them: the existing ones first, then every change. The watcher resumes
//! when a watch ends and lists again when its version is too old; nothing here does.
//!
//! ```sh
//! cargo run -p poddebug-client --example watch_all
//! ```

use std::collections::HashSet;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use poddebug_client::{ConnectOptions, DebugContainers, PodDebugContainer};

fn line(event: &str, o: &PodDebugContainer) -> String {
    let phase = o
        .status
        .as_ref()
        .map(|s| s.phase.as_str())
        .unwrap_or("Waiting");
    format!(
        "{event:<9} {}/{} {phase}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

fn key(o: &PodDebugContainer) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (client, _) = poddebug_client::connect(&ConnectOptions::default()).await?;
    // `Api<PodDebugContainer>` over `poddebugcontainers` in every namespace (names POD.NAME).
    let api = DebugContainers::all(client).api();
    let (store, writer) = reflector::store::<PodDebugContainer>();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    futures::pin_mut!(events);
    // What the stream has shown so far, to tell a new object from a change.
    let mut known = HashSet::new();
    let mut listing = HashSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                println!("{}", line("EXISTING", &o));
                listing.insert(key(&o));
            }
            Ok(watcher::Event::InitDone) => {
                known = std::mem::take(&mut listing);
                eprintln!("{} debug containers in the store", store.state().len());
            }
            Ok(watcher::Event::Apply(o)) => {
                let kind = if known.insert(key(&o)) {
                    "ADDED"
                } else {
                    "MODIFIED"
                };
                println!("{}", line(kind, &o));
            }
            Ok(watcher::Event::Delete(o)) => {
                known.remove(&key(&o));
                println!("{}", line("DELETED", &o));
            }
            // The watcher retries with backoff; say why it had to.
            Err(e) => eprintln!("watch: {e}"),
        }
    }
    Ok(())
}
