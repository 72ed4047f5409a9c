//! Comparing two runs' normalised checkpoints, and counting each binary's 409 answers from
//! its request log.

use super::*;

/// Everything that differs between two runs of one scenario.
pub fn diff_runs(upstream: &Run, ours: &Run) -> Vec<Difference> {
    let mut out = Vec::new();
    // The runs' errors meet by their text: each side's has its own paths and ports only where
    // the two runs differ anyway.
    let (upstream_error, ours_error) =
        (upstream.error.as_ref().map(ToString::to_string), ours.error.as_ref().map(ToString::to_string));
    if upstream_error != ours_error {
        // The first line: the whole error (a log's tail, say) is shown once, by the outcome.
        let describe = |e: &Option<String>| {
            e.as_deref().map_or("finished".to_string(), |e| format!("failed: {}", e.lines().next().unwrap_or_default()))
        };
        out.push(Difference {
            checkpoint: "-".into(),
            subject: "run".into(),
            path: String::new(),
            upstream: describe(&upstream_error),
            ours: describe(&ours_error),
        });
    }
    // Checkpoints meet by label; a failed run's last state is labelled `final`.
    let mut labels: Vec<&str> = upstream.checkpoints.iter().map(|c| c.label.as_str()).collect();
    for label in ours.checkpoints.iter().map(|c| c.label.as_str()) {
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    for label in labels {
        let find = |run: &Run| run.checkpoints.iter().find(|c| c.label == label).cloned();
        match (find(upstream), find(ours)) {
            (Some(a), Some(b)) => diff_snapshots(&a, &b, &mut out),
            (a, b) => out.push(Difference {
                checkpoint: label.to_string(),
                subject: "checkpoint".into(),
                path: String::new(),
                upstream: if a.is_some() { "taken" } else { "not reached" }.into(),
                ours: if b.is_some() { "taken" } else { "not reached" }.into(),
            }),
        }
    }
    out
}

pub(super) fn diff_snapshots(a: &Snapshot, b: &Snapshot, out: &mut Vec<Difference>) {
    let checkpoint = a.label.clone();
    let push = |out: &mut Vec<Difference>, subject: String, path: String, upstream: String, ours: String| {
        out.push(Difference { checkpoint: checkpoint.clone(), subject, path, upstream, ours });
    };
    if a.settled != b.settled {
        let settled = |s: bool| if s { "settled" } else { "still changing" }.to_string();
        push(out, "state".into(), String::new(), settled(a.settled), settled(b.settled));
    }
    let keys: BTreeSet<&String> = a.objects.keys().chain(b.objects.keys()).collect();
    for key in keys {
        match (a.objects.get(key), b.objects.get(key)) {
            (Some(x), Some(y)) => {
                let mut paths = Vec::new();
                diff_values("", x, y, &mut paths);
                for (path, upstream, ours) in paths {
                    push(out, key.clone(), path, upstream, ours);
                }
            }
            (x, _) => {
                let present = |yes: bool| if yes { "present" } else { "absent" }.to_string();
                push(out, key.clone(), String::new(), present(x.is_some()), present(x.is_none()));
            }
        }
    }
    for line in a.events.symmetric_difference(&b.events) {
        let has = |s: &Snapshot| if s.events.contains(line) { "present" } else { "absent" }.to_string();
        push(out, format!("event \"{line}\""), String::new(), has(a), has(b));
    }
}

/// The paths at which two JSON values differ, with both sides' values.
pub(super) fn diff_values(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let child = format!("{path}.{key}");
                diff_values(&child, x.get(key).unwrap_or(&Value::Null), y.get(key).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_values(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push((path.to_string(), brief(a), brief(b))),
    }
}

/// A value in one line, shortened.
pub(super) fn brief(value: &Value) -> String {
    if value.is_null() {
        return "<absent>".into();
    }
    let text = value.to_string();
    if text.chars().count() > 400 { format!("{}…", text.chars().take(400).collect::<String>()) } else { text }
}

// ---------------------------------------------------------------------------------------------
// Conflicts
// ---------------------------------------------------------------------------------------------

/// Counts the 409 answers to writes in a controller manager's `-v=6` log: upstream's client-go
/// lines (`"Response" verb="PUT" url="…" status="409 Conflict"`) and ours
/// (`PUT https://… 409 Conflict in 3 milliseconds`).
pub fn count_conflicts(log: &str) -> Conflicts {
    let mut conflicts = Conflicts::default();
    for line in log.lines() {
        let Some((verb, url)) = conflict_of(line) else { continue };
        if !matches!(verb, "POST" | "PUT" | "PATCH" | "DELETE") {
            continue;
        }
        conflicts.total += 1;
        *conflicts.by_request.entry(format!("{verb} {}", resource_of(url))).or_default() += 1;
    }
    conflicts
}

/// The verb and URL of a request log line that reports a 409.
pub(super) fn conflict_of(line: &str) -> Option<(&str, &str)> {
    if line.contains("\"Response\"") {
        if !line.contains("status=\"409 ") {
            return None;
        }
        let quoted = |key: &str| {
            let start = line.find(&format!("{key}=\""))? + key.len() + 2;
            line[start..].find('"').map(|end| &line[start..start + end])
        };
        return Some((quoted("verb")?, quoted("url")?));
    }
    let (_, message) = line.split_once("] ")?;
    let mut words = message.split_whitespace();
    let (verb, url, code) = (words.next()?, words.next()?, words.next()?);
    (url.starts_with("http") && code == "409").then_some((verb, url))
}

/// `resource[/subresource]` of a request URL (`replicasets/status`).
pub(super) fn resource_of(url: &str) -> String {
    let path = url.split("://").nth(1).and_then(|rest| rest.find('/').map(|i| &rest[i..])).unwrap_or(url);
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // /api/v1/... or /apis/group/version/...
    let rest = match segments.first() {
        Some(&"api") => &segments[segments.len().min(2)..],
        Some(&"apis") => &segments[segments.len().min(3)..],
        _ => &segments[..],
    };
    let rest = if rest.len() >= 3 && rest[0] == "namespaces" { &rest[2..] } else { rest };
    match rest {
        [] => "namespaces".into(),
        [resource] | [resource, _] => (*resource).to_string(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "=== {} ===", self.scenario)?;
        for run in [&self.upstream, &self.ours] {
            let status = run.error.as_ref().map_or("finished".to_string(), |e| format!("FAILED: {e}"));
            writeln!(
                f,
                "{:>8}: {status} in {:.1}s; 409 answers to writes: {}; log {}",
                run.side.name(),
                run.elapsed.as_secs_f64(),
                run.conflicts,
                run.log.display()
            )?;
        }
        if self.differences.is_empty() {
            return writeln!(f, "no differences");
        }
        for difference in &self.differences {
            match difference.known(self.scenario) {
                Some(known) => writeln!(f, "  known: {difference}\n         ({})", known.reason)?,
                None => writeln!(f, "  DIFF:  {difference}")?,
            }
        }
        Ok(())
    }
}
