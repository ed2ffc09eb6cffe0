//! Watch every debug container of the cluster: list them, then follow the changes, resuming
//! from the last resourceVersion when a watch ends and listing again when it is too old.
//!
//! ```sh
//! cargo run -p poddebug-client --example watch_all
//! ```

use futures::StreamExt;
use poddebug_client::{
    ConnectOptions, DebugContainers, ListParams, PodDebugContainer, WatchEvent, WatchParams,
};

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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (client, _) = poddebug_client::connect(&ConnectOptions::default()).await?;
    let all = DebugContainers::all(client);
    let mut rv = String::new();
    loop {
        if rv.is_empty() {
            let list = all.list(&ListParams::default()).await?;
            for o in &list.items {
                println!("{}", line("EXISTING", o));
            }
            rv = list.metadata.resource_version.unwrap_or_default();
        }
        let events = all.watch(&WatchParams::default().timeout(290), &rv).await?;
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let (kind, o) = match event? {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                WatchEvent::Bookmark(b) => {
                    rv = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(s) if s.code == 410 => {
                    // Too old: start over from a fresh list.
                    rv.clear();
                    break;
                }
                WatchEvent::Error(s) => return Err(s.message.into()),
            };
            println!("{}", line(kind, &o));
            if let Some(v) = o.metadata.resource_version {
                rv = v;
            }
        }
    }
}
