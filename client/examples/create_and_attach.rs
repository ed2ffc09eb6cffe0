//! Add a debug container running `sh` to a pod, attach to it, relay this program's stdin and
//! output, and exit with the container's exit code.
//!
//! ```sh
//! echo 'ps; exit 7' | cargo run -p poddebug-client --example create_and_attach -- default web [IMAGE] [TARGET]
//! echo $?   # 7
//! ```
//!
//! What the shell prints just before `exit` can be missing from the stream (the runtime's
//! attach does not always carry a last write before the exit); the container's log has it.

use std::time::Duration;

use poddebug_client::{
    AttachOutcome, AttachParams, ConnectOptions, CreateParams, DebugContainers, PodDebugContainer,
};
use tokio::io::{AsyncWriteExt, copy};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(ns), Some(pod)) = (args.next(), args.next()) else {
        eprintln!("usage: create_and_attach NAMESPACE POD [IMAGE] [TARGET]");
        std::process::exit(2);
    };
    let image = args.next().unwrap_or_else(|| "busybox:1.36".into());
    let target = args.next();

    let (client, _) = poddebug_client::connect(&ConnectOptions::default()).await?;
    let debug = DebugContainers::new(client, &ns);

    let mut spec = PodDebugContainer::default();
    spec.container.image = Some(image);
    spec.container.command = Some(vec!["sh".into()]);
    spec.container.stdin = Some(true);
    spec.target_container_name = target;
    let created = debug.create(&pod, &spec, &CreateParams::default()).await?;
    let name = created.metadata.name.unwrap_or_default();
    eprintln!("created debug container {name}");
    debug
        .wait_started(&pod, &name, Duration::from_secs(120), |o| {
            if let Some(w) = poddebug_client::waiting_reason(o) {
                eprintln!("waiting: {w}");
            }
        })
        .await?;

    let params = AttachParams {
        stdin: true,
        ..Default::default()
    };
    let mut session = debug.attach(&pod, &name, &params).await?;
    let mut stdin = session.stdin().ok_or("no stdin")?;
    let mut stdout = session.stdout().ok_or("no stdout")?;
    let mut stderr = session.stderr().ok_or("no stderr")?;
    let out = tokio::spawn(async move { copy(&mut stdout, &mut tokio::io::stdout()).await });
    let err = tokio::spawn(async move { copy(&mut stderr, &mut tokio::io::stderr()).await });
    // Our input goes to the shell. Its end does not close the shell's stdin: the shell's own
    // `exit` ends the session, so its output is not cut short.
    let input = tokio::spawn(async move {
        let _ = copy(&mut tokio::io::stdin(), &mut stdin).await;
        let _ = stdin.flush().await;
        std::future::pending::<()>().await;
        drop(stdin);
    });
    let outcome = session.join().await?;
    input.abort();
    let _ = out.await;
    let _ = err.await;
    match outcome {
        AttachOutcome::Exited { exit_code, reason } => {
            eprintln!("debug container {name} exited with {exit_code} ({reason:?})");
            std::process::exit(exit_code);
        }
        AttachOutcome::Detached => {
            eprintln!("debug container {name} is still running");
            Ok(())
        }
    }
}
