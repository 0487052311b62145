//! Shared test support: the real `magnetar` process on a random port with a
//! temp data dir, rdkafka client configs, and a raw Kafka connection built on
//! the `kafka-protocol` crate for requests real clients never send.

#![allow(dead_code)]

pub mod cli;
pub mod cluster;
pub mod healthy;
pub mod pki;
pub mod replication;
pub mod txn;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Encodable, StrBytes};
use rdkafka::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Runs `tests/python/{script}` with `args` (blocking) and asserts it
/// exits 0 and prints `OK`; its output.
pub fn python(script: &str, args: &[&str]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python")
        .join(script);
    let out = Command::new("python3")
        .arg(path)
        .args(args)
        .output()
        .expect("python3 is needed for the client interop tests");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("OK"),
        "{script} {args:?} failed ({}).\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A `magnetar standalone` process owned by a test.
pub struct BrokerProcess {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    args: Vec<String>,
    settings: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
    pub log: Arc<Mutex<Vec<String>>>,
    fsize_limit: Option<u64>,
    nofile_limit: Option<u64>,
    env: Vec<(String, String)>,
    /// The Pulsar listener's address, kept across restarts.
    pulsar_addr: Option<SocketAddr>,
    /// The Pulsar address the running broker logged.
    pulsar_seen: Arc<Mutex<Option<SocketAddr>>>,
    /// The HTTP service's address, kept across restarts.
    http_addr: Option<SocketAddr>,
    /// The HTTP address the running broker logged.
    http_seen: Arc<Mutex<Option<SocketAddr>>>,
    /// The subcommand: `standalone`, or `broker` for a cluster node.
    command: &'static str,
}

impl BrokerProcess {
    /// Starts a broker with `--set` assignments on a fresh temp dir.
    pub fn start(settings: &[&str]) -> BrokerProcess {
        Self::launch(&[], settings, None)
    }

    /// Starts a broker with extra command-line arguments too.
    pub fn start_with_args(args: &[&str], settings: &[&str]) -> BrokerProcess {
        Self::launch(args, settings, None)
    }

    /// Starts a broker whose writes fail (EFBIG) past `bytes` per file.
    pub fn start_with_file_size_limit(settings: &[&str], bytes: u64) -> BrokerProcess {
        Self::launch(&[], settings, Some(bytes))
    }

    /// Starts a broker whose open-file limit (soft and hard) is `n`.
    pub fn start_with_open_file_limit(settings: &[&str], n: u64) -> BrokerProcess {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut b = BrokerProcess {
            child: None,
            addr: "127.0.0.1:0".parse().unwrap(),
            data_dir: tmp.path().to_path_buf(),
            args: Vec::new(),
            settings: settings.iter().map(|s| s.to_string()).collect(),
            _tmp: Some(tmp),
            log: Arc::new(Mutex::new(Vec::new())),
            fsize_limit: None,
            nofile_limit: Some(n),
            env: Vec::new(),
            pulsar_addr: None,
            pulsar_seen: Arc::default(),
            http_addr: None,
            http_seen: Arc::default(),
            command: "standalone",
        };
        b.spawn("127.0.0.1:0");
        b
    }

    /// Starts a `magnetar broker` cluster node on `data_dir` (kept by the
    /// caller) with its cluster flags in `args`.
    pub fn start_node(data_dir: PathBuf, args: &[String], settings: &[&str]) -> BrokerProcess {
        Self::try_start_node(data_dir, args, settings)
            .unwrap_or_else(|log| panic!("broker did not start; log:\n{log}"))
    }

    /// [`BrokerProcess::start_node`], answering the node's log if it
    /// exits or does not get ready.
    pub fn try_start_node(
        data_dir: PathBuf,
        args: &[String],
        settings: &[&str],
    ) -> Result<BrokerProcess, String> {
        Self::try_start_on("broker", data_dir, args, settings)
    }

    /// A `magnetar standalone` on `data_dir` (kept by the caller, e.g. a
    /// copy of a fixture), answering its log if it exits or does not get
    /// ready.
    pub fn try_start_standalone_on(
        data_dir: PathBuf,
        settings: &[&str],
    ) -> Result<BrokerProcess, String> {
        Self::try_start_on("standalone", data_dir, &[], settings)
    }

    fn try_start_on(
        command: &'static str,
        data_dir: PathBuf,
        args: &[String],
        settings: &[&str],
    ) -> Result<BrokerProcess, String> {
        let mut b = BrokerProcess {
            child: None,
            addr: "127.0.0.1:0".parse().unwrap(),
            data_dir,
            args: args.to_vec(),
            settings: settings.iter().map(|s| s.to_string()).collect(),
            _tmp: None,
            log: Arc::new(Mutex::new(Vec::new())),
            fsize_limit: None,
            nofile_limit: None,
            env: Vec::new(),
            pulsar_addr: None,
            pulsar_seen: Arc::default(),
            http_addr: None,
            http_seen: Arc::default(),
            command,
        };
        let (mut child, rx) = b.spawn_child("127.0.0.1:0");
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => {
                b.addr = addr.parse().unwrap();
                b.pulsar_addr = *b.pulsar_seen.lock().unwrap();
                b.http_addr = *b.http_seen.lock().unwrap();
                b.child = Some(child);
                Ok(b)
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                // The reader thread may still be draining stderr: wait for
                // the exit message (`magnetar: <why>`), with a deadline.
                let deadline = Instant::now() + Duration::from_secs(5);
                let exited =
                    |l: &String| l.starts_with("magnetar: ") && !l.contains(" listener on ");
                while Instant::now() < deadline && !b.log.lock().unwrap().iter().any(exited) {
                    std::thread::park_timeout(Duration::from_millis(10));
                }
                Err(b.log_text())
            }
        }
    }

    /// Starts a broker with extra environment variables.
    pub fn start_with_env(env: &[(&str, &str)], settings: &[&str]) -> BrokerProcess {
        Self::launch_with(&[], settings, None, env)
    }

    fn launch(args: &[&str], settings: &[&str], fsize_limit: Option<u64>) -> BrokerProcess {
        Self::launch_with(args, settings, fsize_limit, &[])
    }

    fn launch_with(
        args: &[&str],
        settings: &[&str],
        fsize_limit: Option<u64>,
        env: &[(&str, &str)],
    ) -> BrokerProcess {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut b = BrokerProcess {
            child: None,
            addr: "127.0.0.1:0".parse().unwrap(),
            data_dir: tmp.path().to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
            settings: settings.iter().map(|s| s.to_string()).collect(),
            _tmp: Some(tmp),
            log: Arc::new(Mutex::new(Vec::new())),
            fsize_limit,
            nofile_limit: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            pulsar_addr: None,
            pulsar_seen: Arc::default(),
            http_addr: None,
            http_seen: Arc::default(),
            command: "standalone",
        };
        b.spawn("127.0.0.1:0");
        b
    }

    fn spawn(&mut self, addr: &str) {
        let (child, rx) = self.spawn_child(addr);
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("broker did not start; log:\n{}", self.log_text()));
        self.addr = addr.parse().unwrap();
        self.pulsar_addr = *self.pulsar_seen.lock().unwrap();
        self.http_addr = *self.http_seen.lock().unwrap();
        self.child = Some(child);
    }

    /// The HTTP service URL (`http://127.0.0.1:PORT`).
    pub fn http_url(&self) -> String {
        format!(
            "http://{}",
            self.http_addr.expect("the broker logged its http listener")
        )
    }

    /// The Pulsar service URL (`pulsar://127.0.0.1:PORT`).
    pub fn pulsar_url(&self) -> String {
        format!(
            "pulsar://{}",
            self.pulsar_addr
                .expect("the broker logged its pulsar listener")
        )
    }

    /// Starts again on the same data dir and port and SIGKILLs the broker
    /// as soon as it logs its `nth` line containing `needle` in this run
    /// (the kill lands wherever the broker has got to by then). Returns what
    /// that run logged.
    pub fn restart_and_kill_at(&mut self, needle: &str, nth: usize) -> Vec<String> {
        assert!(self.child.is_none(), "stop the broker first");
        let already = self.log.lock().unwrap().len();
        let addr = self.addr.to_string();
        let (mut child, _ready) = self.spawn_child(&addr);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = self.log.lock().unwrap()[already..]
                .iter()
                .filter(|l| l.contains(needle))
                .count();
            if seen >= nth {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "broker exited ({status}) before logging {needle:?} {nth} times; log:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "broker did not log {needle:?} {nth} times; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.log.lock().unwrap()[already..].to_vec()
    }

    /// Spawns the broker; the receiver gets the Kafka listener address once
    /// it is ready.
    fn spawn_child(&mut self, addr: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnetar"));
        cmd.arg(self.command)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--kafka-addr")
            .arg(addr)
            .arg("--pulsar-addr")
            .arg(
                self.pulsar_addr
                    .map_or("127.0.0.1:0".to_string(), |a| a.to_string()),
            )
            .arg("--http-addr")
            .arg(
                self.http_addr
                    .map_or("127.0.0.1:0".to_string(), |a| a.to_string()),
            )
            .env(
                "MAGNETAR_LOG",
                std::env::var("MAGNETAR_TEST_LOG").unwrap_or_else(|_| "info,openraft=warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.args(&self.args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        for s in &self.settings {
            cmd.arg("--set").arg(s);
        }
        let limits: Vec<(libc::__rlimit_resource_t, u64)> = [
            (libc::RLIMIT_FSIZE, self.fsize_limit),
            (libc::RLIMIT_NOFILE, self.nofile_limit),
        ]
        .into_iter()
        .filter_map(|(r, l)| Some((r, l?)))
        .collect();
        if !limits.is_empty() {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches only this child.
            unsafe {
                cmd.pre_exec(move || {
                    for &(resource, limit) in &limits {
                        let lim = libc::rlimit {
                            rlim_cur: limit,
                            rlim_max: limit,
                        };
                        if libc::setrlimit(resource, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn magnetar");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = self.log.clone();
        let pulsar = self.pulsar_seen.clone();
        let http = self.http_seen.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("magnetar: pulsar listener on ") {
                    *pulsar.lock().unwrap() = rest.trim().parse().ok();
                }
                if let Some(rest) = line.strip_prefix("magnetar: http listener on ") {
                    *http.lock().unwrap() = rest.trim().parse().ok();
                }
                if let Some(rest) = line.strip_prefix("magnetar: kafka listener on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(rest.trim().to_string());
                    }
                }
                log.lock().unwrap().push(line);
            }
        });
        (child, rx)
    }

    /// `host:port` for clients.
    /// The address of the Kafka listener `name` (`SASL_SSL`, ...), as the
    /// broker last logged it (`magnetar: kafka listener NAME on ADDR`).
    /// The address of the `what` listener (`pulsar+ssl`, `https`, ...) the
    /// broker logged at start (`magnetar: {what} listener on ADDR`).
    pub fn logged_listener(&self, what: &str) -> String {
        self.logged_addr(&format!("magnetar: {what} listener on "))
    }

    /// The address of the Kafka listener `name` (a secondary one) the
    /// broker logged at start.
    pub fn listener(&self, name: &str) -> String {
        self.logged_addr(&format!("magnetar: kafka listener {name} on "))
    }

    /// What follows `prefix` on the last log line starting with it.
    fn logged_addr(&self, prefix: &str) -> String {
        self.log_text()
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(prefix).map(|a| a.trim().to_string()))
            .unwrap_or_else(|| panic!("no {prefix:?} line in the log:\n{}", self.log_text()))
    }

    /// Runs `tests/python/{script}` with `args` and asserts it exits 0 and
    /// prints `OK`; on failure shows its output and this broker's log.
    pub fn run_python_script(&self, script: &str, args: &[&std::ffi::OsStr]) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/python")
            .join(script);
        let out = std::process::Command::new("python3")
            .arg(path)
            .args(args)
            .output()
            .expect("python3 is needed for the client interop tests");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("OK"),
            "{script} {:?} failed ({}).\nIf a module is missing, run: pip install -r tests/python/requirements.txt\nstdout:\n{stdout}\nstderr:\n{stderr}\nbroker log:\n{}",
            args.first(),
            out.status,
            self.log_text()
        );
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Prints the broker's log (for debugging a failing test).
    pub fn dump_log(&self) {
        eprintln!("---- broker log ----\n{}\n----", self.log_text());
    }

    /// Everything the broker logged so far. The log is collected by a
    /// thread reading the broker's stderr, so a line the broker has just
    /// written may not be here yet: to check for a line use
    /// [`BrokerProcess::wait_for_log`].
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits until a logged line satisfies `pred` (the log is collected
    /// asynchronously), panicking with the log after `timeout`.
    pub fn wait_for_log_line(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log.lock().unwrap().iter().any(|l| pred(l)) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "the broker did not log {what} within {timeout:?}; log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to 10 s) until the broker has logged a line containing
    /// `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        self.wait_for_log_line(&format!("{needle:?}"), Duration::from_secs(10), |l| {
            l.contains(needle)
        });
    }

    /// SIGKILL: no flush, no clean-shutdown marker.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        self.stop_with("-TERM")
    }

    /// Sends a signal (`-TERM`, `-INT`) and waits; returns the exit code.
    pub fn stop_with(&mut self, signal: &str) -> Option<i32> {
        let pid = self.child.as_ref()?.id() as i32;
        let _ = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status();
        let code = self.wait_for_exit(Duration::from_secs(30));
        if self.child.is_some() {
            self.kill();
            panic!("broker did not exit after {signal}");
        }
        code
    }

    /// Sends a signal without waiting for the process (`-STOP`, `-CONT`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(signal)
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Waits up to `timeout` for the process to exit by itself; its exit
    /// code, or `None` (still running, or killed by a signal).
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let c = self.child.as_mut()?;
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                self.child = None;
                return status.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again on the same data dir and port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        let addr = self.addr.to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // The old socket may linger briefly; retry the bind.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.spawn(&addr)));
            if r.is_ok() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "broker did not restart on {addr}; log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("broker running").id()
    }

    /// A `/proc/PID/status` field in kB (`VmRSS`, `VmHWM`, ...).
    pub fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc status"))
    }

    /// Open file descriptors of the broker process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    /// The process's peak resident set size so far (VmHWM), in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        self.status_kb("VmHWM") * 1024
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The broker's side of a failing test, for the CI log.
            let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
            let tail = &log[log.len().saturating_sub(300)..];
            eprintln!(
                "---- broker log (last {} lines) ----\n{}\n----",
                tail.len(),
                tail.join("\n")
            );
        }
        self.kill();
    }
}

