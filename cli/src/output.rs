//! Printing objects as kubectl does: a table (plain or `-o wide`), JSON or YAML.

use std::process::ExitCode;

use poddebug_client::{DebugPhase, DebugProfile, PodDebugContainer};
use serde::Serialize;

/// `-o`: the formats kubectl offers for `get`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table.
    #[default]
    Table,
    /// A table with more columns.
    Wide,
    /// The object(s) as JSON.
    Json,
    /// The object(s) as YAML.
    Yaml,
    /// `resource/name` only.
    Name,
}

/// The object as JSON or YAML; `None` for the table formats.
pub fn serialized<T: Serialize>(value: &T, format: Format) -> Option<Result<String, String>> {
    match format {
        Format::Json => Some(
            serde_json::to_string_pretty(value)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string()),
        ),
        Format::Yaml => Some(serde_saphyr::to_string(value).map_err(|e| e.to_string())),
        _ => None,
    }
}

/// Print as JSON or YAML; the exit code, or `None` for the table formats.
pub fn print_serialized<T: serde::Serialize>(value: &T, format: Format) -> Option<ExitCode> {
    match serialized(value, format)? {
        Ok(s) => {
            print!("{s}");
            Some(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Some(ExitCode::FAILURE)
        }
    }
}

/// Left-aligned columns three spaces apart, as kubectl's printer lays them out.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        let last = cells.len().saturating_sub(1);
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            if i < last {
                let pad = widths[i].saturating_sub(c.chars().count()) + 3;
                s.push_str(&" ".repeat(pad));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// The state column: `Running`, `Waiting (ErrImagePull)`, `Terminated (exit 7)`.
pub fn state(o: &PodDebugContainer) -> String {
    let Some(st) = &o.status else {
        return "Waiting".into();
    };
    let cs = st.state.as_ref();
    match st.phase {
        DebugPhase::Running => "Running".into(),
        DebugPhase::Waiting => match cs
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
        {
            Some(r) => format!("Waiting ({r})"),
            None => "Waiting".into(),
        },
        DebugPhase::Terminated => match cs.and_then(|s| s.terminated.as_ref()) {
            Some(t) => format!("Terminated (exit {})", t.exit_code),
            None => "Terminated".into(),
        },
    }
}

/// The table of debug profiles.
pub fn profile_table(items: &[DebugProfile], wide: bool) -> String {
    let mut header = vec!["NAME", "DEFAULT", "NEEDS-USE-PERMISSION", "DESCRIPTION"];
    if wide {
        header.push("SETS");
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            let mut r = vec![
                p.metadata.name.clone().unwrap_or_default(),
                p.default.to_string(),
                p.requires_use_permission.to_string(),
                p.description.clone(),
            ];
            if wide {
                r.push(p.sets.join("; "));
            }
            r
        })
        .collect();
    table(&header, &rows)
}

/// One line describing a debug container, for humans.
pub fn summary(o: &PodDebugContainer) -> String {
    let name = o.metadata.name.as_deref().unwrap_or("?");
    let pod = o
        .status
        .as_ref()
        .map(|s| s.pod_name.as_str())
        .unwrap_or("?");
    let image = o.container.image.as_deref().unwrap_or("");
    format!(
        "debug container {name} in pod {pod} ({image}): {}",
        state(o)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> PodDebugContainer {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tables_line_up_like_kubectl() {
        let t = table(
            &["NAME", "POD"],
            &[
                vec!["a".into(), "web".into()],
                vec!["long-name".into(), "x".into()],
            ],
        );
        assert_eq!(t, "NAME        POD\na           web\nlong-name   x\n");
    }

    #[test]
    fn states_and_summaries() {
        let o = obj(
            json!({"metadata": {"name": "dbg"}, "container": {"image": "busybox"},
            "status": {"podName": "web", "ephemeralContainerName": "dbg", "phase": "Waiting",
                       "state": {"waiting": {"reason": "ErrImagePull"}}}}),
        );
        assert_eq!(
            summary(&o),
            "debug container dbg in pod web (busybox): Waiting (ErrImagePull)"
        );
        let o = obj(json!({"metadata": {"name": "dbg"}, "container": {},
            "status": {"podName": "web", "ephemeralContainerName": "dbg", "phase": "Terminated",
                       "state": {"terminated": {"exitCode": 7}}}}));
        assert_eq!(state(&o), "Terminated (exit 7)");
    }

    #[test]
    fn yaml_and_json() {
        let o = obj(json!({"metadata": {"name": "dbg"}, "container": {"image": "busybox"}}));
        let y = serialized(&o, Format::Yaml).unwrap().unwrap();
        assert!(
            y.contains("name: dbg") && y.contains("image: busybox"),
            "{y}"
        );
        let j = serialized(&o, Format::Json).unwrap().unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&j).unwrap()["metadata"]["name"],
            "dbg"
        );
        assert!(serialized(&o, Format::Wide).is_none());
    }
}
