//! Running the `magnetar` client subcommands as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// How long one command may run before the test calls it hung.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

/// Runs `magnetar ARGS` against `bootstrap` (through `MAGNETAR_BOOTSTRAP`)
/// with `stdin` as input, and waits for it; a command still running after
/// a minute is killed and the test fails.
pub fn magnetar(bootstrap: &str, args: &[&str], stdin: Option<&str>) -> Output {
    magnetar_with_env(bootstrap, &[], args, stdin)
}

/// [`magnetar`] with extra environment variables (`MAGNETAR_SASL_PASSWORD`).
pub fn magnetar_with_env(
    bootstrap: &str,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .args(args)
        .env("MAGNETAR_BOOTSTRAP", bootstrap)
        .env_remove("MAGNETAR_SASL_PASSWORD")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let pid = child.id().to_string();
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if watchdog.recv_timeout(COMMAND_DEADLINE).is_err() {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            return true;
        }
        false
    });
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    assert!(
        !killer.join().unwrap(),
        "magnetar {args:?} still ran after {COMMAND_DEADLINE:?}; stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The stdout of a successful run; panics with both outputs otherwise.
pub fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The one JSON document a successful `--json` run printed.
pub fn json(out: &Output) -> Value {
    serde_json::from_str(ok(out).trim()).expect("one JSON document")
}

/// The exit code.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

/// The stderr of a run, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