/// A base rdkafka config for this broker.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "10000")
        .set("message.timeout.ms", "15000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("broker.address.family", "v4");
    c
}

/// A consumer of `group` at `isolation` (read_committed or
/// read_uncommitted) that commits nothing by itself and starts at the
/// beginning.
pub fn isolated_consumer(
    bootstrap: &str,
    group: &str,
    isolation: &str,
) -> rdkafka::consumer::BaseConsumer {
    client_config(bootstrap)
        .set("group.id", group)
        .set("isolation.level", isolation)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap()
}

/// The values an assigned consumer reads until `n` have come (within 30
/// s) and then nothing more for 1.5 s: all it read, in order.
pub fn read_then_quiet(c: &rdkafka::consumer::BaseConsumer, n: usize) -> Vec<String> {
    use rdkafka::Message;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.len() < n {
        assert!(Instant::now() < deadline, "read only {out:?}");
        if let Some(m) = polled(c.poll(Duration::from_millis(200))) {
            out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    // Nothing beyond what was expected.
    let quiet = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < quiet {
        if let Some(m) = polled(c.poll(Duration::from_millis(100))) {
            out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// A consumer config for `assign()`-style reading: librdkafka requires a
/// group id for assign even when no group membership is used.
pub fn assign_config(bootstrap: &str) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("group.id", "magnetar-tests-assign")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.wait.max.ms", "100");
    c
}

/// Waits until `f` returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A raw Kafka connection for hand-built requests.
pub struct RawConn {
    stream: TcpStream,
    correlation: i32,
}

impl RawConn {
    /// Connects, or `None` if the connection is refused or reset.
    pub async fn try_connect(addr: SocketAddr) -> Option<RawConn> {
        Some(RawConn {
            stream: TcpStream::connect(addr).await.ok()?,
            correlation: 0,
        })
    }

    pub async fn connect(addr: SocketAddr) -> RawConn {
        RawConn {
            stream: TcpStream::connect(addr).await.expect("connect"),
            correlation: 0,
        }
    }

    /// Sends a request and reads its response.
    pub async fn call<R: Encodable + Into<RequestKind>>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: R,
    ) -> ResponseKind {
        self.send(key, version, req).await;
        self.recv(key, version).await.expect("response")
    }

    /// Sends a request without waiting for a response.
    pub async fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, req: R) {
        self.try_send(key, version, req).await.unwrap();
    }

    /// Sends a request; an error if the connection is gone.
    pub async fn try_send<R: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: R,
    ) -> std::io::Result<()> {
        self.correlation += 1;
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("magnetar-tests")))
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).await
    }

    /// Sends raw bytes as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads one response frame; `None` if the broker closed the connection.
    pub async fn recv(&mut self, key: ApiKey, version: i16) -> Option<ResponseKind> {
        let frame = self.recv_frame().await?;
        let mut b = frame;
        let header = kafka_protocol::protocol::Decodable::decode(
            &mut b,
            key.response_header_version(version),
        );
        let _: ResponseHeader = header.expect("response header");
        Some(ResponseKind::decode(key, &mut b, version).expect("response body"))
    }

    /// Reads one raw frame body.
    pub async fn recv_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(30), self.stream.read_exact(&mut len))
            .await
            .expect("response timeout")
            .ok()?;
        let len = i32::from_be_bytes(len) as usize;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    /// True if the broker closes the connection (EOF) within a few seconds.
    pub async fn is_closed_by_peer(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

/// Builds a v2 record batch with kafka-protocol's encoder.
pub fn record_batch(values: &[&[u8]]) -> Bytes {
    idempotent_batch(values, -1, -1, -1)
}

/// Builds a v2 batch from an idempotent producer (`producer_id` -1 = none).
pub fn idempotent_batch(
    values: &[&[u8]],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // offset - sequence stays constant, so the encoder makes one batch.
            sequence: if base_sequence < 0 {
                i as i32
            } else {
                base_sequence + i as i32
            },
            timestamp: now,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// Decodes the values in a fetched records blob.
pub fn decode_values(records: &Bytes) -> Vec<(i64, Vec<u8>)> {
    use kafka_protocol::records::RecordBatchDecoder;
    let mut b = records.clone();
    let mut out = Vec::new();
    while b.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut b).expect("decode records");
        for r in set.records {
            out.push((r.offset, r.value.map(|v| v.to_vec()).unwrap_or_default()));
        }
    }
    out
}

