//! The `magnetar` client commands (and the native client under them) over
//! TLS and SASL, against the real broker: SASL_SSL with SCRAM-SHA-512,
//! SASL_PLAINTEXT with PLAIN, SSL with a client certificate, the same
//! through `--command-config` files; refusals with their exit codes, within
//! a bound; sessions re-authenticated on the same connections (KIP-368).
//! Certificates are made here with `rcgen`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use client::{ClientConfig, SaslMechanism, SecurityConfig, SecurityProtocol};
use common::cli::{code, magnetar_with_env, ok, stderr};
use common::pki::secure_broker;

/// Exit code of a refused authentication (crates/cli/src/error.rs).
const EXIT_AUTH: i32 = 5;
const EXIT_USAGE: i32 = 2;
const EXIT_UNREACHABLE: i32 = 4;

fn path(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// Runs `magnetar` against `bootstrap` with the arguments, the security
/// arguments and the environment.
fn run(
    bootstrap: &str,
    security: &[&str],
    env: &[(&str, &str)],
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(security);
    all.extend_from_slice(&["--timeout", "10"]);
    magnetar_with_env(bootstrap, env, &all, stdin)
}

/// Creates `topic`, produces three records and consumes them back with a
/// group, all with `security` (and `env`).
fn round_trip(bootstrap: &str, security: &[&str], env: &[(&str, &str)], topic: &str) {
    let created = ok(&run(
        bootstrap,
        security,
        env,
        &["topic", "create", topic, "-p", "2"],
        None,
    ));
    assert!(
        created.starts_with(&format!("created topic {topic}")),
        "{created}"
    );
    ok(&run(
        bootstrap,
        security,
        env,
        &["produce", topic],
        Some("one\ntwo\nthree\n"),
    ));
    let group = format!("{topic}-group");
    let out = ok(&run(
        bootstrap,
        security,
        env,
        &[
            "consume", topic, "--group", &group, "--from", "earliest", "-n", "3",
        ],
        None,
    ));
    let mut got: Vec<&str> = out.lines().collect();
    got.sort();
    assert_eq!(got, ["one", "three", "two"], "{topic}: {out}");
}

/// The refusal's stderr, after checking its exit code and that it came
/// within `bound`.
fn refused(out: &Output, exit: i32, started: Instant, bound: Duration) -> String {
    let err = stderr(out);
    assert_eq!(
        code(out),
        exit,
        "stderr: {err}\nstdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        started.elapsed() < bound,
        "took {:?}: {err}",
        started.elapsed()
    );
    assert!(err.starts_with("magnetar: error: "), "{err}");
    err
}

/// SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN (the password
/// from the environment), the same through librdkafka-style and Java-style
/// `--command-config` files, and flags overriding a file.
#[test]
fn sasl_round_trips_with_flags_and_command_config() {
    let (broker, pki) = secure_broker("none", &[]);
    let ca = path(pki.path(), "ca.pem");
    let sasl_ssl = broker.listener("SASL_SSL");
    let sasl_plain = broker.listener("SASL_PLAINTEXT");

    let scram512 = [
        "--security-protocol",
        "SASL_SSL",
        "--sasl-mechanism",
        "SCRAM-SHA-512",
        "--sasl-username",
        "alice",
        "--sasl-password",
        "alice-secret",
        "--tls-ca",
        &ca,
    ];
    round_trip(&sasl_ssl, &scram512, &[], "scram512-flags");

    let plain = [
        "--security-protocol",
        "sasl_plaintext",
        "--sasl-mechanism",
        "PLAIN",
        "--sasl-username",
        "bob",
    ];
    round_trip(
        &sasl_plain,
        &plain,
        &[("MAGNETAR_SASL_PASSWORD", "bob-secret")],
        "plain-env",
    );

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| -> String {
        let p: PathBuf = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let librdkafka = write(
        "librdkafka.properties",
        format!(
            "# as for kcat -F\nsecurity.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\n\
             sasl.username=alice\nsasl.password=alice-secret\nssl.ca.location={ca}\n\
             ssl.endpoint.identification.algorithm=https\n"
        ),
    );
    round_trip(
        &sasl_ssl,
        &["--command-config", &librdkafka],
        &[],
        "scram512-file",
    );

    let java = write(
        "java.properties",
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20   username=\"bob\" password=\"bob-secret\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        ),
    );
    round_trip(
        &sasl_ssl,
        &["--command-config", &java],
        &[],
        "scram256-jaas",
    );

    let java_plain = write(
        "plain.properties",
        "security.protocol=SASL_PLAINTEXT\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"wrong\";\n"
            .to_string(),
    );
    // The flag's password overrides the file's wrong one.
    round_trip(
        &sasl_plain,
        &[
            "--command-config",
            &java_plain,
            "--sasl-password",
            "alice-secret",
        ],
        &[],
        "plain-file-override",
    );
    // Without the override the file's password is refused.
    let started = Instant::now();
    let out = run(
        &sasl_plain,
        &["--command-config", &java_plain],
        &[],
        &["topic", "list"],
        None,
    );
    let err = refused(&out, EXIT_AUTH, started, Duration::from_secs(15));
    assert!(err.contains("PLAIN as \"alice\""), "{err}");

    // `magnetar bench` builds its clients the same way.
    let out = ok(&run(
        &sasl_ssl,
        &scram512,
        &[],
        &[
            "bench",
            "produce",
            "--duration",
            "1",
            "--rate",
            "200",
            "--partitions",
            "2",
            "--message-size",
            "64",
            "--quiet",
        ],
        None,
    ));
    assert!(out.contains("msg/s"), "{out}");
}

/// Wrong passwords and unknown users, a SASL client on a listener without
/// SASL, the wrong CA, plaintext on a TLS port and TLS on a plaintext port:
/// each a clear error and its exit code, quickly (no retry storm, no hang);
/// bad combinations of options are bad usage before anything is dialled.
#[test]
fn refusals_are_clear_and_bounded() {
    let (broker, pki) = secure_broker("none", &[]);
    let ca = path(pki.path(), "ca.pem");
    let sasl_ssl = broker.listener("SASL_SSL");
    let ssl = broker.listener("SSL");
    let plaintext = broker.bootstrap();
    let bound = Duration::from_secs(15);
    for (user, password) in [("alice", "wrong"), ("mallory", "x")] {
        let scram = [
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-512",
            "--sasl-username",
            user,
            "--sasl-password",
            password,
            "--tls-ca",
            &ca,
        ];
        let started = Instant::now();
        let out = run(&sasl_ssl, &scram, &[], &["topic", "list"], None);
        let err = refused(&out, EXIT_AUTH, started, bound);
        assert!(
            err.contains("authentication failed at")
                && err.contains(&format!("SCRAM-SHA-512 as \"{user}\"")),
            "{err}"
        );
        // The broker's own answer is passed on.
        assert!(err.contains("SaslAuthenticationFailed"), "{err}");
        // A produce is refused as quickly: nothing is retried.
        let started = Instant::now();
        let out = run(
            &sasl_ssl,
            &scram,
            &[],
            &["produce", "anything"],
            Some("x\n"),
        );
        refused(&out, EXIT_AUTH, started, bound);
    }

    // SASL on the PLAINTEXT listener: the handshake is refused.
    let started = Instant::now();
    let sasl_on_plain = [
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-mechanism",
        "PLAIN",
        "--sasl-username",
        "alice",
        "--sasl-password",
        "alice-secret",
    ];
    let out = run(&plaintext, &sasl_on_plain, &[], &["topic", "list"], None);
    let err = refused(&out, EXIT_AUTH, started, bound);
    assert!(err.contains("does not use SASL"), "{err}");

    // The wrong CA: the broker's certificate is not trusted.
    let started = Instant::now();
    let rogue_ca = pki.path().join("rogue-ca.pem");
    let rogue = std::fs::read_to_string(pki.path().join("rogue.pem")).unwrap();
    std::fs::write(&rogue_ca, rogue).unwrap();
    let rogue_ca = rogue_ca.display().to_string();
    let out = run(
        &ssl,
        &["--security-protocol", "SSL", "--tls-ca", &rogue_ca],
        &[],
        &["topic", "list"],
        None,
    );
    let err = refused(&out, EXIT_AUTH, started, bound);
    assert!(
        err.contains("TLS failed") && err.contains("not signed by the configured CA"),
        "{err}"
    );

    // Plaintext on the TLS port.
    let started = Instant::now();
    let out = run(&ssl, &[], &[], &["topic", "list"], None);
    let err = refused(&out, EXIT_UNREACHABLE, started, bound);
    assert!(
        err.contains("answered with a TLS alert: is this a TLS listener"),
        "{err}"
    );

    // TLS on the plaintext port.
    let started = Instant::now();
    let out = run(
        &plaintext,
        &["--security-protocol", "SSL", "--tls-ca", &ca],
        &[],
        &["topic", "list"],
        None,
    );
    let err = refused(&out, EXIT_UNREACHABLE, started, bound);
    assert!(err.contains("is this a TLS listener"), "{err}");

    // Bad usage, named before anything is dialled.
    let bad_file = pki.path().join("typo.properties");
    std::fs::write(&bad_file, "security.protocol=SASL_SSL\nsasl.pasword=x\n").unwrap();
    let bad_file = bad_file.display().to_string();
    for (args, want) in [
        (
            vec!["--sasl-mechanism", "PLAIN"],
            "--sasl-mechanism needs --security-protocol SASL_PLAINTEXT or SASL_SSL",
        ),
        (
            vec![
                "--security-protocol",
                "SASL_SSL",
                "--sasl-mechanism",
                "PLAIN",
                "--sasl-username",
                "alice",
                "--tls-ca",
                &ca,
            ],
            "MAGNETAR_SASL_PASSWORD",
        ),
        (vec!["--security-protocol", "SSL"], "needs --tls-ca"),
        (
            vec!["--tls-ca", &ca],
            "--tls-ca needs --security-protocol SSL or SASL_SSL",
        ),
        (
            vec!["--command-config", &bad_file],
            "sasl.pasword: not supported",
        ),
        (
            vec!["--security-protocol", "TLS"],
            "unknown security protocol",
        ),
    ] {
        let started = Instant::now();
        let out = run("127.0.0.1:1", &args, &[], &["topic", "list"], None);
        let err = stderr(&out);
        assert_eq!(code(&out), EXIT_USAGE, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(started.elapsed() < bound);
    }
}

/// `ssl.client.auth=required`: the client certificate (flags, or a PEM
/// keystore in `--command-config`) gets in; none, or one of another CA, is
/// refused with the authentication exit code.
#[test]
fn client_certificates_over_ssl() {
    let (broker, pki) = secure_broker("required", &[]);
    let ssl = broker.listener("SSL");
    let (ca, cert, key) = (
        path(pki.path(), "ca.pem"),
        path(pki.path(), "client.pem"),
        path(pki.path(), "client.key"),
    );
    let flags = [
        "--security-protocol",
        "SSL",
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    round_trip(&ssl, &flags, &[], "mtls-flags");

    // One PEM file with the chain and the key, as a Java PEM keystore.
    let keystore = pki.path().join("client-keystore.pem");
    let both = std::fs::read_to_string(&cert).unwrap() + &std::fs::read_to_string(&key).unwrap();
    std::fs::write(&keystore, both).unwrap();
    let props = pki.path().join("mtls.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n\
             ssl.keystore.type=PEM\nssl.keystore.location={}\n",
            keystore.display()
        ),
    )
    .unwrap();
    let props = props.display().to_string();
    round_trip(&ssl, &["--command-config", &props], &[], "mtls-file");

    let bound = Duration::from_secs(15);
    let started = Instant::now();
    let out = run(
        &ssl,
        &["--security-protocol", "SSL", "--tls-ca", &ca],
        &[],
        &["topic", "list"],
        None,
    );
    let err = refused(&out, EXIT_AUTH, started, bound);
    assert!(err.contains("TLS failed"), "{err}");
    let (rogue, rogue_key) = (path(pki.path(), "rogue.pem"), path(pki.path(), "rogue.key"));
    let started = Instant::now();
    let out = run(
        &ssl,
        &[
            "--security-protocol",
            "SSL",
            "--tls-ca",
            &ca,
            "--tls-cert",
            &rogue,
            "--tls-key",
            &rogue_key,
        ],
        &[],
        &["topic", "list"],
        None,
    );
    let err = refused(&out, EXIT_AUTH, started, bound);
    assert!(err.contains("refused the client certificate"), "{err}");
}

/// `connections.max.reauth.ms=2000` (KIP-368): a CLI producer and a
/// consumer that run longer than a session, and a native client's
/// connection, re-authenticate on the same connections; the broker never
/// closes one for an expired session.
#[test]
fn sessions_are_re_authenticated_on_the_same_connections() {
    let (broker, pki) = secure_broker("none", &["connections.max.reauth.ms=2000"]);
    let ca = path(pki.path(), "ca.pem");
    let sasl_ssl = broker.listener("SASL_SSL");
    let scram = [
        "--security-protocol",
        "SASL_SSL",
        "--sasl-mechanism",
        "SCRAM-SHA-512",
        "--sasl-username",
        "alice",
        "--tls-ca",
        &ca,
    ];
    let env = [("MAGNETAR_SASL_PASSWORD", "alice-secret")];
    let out = ok(&run(
        &sasl_ssl,
        &scram,
        &env,
        &[
            "bench",
            "produce",
            "--duration",
            "5",
            "--rate",
            "500",
            "--partitions",
            "2",
            "--message-size",
            "64",
            "--topic-prefix",
            "reauth",
            "--keep",
            "--quiet",
            "--json",
        ],
        None,
    ));
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let sent = report["messages"].as_u64().unwrap();
    assert!(sent >= 2000 && report["errors"] == 0, "{report}");
    // A consumer that reads everything, then waits idle past two sessions.
    let out = ok(&run(
        &sasl_ssl,
        &scram,
        &env,
        &[
            "consume",
            "reauth-0",
            "--group",
            "reauth",
            "--from",
            "earliest",
            "--follow",
            "--idle-exit",
            "5",
            "--format",
            "json",
        ],
        None,
    ));
    assert_eq!(out.lines().count() as u64, sent);

    // The native client: one connection outlives three sessions.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let security = SecurityConfig::new(SecurityProtocol::SaslSsl)
            .sasl(SaslMechanism::ScramSha256, "bob", "bob-secret")
            .tls_ca_file(&ca);
        let client =
            client::Client::connect(ClientConfig::new([sasl_ssl.clone()]).security(security))
                .await
                .unwrap();
        let conn = client.connection_to(&sasl_ssl).await.unwrap();
        assert_eq!(conn.authentications(), 1);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut ticks = tokio::time::interval(Duration::from_millis(100));
        while conn.authentications() < 4 {
            assert!(
                Instant::now() < deadline,
                "no re-authentication: {}",
                conn.authentications()
            );
            ticks.tick().await;
            // Requests keep flowing on the connection meanwhile.
            let v = conn
                .versions()
                .pick::<kafka_protocol::messages::MetadataRequest>()
                .unwrap();
            conn.send(v, &kafka_protocol::messages::MetadataRequest::default())
                .unwrap()
                .await
                .unwrap();
        }
        assert!(!conn.is_closed());
        let again = client.connection_to(&sasl_ssl).await.unwrap();
        assert_eq!(
            again.authentications(),
            conn.authentications(),
            "the same connection"
        );
    });
    assert!(
        !broker.log_text().contains("without re-authentication"),
        "a session expired:\n{}",
        broker.log_text()
    );
}
