//! What a run-to-completion pod's first container does when no script annotation says: read
//! from its image, command and arguments, for the programs upstream's e2e suite gives Job pods
//! (`test/e2e/framework/job/fixtures.go`) and that a simulated kubelet can tell apart without
//! running them:
//! - the pause image, and agnhost's servers (`pause`, `netexec`, `serve-hostname`, …): run until
//!   killed;
//! - `sleep N`: run N seconds, then exit 0; `true` and `false` (`/bin/false`): exit 0 and 1;
//! - a shell (`sh -c`, `/bin/sh -c`, `bash -c`) running statements `exit N`, `sleep N`, `touch`,
//!   `echo`, `true`, `:` in sequence (`;`, `&&` or new lines): run the slept seconds, then exit
//!   with the first `exit`'s code (0 at the end);
//! - the marker-file idiom `if [[ -r F ]] then exit 0 else touch F; exit N fi` (the suite's
//!   `failOnce` and `failOncePerIndex`): the first run exits N, the later ones 0. The marker
//!   survives where the file does: in a `hostPath` volume it is shared by the Job's pods of that
//!   completion index (as on one node); otherwise only the same pod's restarts see it;
//! - `if [ $(expr ${JOB_COMPLETION_INDEX} % 2) -ne 0 ]; then … else … fi` (`failOddSucceedEven`):
//!   the branch for the pod's completion index.
//!
//! Anything else (`$RANDOM`, a marker whose first run sleeps, a command we do not know) is not
//! recognised: the pod runs unscripted.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

/// How a recognised program runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    /// Runs until its containers are killed.
    Forever,
    /// Exits by itself.
    Exits {
        /// How long it runs before the exit; `None`: it exits at once (the kubelet's usual
        /// run time applies).
        run_time: Option<Duration>,
        /// The exit code of each run, in order; the last repeats.
        codes: Vec<i32>,
        /// Runs are counted per pod (the marker lives in the pod's own volume), not per Job
        /// and completion index.
        per_pod: bool,
    },
}

/// agnhost's subcommands that serve until killed.
const AGNHOST_SERVERS: &[&str] =
    &["pause", "netexec", "serve-hostname", "test-webserver", "porter", "liveness", "webhook", "nettest"];
/// The longest exit code.
const MAX_EXIT_CODE: i32 = 255;

/// The program of `pod`'s first container, if recognised.
pub fn of(pod: &Pod) -> Option<Program> {
    let spec = pod.spec.as_ref()?;
    let container = spec.containers.first()?;
    let repository = image_repository(container.image.as_deref().unwrap_or_default());
    let command: Vec<&str> = container.command.iter().flatten().map(String::as_str).collect();
    let args: Vec<&str> = container.args.iter().flatten().map(String::as_str).collect();
    if command.is_empty() {
        if repository == "pause" {
            return Some(Program::Forever);
        }
        if repository == "agnhost" && args.first().is_some_and(|a| AGNHOST_SERVERS.contains(a)) {
            return Some(Program::Forever);
        }
    }
    let line: Vec<&str> = command.iter().chain(args.iter()).copied().collect();
    match line.as_slice() {
        [sleep, seconds] if basename(sleep) == "sleep" => {
            Some(Program::Exits { run_time: Some(seconds_of(seconds)?), codes: vec![0], per_pod: false })
        }
        [program] if matches!(basename(program), "false" | "true") => {
            let code = if basename(program) == "false" { 1 } else { 0 };
            Some(Program::Exits { run_time: None, codes: vec![code], per_pod: false })
        }
        [shell, "-c", script] if matches!(basename(shell), "sh" | "bash" | "ash") => {
            shell_program(script, container, pod)
        }
        _ => None,
    }
}

