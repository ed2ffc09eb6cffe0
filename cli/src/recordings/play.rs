//! `kubectl poddebug recordings play ID [--pod POD] [--speed 4] [--skip-idle 2s] [--start 5m]`:
//! a recording's output written to this terminal at the pace it was recorded, divided by the
//! speed (0.5× to 8×), pauses longer than the idle limit cut to it. With `--start`, only the
//! part of the recording that holds that time is read (the server's time table); what that
//! part recorded before it is drawn at once, so the screen is as it was.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use futures::{AsyncBufRead, AsyncBufReadExt, StreamExt};
use poddebug_client::types::duration::parse as parse_duration;
use poddebug_client::{RecordingRange, Recordings};

use crate::fail;

/// Slowest speed.
pub const MIN_SPEED: f64 = 0.5;
/// Fastest speed.
pub const MAX_SPEED: f64 = 8.0;

pub const EXAMPLES: &str = "\
Examples:
  # Play a recording at its own pace (its pod found from the recording)
  kubectl poddebug recordings play 20260101t120000z-0123456789abcdef -n shop

  # Four times as fast, pauses over two seconds cut to two, from minute five; with --pod the
  # recording is read at once, without looking up its pod first
  kubectl poddebug recordings play 20260101t120000z-0123456789abcdef -n shop --pod web --speed 4 --skip-idle 2s --start 5m";

/// `recordings play`'s flags.
#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// The recording (as `kubectl get debugrecordings` names it).
    pub id: String,
    /// The pod it was recorded on (found from the recording when absent).
    #[arg(long)]
    pub pod: Option<String>,
    /// Playback speed, from 0.5 to 8.
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// Cut every pause longer than this to it (2s, 500ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub skip_idle: Option<Duration>,
    /// Session time to start at (90s, 5m, 1h2m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub start: Option<Duration>,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches(['x', '×'])
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !(MIN_SPEED..=MAX_SPEED).contains(&v) {
        return Err(format!(
            "the speed must be from {MIN_SPEED} to {MAX_SPEED}, not {v}"
        ));
    }
    Ok(v)
}

/// How a recording is played: its pauses divided by the speed, each cut to the idle limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    speed: f64,
    skip_idle: Option<f64>,
}

impl Pace {
    /// Playback at `speed` (checked by the flag's parser), pauses longer than `skip_idle` cut
    /// to it (None or zero: kept).
    pub fn new(speed: f64, skip_idle: Option<Duration>) -> Pace {
        Pace {
            speed: speed.clamp(MIN_SPEED, MAX_SPEED),
            skip_idle: skip_idle.map(|d| d.as_secs_f64()).filter(|s| *s > 0.0),
        }
    }

    /// The real time between two events `gap` seconds of session time apart.
    pub fn wait(&self, gap: f64) -> Duration {
        let gap = if gap.is_finite() { gap.max(0.0) } else { 0.0 };
        let gap = self.skip_idle.map_or(gap, |limit| gap.min(limit));
        Duration::from_secs_f64(gap / self.speed)
    }
}

/// The waits of a playback from session time `from`: events up to it are drawn at once.
#[derive(Clone, Debug)]
pub struct Playback {
    pace: Pace,
    from: f64,
    last: f64,
}

impl Playback {
    /// A playback at `pace` from session time `from` (0: the start).
    pub fn new(pace: Pace, from: f64) -> Playback {
        Playback {
            pace,
            from,
            last: from,
        }
    }

    /// How long to wait before the event at session time `t` (events come in order).
    pub fn wait_for(&mut self, t: f64) -> Duration {
        if t <= self.from {
            return Duration::ZERO;
        }
        let wait = self.pace.wait(t - self.last);
        self.last = self.last.max(t);
        wait
    }
}

/// What a playback wrote.
#[derive(Debug, Default, PartialEq)]
pub struct Played {
    /// Output events written.
    pub events: u64,
    /// Session time of the last one.
    pub last: f64,
}

/// Play the asciicast `doc` to `out` (output events only; markers, input and resizes are not
/// drawn), waiting as `playback` says with tokio's clock.
pub async fn play(
    doc: impl AsyncBufRead + Unpin,
    mut playback: Playback,
    out: &mut impl Write,
) -> std::io::Result<Played> {
    let mut lines = doc.lines();
    let mut played = Played::default();
    while let Some(line) = lines.next().await {
        let line = line?;
        if !line.starts_with('[') {
            // The header (and any line that is no event).
            continue;
        }
        let Ok((t, code, data)) = serde_json::from_str::<(f64, String, String)>(&line) else {
            continue;
        };
        let wait = playback.wait_for(t);
        if !wait.is_zero() {
            out.flush()?;
            tokio::time::sleep(wait).await;
        }
        if code == "o" {
            out.write_all(data.as_bytes())?;
            played.events += 1;
            played.last = t;
        }
    }
    out.flush()?;
    Ok(played)
}

