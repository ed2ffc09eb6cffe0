//! Stop every debug container of the cluster that has been running for more than an hour
//! (or `--older-than SECONDS`); `--dry-run` only lists them.
//!
//! ```sh
//! cargo run -p poddebug-client --example stop_older_than_an_hour -- --dry-run
//! ```

use std::time::Duration;

use poddebug_client::{ConnectOptions, DebugContainers, DebugPhase, ListParams};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let older_than = args
        .iter()
        .position(|a| a == "--older-than")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse::<u64>())
        .transpose()?
        .unwrap_or(3600);

    let (client, _) = poddebug_client::connect(&ConnectOptions::default()).await?;
    let list = DebugContainers::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let now = jiff::Timestamp::now();
    for o in list.items {
        let Some(status) = &o.status else { continue };
        if status.phase != DebugPhase::Running {
            continue;
        }
        let started = status
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .map(|t| t.0);
        let Some(started) = started else { continue };
        if !status.stoppable {
            // Its own PID 1: only its own exit ends it (the server would answer 409).
            eprintln!(
                "skipping {}: {}",
                o.metadata.name.as_deref().unwrap_or_default(),
                status
                    .stoppable_message
                    .as_deref()
                    .unwrap_or("DELETE cannot stop it")
            );
            continue;
        }
        let age = now.duration_since(started).as_secs();
        if age < i64::try_from(older_than)? {
            continue;
        }
        let ns = o.metadata.namespace.clone().unwrap_or_default();
        let pod = status.pod_name.clone();
        // poddebugcontainers names objects POD.NAME.
        let full = o.metadata.name.clone().unwrap_or_default();
        let name = full
            .strip_prefix(&format!("{pod}."))
            .unwrap_or(&full)
            .to_owned();
        if dry_run {
            println!("would stop {ns}/{pod} {name} (running for {age}s)");
            continue;
        }
        let debug = DebugContainers::new(client.clone(), &ns);
        match debug.stop(&pod, &name, Some(Duration::from_secs(10))).await {
            Ok(_) => println!("stopped {ns}/{pod} {name} (running for {age}s)"),
            Err(e) => eprintln!("{ns}/{pod} {name}: {e}"),
        }
    }
    Ok(())
}