/// The last path segment of an image's repository, without registry or tag: `pause`, `agnhost`.
fn image_repository(image: &str) -> &str {
    let name = image.split('@').next().unwrap_or_default();
    let last = name.rsplit('/').next().unwrap_or_default();
    last.split(':').next().unwrap_or_default()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn seconds_of(text: &str) -> Option<Duration> {
    super::script::parse_seconds(text).ok()
}

fn exit_code(text: &str) -> Option<i32> {
    text.parse::<i32>().ok().filter(|c| (0..=MAX_EXIT_CODE).contains(c))
}

/// A shell script: a plain sequence, or the marker-file idiom.
fn shell_program(script: &str, container: &Container, pod: &Pod) -> Option<Program> {
    let words = tokens(script);
    if words.iter().find(|w| **w != ";") == Some(&"if") {
        return if_program(&words, container, pod);
    }
    let (run_time, code) = sequence(&words)?;
    Some(Program::Exits { run_time, codes: vec![code], per_pod: false })
}

/// The script's words, statement separators (`;`, `&&`, new lines) as `;`, and the keywords
/// `then`, `else`, `fi` as statements of their own.
fn tokens(script: &str) -> Vec<&str> {
    let mut words = Vec::new();
    for line in script.lines() {
        for statement in line.split(';').flat_map(|s| s.split("&&")) {
            for word in statement.split_whitespace() {
                if matches!(word, "then" | "else" | "fi") {
                    words.extend([";", word, ";"]);
                } else {
                    words.push(word);
                }
            }
            words.push(";");
        }
    }
    words
}

/// Runs statements in order: the time slept, and the code of the first `exit` (0 at the end).
/// `None` for a statement this does not know.
fn sequence(words: &[&str]) -> Option<(Option<Duration>, i32)> {
    let mut slept: Option<Duration> = None;
    for statement in words.split(|w| *w == ";").filter(|s| !s.is_empty()) {
        match statement {
            ["exit", code] => return Some((slept, exit_code(code)?)),
            ["exit"] => return Some((slept, 0)),
            ["sleep", seconds] => slept = Some(slept.unwrap_or_default() + seconds_of(seconds)?),
            ["true"] | [":"] => {}
            ["touch" | "echo", ..] => {}
            _ => return None,
        }
    }
    Some((slept, 0))
}

/// `if COND then A else B fi` with one of the two conditions the e2e suite's Job fixtures test:
/// - `[[ -r F ]]` where A is `exit 0` and B touches F then ends with `exit N`: the marker file
///   (exits N once, then 0);
/// - `[ $(expr ${JOB_COMPLETION_INDEX} % 2) -ne 0 ]`: A for odd completion indexes, B for even.
fn if_program<'a>(words: &[&'a str], container: &Container, pod: &Pod) -> Option<Program> {
    let statements: Vec<&[&str]> = words.split(|w| *w == ";").filter(|s| !s.is_empty()).collect();
    let at = |keyword: &str| statements.iter().position(|s| *s == [keyword]);
    let (then_at, else_at, fi_at) = (at("then")?, at("else")?, at("fi")?);
    if then_at != 1 || else_at < then_at || fi_at < else_at || fi_at != statements.len() - 1 {
        return None;
    }
    let join = |part: &[&[&'a str]]| part.join(&";");
    let (then, otherwise) = (join(&statements[then_at + 1..else_at]), join(&statements[else_at + 1..fi_at]));
    match statements[0] {
        ["if", "[[", "-r", file, "]]"] => {
            if sequence(&then)? != (None, 0) || !otherwise.windows(2).any(|w| w == ["touch", file]) {
                return None;
            }
            // A first run that sleeps and later ones that exit at once are more than a script
            // of one run time says.
            let (run_time @ None, code) = sequence(&otherwise)? else { return None };
            let per_pod = !in_host_path(file, container, pod);
            Some(Program::Exits { run_time, codes: vec![code, 0], per_pod })
        }
        ["if", "[", "$(expr", "${JOB_COMPLETION_INDEX}", "%", "2)", "-ne", "0", "]"] => {
            let index = completion_index(pod)?;
            let (run_time, code) = sequence(if index % 2 != 0 { &then } else { &otherwise })?;
            Some(Program::Exits { run_time, codes: vec![code], per_pod: false })
        }
        _ => None,
    }
}

/// The pod's completion index (Indexed Jobs' annotation).
fn completion_index(pod: &Pod) -> Option<i64> {
    let annotations = pod.metadata.annotations.as_ref()?;
    annotations.get(super::script::COMPLETION_INDEX)?.parse().ok().filter(|i| *i >= 0)
}

/// Whether `file` lies in a volume mount of `container` backed by a `hostPath` volume.
fn in_host_path(file: &str, container: &Container, pod: &Pod) -> bool {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    container.volume_mounts.iter().flatten().any(|mount| {
        let inside = file.strip_prefix(mount.mount_path.trim_end_matches('/')).is_some_and(|r| r.starts_with('/'));
        inside && volumes.into_iter().flatten().any(|v| v.name == mount.name && v.host_path.is_some())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(image: &str, command: &[&str], args: &[&str]) -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": "u"}, "spec": {
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "image": image, "command": command, "args": args,
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}))
        .expect("a Pod")
    }

    const BUSYBOX: &str = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1";

    fn exits(run_time: Option<Duration>, codes: &[i32], per_pod: bool) -> Option<Program> {
        Some(Program::Exits { run_time, codes: codes.to_vec(), per_pod })
    }

    #[test]
    fn servers_and_pause_run_forever() {
        assert_eq!(of(&pod("registry.k8s.io/pause:3.10.1", &[], &[])), Some(Program::Forever));
        let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.56";
        assert_eq!(of(&pod(agnhost, &[], &["netexec", "--http-port=80"])), Some(Program::Forever));
        assert_eq!(of(&pod(agnhost, &[], &["pause"])), Some(Program::Forever));
        assert_eq!(of(&pod(agnhost, &[], &["mounttest"])), None);
        assert_eq!(of(&pod("httpd:2.4", &[], &[])), None);
    }

    #[test]
    fn the_suite_job_behaviours() {
        // fixtures.go: fail, succeed, neverTerminate.
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c", "exit 1"], &[])), exits(None, &[1], false));
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c", "exit 0"], &[])), exits(None, &[0], false));
        // The CronJob specs' failureCommand.
        assert_eq!(of(&pod(BUSYBOX, &["/bin/false"], &[])), exits(None, &[1], false));
        assert_eq!(
            of(&pod(BUSYBOX, &["sleep", "1000000"], &[])),
            exits(Some(Duration::from_secs(1_000_000)), &[0], false)
        );
        // randomlySucceedOrFail and failOddSucceedEven read what we do not simulate.
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c", "exit $(( $RANDOM / 16384 ))"], &[])), None);
        // failOddSucceedEven: the branch of the pod's completion index; none without one.
        let odd_even = "\n\t\t\tif [ $(expr ${JOB_COMPLETION_INDEX} % 2) -ne 0 ]; then\n\t\t\t\texit 1\n\t\t\telse\n\t\t\t\texit 0\n\t\t\tfi\n\t\t\t";
        let mut indexed = pod(BUSYBOX, &["sh", "-c"], &[odd_even]);
        assert_eq!(of(&indexed), None);
        for (index, code) in [("3", 1), ("4", 0)] {
            indexed.metadata.annotations =
                Some([(super::super::script::COMPLETION_INDEX.to_string(), index.to_string())].into());
            assert_eq!(of(&indexed), exits(None, &[code], false));
        }
        assert_eq!(
            of(&pod(BUSYBOX, &["sh", "-c", "sleep 2; echo done && exit 3"], &[])),
            exits(Some(Duration::from_secs(2)), &[3], false)
        );
        assert_eq!(of(&pod(BUSYBOX, &["sh", "-c", "cat /etc/hosts"], &[])), None);
    }

    #[test]
    fn the_marker_idiom_fails_once_where_the_marker_lives() {
        let fail_once = "\n\t\t\tif [[ -r /data/foo ]]\n\t\t\tthen\n\t\t\t\texit 0\n\t\t\telse\n\t\t\t\ttouch /data/foo\n\t\t\t\texit 1\n\t\t\tfi\n\t\t";
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c"], &[fail_once])), exits(None, &[1, 0], true));
        let mut on_host = pod(BUSYBOX, &["/bin/sh", "-c"], &[fail_once]);
        let volumes = on_host.spec.as_mut().and_then(|s| s.volumes.as_mut()).expect("volumes");
        volumes[0] =
            serde_json::from_value(json!({"name": "data", "hostPath": {"path": "/tmp/job-e2e/x"}})).expect("a volume");
        assert_eq!(of(&on_host), exits(None, &[1, 0], false));
        let per_index = "\n\t\t\tif [[ -r /data/foo-$JOB_COMPLETION_INDEX ]]\n\t\t\tthen\n\t\t\t\texit 0\n\t\t\telse\n\t\t\t\ttouch /data/foo-$JOB_COMPLETION_INDEX\n\t\t\t\texit 42\n\t\t\tfi\n\t\t";
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c"], &[per_index])), exits(None, &[42, 0], true));
        // notTerminateOncePerIndex: the first run sleeps, the later ones exit at once.
        let sleeper = "if [[ -r /data/foo ]]\nthen\nexit 0\nelse\ntouch /data/foo\nsleep 1000000\nfi";
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c"], &[sleeper])), None);
        // A marker touched elsewhere than it is read is not the idiom.
        let other = "if [[ -r /data/a ]]\nthen\nexit 0\nelse\ntouch /data/b\nexit 1\nfi";
        assert_eq!(of(&pod(BUSYBOX, &["/bin/sh", "-c"], &[other])), None);
    }
}
