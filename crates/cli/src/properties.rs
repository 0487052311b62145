//! `--command-config FILE`: a Kafka client properties file, read for its
//! security settings under librdkafka's and the Java client's names.
//!
//! The file is in Java's `.properties` syntax (`key=value`, `key: value`
//! or `key value`; `#` and `!` comments; a trailing `\` continues a line;
//! `\t`, `\n`, `\uXXXX` and `\x` escapes). Every key must be one this tool
//! understands: an unknown key (a typo such as `sasl.pasword` would
//! otherwise silently drop a setting) is bad usage.

use std::path::{Path, PathBuf};

use client::{SaslMechanism, SecurityProtocol};

use crate::error::{message, CliError};

/// The keys `--command-config` understands.
pub const KNOWN_KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
];

/// The security settings a properties file gives (each unset if absent).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FileSettings {
    /// `security.protocol`.
    pub protocol: Option<SecurityProtocol>,
    /// `sasl.mechanism` / `sasl.mechanisms`, or implied by a PLAIN login
    /// module.
    pub mechanism: Option<SaslMechanism>,
    /// `sasl.username`, or the login module's `username`.
    pub username: Option<String>,
    /// `sasl.password`, or the login module's `password`.
    pub password: Option<String>,
    /// `ssl.ca.location` / `ssl.truststore.location` (PEM).
    pub ca: Option<PathBuf>,
    /// `ssl.certificate.location` / `ssl.keystore.location` (PEM).
    pub cert: Option<PathBuf>,
    /// `ssl.key.location` / `ssl.keystore.location` (PEM).
    pub key: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (true) or
    /// `none`/empty (false).
    pub verify_hostname: Option<bool>,
}

impl FileSettings {
    /// Reads and interprets `path`.
    pub fn load(path: &Path) -> Result<FileSettings, CliError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::Usage(format!(
                "cannot read --command-config {}: {e}",
                path.display()
            ))
        })?;
        FileSettings::from_pairs(&parse(&text), &path.display().to_string())
    }

    /// Interprets `key=value` pairs (later ones win); `origin` names the
    /// file in errors.
    pub fn from_pairs(pairs: &[(String, String)], origin: &str) -> Result<FileSettings, CliError> {
        let bad = |key: &str, why: String| CliError::Usage(format!("{origin}: {key}: {why}"));
        let get = |key: &str| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.trim().to_string())
        };
        if let Some((k, _)) = pairs
            .iter()
            .find(|(k, _)| !KNOWN_KEYS.contains(&k.as_str()))
        {
            let hint = match k.as_str() {
                "ssl.key.password" | "ssl.keystore.password" => {
                    " (encrypted keys and password-protected keystores are not supported: give an unencrypted PEM key)"
                        .to_string()
                }
                "ssl.truststore.password" => " (PEM truststores have no password)".to_string(),
                "bootstrap.servers" => " (give the brokers with --bootstrap)".to_string(),
                _ => format!("; known keys: {}", KNOWN_KEYS.join(", ")),
            };
            return Err(bad(k, format!("not supported{hint}")));
        }
        let mut s = FileSettings::default();
        if let Some(v) = get("security.protocol") {
            s.protocol = Some(
                v.parse()
                    .map_err(|e| bad("security.protocol", message(e)))?,
            );
        }
        let mechanism = match (get("sasl.mechanism"), get("sasl.mechanisms")) {
            (Some(a), Some(b)) if !a.eq_ignore_ascii_case(&b) => {
                return Err(bad(
                    "sasl.mechanism",
                    format!("{a:?} contradicts sasl.mechanisms={b:?}"),
                ))
            }
            (a, b) => a.or(b),
        };
        if let Some(m) = mechanism {
            s.mechanism = Some(m.parse().map_err(|e| bad("sasl.mechanism", message(e)))?);
        }
        s.username = get("sasl.username");
        s.password = pairs
            .iter()
            .rev()
            .find(|(k, _)| k == "sasl.password")
            .map(|(_, v)| v.clone());
        if let Some(jaas) = get("sasl.jaas.config") {
            let login = parse_jaas(&jaas).map_err(|why| bad("sasl.jaas.config", why))?;
            match (login.module, s.mechanism) {
                (LoginModule::Plain, None) => s.mechanism = Some(SaslMechanism::Plain),
                (LoginModule::Plain, Some(SaslMechanism::Plain)) => {}
                (
                    LoginModule::Scram,
                    Some(SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512),
                ) => {}
                (LoginModule::Scram, None) => {
                    return Err(bad(
                        "sasl.jaas.config",
                        "ScramLoginModule needs sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512"
                            .into(),
                    ))
                }
                (module, Some(m)) => {
                    return Err(bad(
                        "sasl.jaas.config",
                        format!("{} does not fit sasl.mechanism={m}", module.class()),
                    ))
                }
            }
            for (field, key, value) in [
                (&mut s.username, "sasl.username", login.username),
                (&mut s.password, "sasl.password", login.password),
            ] {
                match (field.as_deref(), value) {
                    (Some(a), Some(b)) if a != b => {
                        return Err(bad("sasl.jaas.config", format!("contradicts {key}")))
                    }
                    (None, v) => *field = v,
                    _ => {}
                }
            }
        }
        let pem_store = |location: &str, ty: &str| -> Result<Option<PathBuf>, CliError> {
            let Some(path) = get(location) else {
                return Ok(None);
            };
            match get(ty) {
                Some(t) if t.eq_ignore_ascii_case("PEM") => Ok(Some(PathBuf::from(path))),
                Some(t) => Err(bad(ty, format!("{t} is not supported (only PEM)"))),
                None => Err(bad(
                    location,
                    format!("is read only as PEM: set {ty}=PEM (JKS and PKCS12 stores are not supported)"),
                )),
            }
        };
        let one_of = |a: &str, va: Option<PathBuf>, b: &str, vb: Option<PathBuf>| match (va, vb) {
            (Some(x), Some(y)) if x != y => {
                Err(bad(a, format!("contradicts {b}; set one of them")))
            }
            (x, y) => Ok(x.or(y)),
        };
        s.ca = one_of(
            "ssl.ca.location",
            get("ssl.ca.location").map(PathBuf::from),
            "ssl.truststore.location",
            pem_store("ssl.truststore.location", "ssl.truststore.type")?,
        )?;
        let keystore = pem_store("ssl.keystore.location", "ssl.keystore.type")?;
        s.cert = one_of(
            "ssl.certificate.location",
            get("ssl.certificate.location").map(PathBuf::from),
            "ssl.keystore.location",
            keystore.clone(),
        )?;
        s.key = one_of(
            "ssl.key.location",
            get("ssl.key.location").map(PathBuf::from),
            "ssl.keystore.location",
            keystore,
        )?;
        if let Some(v) = get("ssl.endpoint.identification.algorithm") {
            s.verify_hostname = Some(match v.to_ascii_lowercase().as_str() {
                "https" => true,
                "" | "none" => false,
                _ => {
                    return Err(bad(
                        "ssl.endpoint.identification.algorithm",
                        format!("{v:?} is not https or none"),
                    ))
                }
            });
        }
        Ok(s)
    }
}