/// `kubectl poddebug recordings play`.
pub async fn run(client: &kube::Client, ns: &str, args: PlayArgs) -> ExitCode {
    let from = args.start.map_or(0.0, |d| d.as_secs_f64());
    let range = RecordingRange {
        start: args.start.map(|d| d.as_secs_f64()),
        end: None,
    };
    let api = Recordings::new(client.clone(), ns);
    let pod = match args.pod {
        Some(p) => p,
        None => match api.get(&args.id).await {
            Ok(r) => r.spec.pod,
            Err(e) => return fail(&e),
        },
    };
    let doc = match api.read(&pod, &args.id, &range).await {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    let playback = Playback::new(Pace::new(args.speed, args.skip_idle), from);
    let mut out = std::io::stdout().lock();
    match play(Box::pin(doc), playback, &mut out).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: reading the recording failed: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_and_the_idle_limit_shape_the_waits() {
        let p = Pace::new(4.0, Some(Duration::from_secs(2)));
        assert_eq!(p.wait(1.0), Duration::from_millis(250));
        assert_eq!(p.wait(60.0), Duration::from_millis(500), "idle cut to 2 s");
        let slow = Pace::new(0.5, None);
        assert_eq!(slow.wait(60.0), Duration::from_secs(120));
        assert_eq!(slow.wait(-3.0), Duration::ZERO);
        assert!(parse_speed("9").is_err());
        assert!(parse_speed("0.25").is_err());
        assert!(parse_speed("NaN").is_err());
        assert_eq!(parse_speed("4x"), Ok(4.0));
    }

    #[test]
    fn a_playback_from_the_middle_draws_what_came_before_at_once() {
        let mut p = Playback::new(Pace::new(1.0, None), 10.0);
        assert_eq!(p.wait_for(1.0), Duration::ZERO);
        assert_eq!(p.wait_for(9.5), Duration::ZERO);
        assert_eq!(p.wait_for(11.0), Duration::from_secs(1));
        assert_eq!(p.wait_for(11.5), Duration::from_millis(500));
    }

    /// Ten minutes of session time (an event a second, a pause of five minutes in it) played
    /// on tokio's paused clock: the time it takes is the session's, divided by the speed,
    /// the pause cut to the idle limit.
    #[tokio::test(start_paused = true)]
    async fn playback_takes_the_session_time_over_the_speed_on_a_fake_clock() {
        let mut doc = String::from("{\"version\":2,\"width\":80,\"height\":24}\n");
        let mut times: Vec<f64> = (0..300).map(f64::from).collect();
        times.extend((600..=900).map(f64::from));
        for t in &times {
            doc.push_str(&format!("[{t},\"o\",\"{t}\\r\\n\"]\n"));
            doc.push_str(&format!("[{t},\"m\",\"mark\"]\n"));
        }
        let run = |speed: f64, idle: Option<Duration>, from: f64| {
            let doc = doc.clone();
            async move {
                let started = tokio::time::Instant::now();
                let mut out = Vec::new();
                let played = play(
                    futures::io::Cursor::new(doc.into_bytes()),
                    Playback::new(Pace::new(speed, idle), from),
                    &mut out,
                )
                .await
                .unwrap();
                (started.elapsed(), played, String::from_utf8(out).unwrap())
            }
        };
        let (took, played, out) = run(8.0, None, 0.0).await;
        assert_eq!(took, Duration::from_secs_f64(900.0 / 8.0));
        assert_eq!(played.events, times.len() as u64);
        assert!(
            out.starts_with("0\r\n1\r\n") && out.ends_with("900\r\n"),
            "{out}"
        );
        let (took, ..) = run(8.0, Some(Duration::from_secs(2)), 0.0).await;
        assert_eq!(
            took,
            Duration::from_secs_f64((900.0 - 300.0 + 2.0 - 1.0) / 8.0)
        );
        // From minute ten: what came before is drawn at once.
        let (took, played, _) = run(2.0, None, 600.0).await;
        assert_eq!(took, Duration::from_secs_f64(300.0 / 2.0));
        assert_eq!(played.events, times.len() as u64);
    }
}