/// What one `BaseConsumer::poll` gave: the message, or `None` when there was
/// none or librdkafka reported one of its own transient connection events.
///
/// librdkafka 2.12 decommissions the bootstrap broker once Metadata names the
/// real one and counts that toward `ALL_BROKERS_DOWN` (fixed upstream in
/// librdkafka #5600), so a fresh consumer can report "all brokers down" for a
/// broker that never closed a connection; it reconnects by itself, and every
/// application treats these events as informational. Any other error fails
/// the test.
pub fn polled<M>(polled: Option<rdkafka::error::KafkaResult<M>>) -> Option<M> {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode;
    match polled? {
        Ok(m) => Some(m),
        Err(KafkaError::MessageConsumption(
            RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
        )) => None,
        Err(e) => panic!("librdkafka consumer error: {e}"),
    }
}

/// Fetch v13 of partition 0 of topic `id` from offset 0: the error code
/// and the values read.
pub async fn fetch_by_id(conn: &mut RawConn, id: uuid::Uuid) -> (i16, Vec<String>) {
    let req = kafka_protocol::messages::FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            kafka_protocol::messages::fetch_request::FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![
                    kafka_protocol::messages::fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 13, req).await else {
        panic!()
    };
    let p = &resp.responses[0].partitions[0];
    let values = p
        .records
        .as_ref()
        .map(|r| {
            decode_values(r)
                .into_iter()
                .map(|(_, v)| String::from_utf8(v).unwrap())
                .collect()
        })
        .unwrap_or_default();
    (p.error_code, values)
}