/// Parses Java `.properties` text into `(key, value)` pairs, in order.
pub fn parse(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let line = first.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes.
        let mut logical = String::from(line);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key(&logical);
        out.push((unescape(key), unescape(value)));
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace.
fn split_key(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let i = i.min(line.len());
    let key = &line[..i];
    let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 4 => {
                        out.push(ch);
                        for _ in 0..4 {
                            chars.next();
                        }
                    }
                    _ => out.push('u'),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// The login modules `sasl.jaas.config` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoginModule {
    Plain,
    Scram,
}

impl LoginModule {
    fn class(self) -> &'static str {
        match self {
            LoginModule::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            LoginModule::Scram => "org.apache.kafka.common.security.scram.ScramLoginModule",
        }
    }
}

/// What a `sasl.jaas.config` value says.
#[derive(Debug, PartialEq, Eq)]
struct JaasLogin {
    module: LoginModule,
    username: Option<String>,
    password: Option<String>,
}

/// Parses `Class flag key="value" ... ;` (one login module, as Kafka
/// clients take it).
fn parse_jaas(text: &str) -> Result<JaasLogin, String> {
    let mut rest = text.trim();
    let take_word = |rest: &mut &str| -> String {
        let s = rest.trim_start();
        let end = s
            .find(|c: char| c.is_whitespace() || c == ';' || c == '=')
            .unwrap_or(s.len());
        let word = s[..end].to_string();
        *rest = &s[end..];
        word
    };
    let class = take_word(&mut rest);
    let module = match class.as_str() {
        c if c == LoginModule::Plain.class() => LoginModule::Plain,
        c if c == LoginModule::Scram.class() => LoginModule::Scram,
        "" => return Err("no login module".into()),
        other => {
            return Err(format!(
                "login module {other} is not supported (PlainLoginModule or ScramLoginModule)"
            ))
        }
    };
    let flag = take_word(&mut rest);
    if !["required", "requisite", "sufficient", "optional"]
        .contains(&flag.to_ascii_lowercase().as_str())
    {
        return Err(format!(
            "expected a control flag (required) after {class}, got {flag:?}"
        ));
    }
    let mut login = JaasLogin {
        module,
        username: None,
        password: None,
    };
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(';') {
            if !after.trim().is_empty() {
                return Err("only one login module is supported".into());
            }
            return Ok(login);
        }
        if rest.is_empty() {
            return Err("missing ';' at the end".into());
        }
        let key = take_word(&mut rest);
        rest = rest
            .trim_start()
            .strip_prefix('=')
            .ok_or_else(|| format!("expected '=' after option {key:?}"))?
            .trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("unterminated quote in option {key:?}"))?;
            rest = &quoted[end..];
            value
        } else {
            take_word(&mut rest)
        };
        match key.as_str() {
            "username" => login.username = Some(value),
            "password" => login.password = Some(value),
            other => {
                return Err(format!(
                    "option {other:?} is not supported (username, password)"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> Result<FileSettings, String> {
        FileSettings::from_pairs(&parse(text), "client.properties").map_err(|e| e.to_string())
    }

    #[test]
    fn properties_syntax() {
        let pairs = parse(
            "# comment\n! also a comment\n\n  a=1\nb : two words \nc three\nd=x\\\n    y\ne=\\u0041\\t\\=\\\\\nf\n",
        );
        let want: Vec<(String, String)> = [
            ("a", "1"),
            ("b", "two words "),
            ("c", "three"),
            ("d", "xy"),
            ("e", "A\t=\\"),
            ("f", ""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn librdkafka_names() {
        let s = settings(
            "security.protocol=sasl_ssl\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=s3 cret\n\
             ssl.ca.location=/pki/ca.pem\nssl.certificate.location=/pki/c.pem\nssl.key.location=/pki/c.key\n\
             ssl.endpoint.identification.algorithm=none\n",
        )
        .unwrap();
        assert_eq!(
            s,
            FileSettings {
                protocol: Some(SecurityProtocol::SaslSsl),
                mechanism: Some(SaslMechanism::ScramSha512),
                username: Some("alice".into()),
                password: Some("s3 cret".into()),
                ca: Some("/pki/ca.pem".into()),
                cert: Some("/pki/c.pem".into()),
                key: Some("/pki/c.key".into()),
                verify_hostname: Some(false),
            }
        );
        assert_eq!(
            settings("ssl.endpoint.identification.algorithm=https")
                .unwrap()
                .verify_hostname,
            Some(true)
        );
        assert_eq!(
            settings("ssl.endpoint.identification.algorithm=")
                .unwrap()
                .verify_hostname,
            Some(false)
        );
    }

    #[test]
    fn java_names_with_jaas_and_pem_stores() {
        let s = settings(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
               username=\"bob\" \\\n  password=\"p\\\\\"w;d\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location=/pki/ca.pem\n\
             ssl.keystore.type=pem\nssl.keystore.location=/pki/client.pem\n",
        )
        .unwrap();
        assert_eq!(s.mechanism, Some(SaslMechanism::ScramSha256));
        assert_eq!(s.username.as_deref(), Some("bob"));
        assert_eq!(s.password.as_deref(), Some("p\"w;d"));
        assert_eq!(s.ca, Some("/pki/ca.pem".into()));
        assert_eq!(s.cert, Some("/pki/client.pem".into()));
        assert_eq!(s.key, Some("/pki/client.pem".into()));
        // PlainLoginModule implies PLAIN; unquoted values work too.
        let s = settings(
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=carol password=pw;",
        )
        .unwrap();
        assert_eq!(s.mechanism, Some(SaslMechanism::Plain));
        assert_eq!(s.username.as_deref(), Some("carol"));
        assert_eq!(s.password.as_deref(), Some("pw"));
    }

    #[test]
    fn refusals_name_the_key() {
        for (text, want) in [
            ("sasl.pasword=x", "sasl.pasword: not supported; known keys"),
            ("ssl.key.password=x", "encrypted keys"),
            ("bootstrap.servers=a:1", "--bootstrap"),
            ("security.protocol=TLS", "security.protocol: unknown security protocol"),
            ("sasl.mechanism=GSSAPI", "unsupported SASL mechanism"),
            ("sasl.mechanism=PLAIN\nsasl.mechanisms=SCRAM-SHA-256", "contradicts"),
            ("ssl.truststore.location=/ts.jks", "ssl.truststore.type=PEM"),
            ("ssl.keystore.type=JKS\nssl.keystore.location=/ks.jks", "JKS is not supported"),
            ("ssl.ca.location=/a.pem\nssl.truststore.type=PEM\nssl.truststore.location=/b.pem", "set one of them"),
            ("ssl.endpoint.identification.algorithm=dns", "not https or none"),
            (
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b\";",
                "needs sasl.mechanism",
            ),
            (
                "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=a password=b;",
                "does not fit",
            ),
            (
                "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;",
                "not supported",
            ),
            (
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\"",
                "missing ';'",
            ),
            (
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" tokenauth=true;",
                "tokenauth",
            ),
            (
                "sasl.username=x\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";",
                "contradicts sasl.username",
            ),
        ] {
            let err = settings(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.starts_with("client.properties: "), "{err}");
        }
    }
}
