//! One Magnetar node inside a process: the broker core opened on its data
//! directory, its Kafka, Pulsar and HTTP listeners bound (port 0 = a free
//! port), and background maintenance, until [`Node::shutdown`].
//!
//! `magnetar standalone` runs one of these until a signal; tests start
//! several in one process (each with its own data directory and ports) to
//! drive multi-node scenarios without spawning a binary per node, and keep
//! process-spawning tests for signals, crashes and real clients.

use std::net::SocketAddr;
use std::sync::Arc;

use broker::config::BrokerConfig;
use broker::{Broker, Endpoint};
use tokio::net::TcpListener;

/// A running node.
pub struct Node {
    broker: Arc<Broker>,
    /// The Kafka listeners, by name, the first (the primary) first.
    kafka: Vec<(String, magnetar_kafka::Server)>,
    /// The Pulsar listeners: plain, TLS, either or none.
    pulsar: Vec<magnetar_pulsar::Server>,
    pulsar_addrs: (Option<SocketAddr>, Option<SocketAddr>),
    /// The HTTP listeners: plain, HTTPS, either or none.
    http: Vec<magnetar_http::Server>,
    http_addrs: (Option<SocketAddr>, Option<SocketAddr>),
    maintenance: broker::maintenance::Maintenance,
    membership: broker::cluster::Membership,
    /// Stops the certificate reloader.
    reloader: Option<(
        tokio::sync::watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    )>,
}

impl Node {
    /// Binds the listeners `config` names, opens the broker (recovering
    /// its logs on a blocking thread) and starts serving.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Node> {
        for (key, why) in config.unenforced_settings() {
            tracing::warn!("{key} is set but not acted on: {why}");
        }
        let specs = config.kafka_listeners()?;
        let mut kafka_listeners = Vec::new();
        for spec in specs {
            let l = TcpListener::bind(spec.bind).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot listen on {} (listener {}): {e}",
                    spec.bind,
                    spec.name
                )
            })?;
            kafka_listeners.push((spec, l));
        }
        let tokens = tokens(&config).await?;
        let tls = tls_context(&config, &kafka_listeners).await?;
        let securities = listener_securities(&config, &kafka_listeners, &tls, &tokens)?;
        let mut kafka_endpoints = std::collections::BTreeMap::new();
        for (spec, l) in &kafka_listeners {
            let bound = l.local_addr()?;
            let e = match &spec.advertised {
                Some((host, port)) => Endpoint {
                    host: host.clone(),
                    port: *port,
                },
                None => Endpoint {
                    host: advertised_host(bound),
                    port: bound.port(),
                },
            };
            kafka_endpoints.insert(spec.registry_key(), e);
        }
        let endpoint = kafka_endpoints[&kafka_listeners[0].0.registry_key()].clone();
        let pulsar_listener = match config.pulsar_addr {
            Some(a) => Some(
                TcpListener::bind(a)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {a} (--pulsar-addr): {e}"))?,
            ),
            None => None,
        };
        let http_listener = match config.http_addr {
            Some(a) => Some(
                TcpListener::bind(a)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {a} (--http-addr): {e}"))?,
            ),
            None => None,
        };
        let pulsar_tls_listener = bind_key(
            config.pulsar_tls_listen_address(),
            "pulsar.tls.listen.address",
        )
        .await?;
        let https_listener =
            bind_key(config.http_tls_listen_address(), "http.tls.listen.address").await?;
        let pulsar_tls_advertised = match &pulsar_tls_listener {
            Some(l) => {
                let bound = l.local_addr()?;
                Some(match config.pulsar_tls_advertised_address() {
                    Some((host, port)) => format!("{host}:{port}"),
                    None => format!("{}:{}", advertised_host(bound), bound.port()),
                })
            }
            None => None,
        };
        let https_advertised = match &https_listener {
            Some(l) => {
                let bound = l.local_addr()?;
                Some(format!("{}:{}", advertised_host(bound), bound.port()))
            }
            None => None,
        };
        let pulsar_advertised = match &pulsar_listener {
            Some(l) => {
                let bound = l.local_addr()?;
                Some(match config.pulsar_advertised_address() {
                    Some((host, port)) => format!("{host}:{port}"),
                    None => format!("{}:{}", advertised_host(bound), bound.port()),
                })
            }
            None => None,
        };
        let http_advertised = match &http_listener {
            Some(l) => {
                let bound = l.local_addr()?;
                Some(format!("{}:{}", advertised_host(bound), bound.port()))
            }
            None => None,
        };
        let (broker, membership) = {
            let mut endpoints: std::collections::BTreeMap<String, String> = kafka_endpoints
                .iter()
                .map(|(k, e)| (k.clone(), format!("{}:{}", e.host, e.port)))
                .collect();
            if let Some(a) = &pulsar_advertised {
                endpoints.insert(broker::cluster::PULSAR_LISTENER.to_string(), a.clone());
            }
            if let Some(a) = &pulsar_tls_advertised {
                endpoints.insert(broker::cluster::PULSAR_TLS_LISTENER.to_string(), a.clone());
            }
            if let Some(a) = &http_advertised {
                endpoints.insert(broker::cluster::HTTP_LISTENER.to_string(), a.clone());
            }
            if let Some(a) = &https_advertised {
                endpoints.insert(broker::cluster::HTTPS_LISTENER.to_string(), a.clone());
            }
            broker::cluster::join(config, endpoint, endpoints).await?
        };
        broker.set_listener_endpoints(kafka_endpoints);
        // A quorum of one inside this process has no other broker to reach.
        if !membership.in_process() {
            match magnetar_kafka::peers::KafkaPeers::new(&broker.config()) {
                Ok(p) => {
                    broker.set_txn_peers(p);
                    // Connections of their own: replica fetches long-poll,
                    // and must not hold up transaction markers behind them.
                    match magnetar_kafka::peers::KafkaPeers::new(&broker.config()) {
                        Ok(fetchers) => broker.start_replication(fetchers),
                        Err(why) => tracing::warn!("partition replication is unavailable: {why}"),
                    }
                }
                Err(why) => tracing::warn!(
                    "transactions spanning brokers and partition replication are unavailable on this node: {why}"
                ),
            }
        }
        let served = (|| -> anyhow::Result<_> {
            let mut kafka = Vec::new();
            for ((spec, l), security) in kafka_listeners.into_iter().zip(securities) {
                kafka.push((
                    spec.name.clone(),
                    magnetar_kafka::serve_listener(l, broker.clone(), security)?,
                ));
            }
            let urls = magnetar_pulsar::lookup::ServiceUrls {
                plain: pulsar_advertised.as_ref().map(|a| format!("pulsar://{a}")),
                tls: pulsar_tls_advertised
                    .as_ref()
                    .map(|a| format!("pulsar+ssl://{a}")),
            };
            let mut pulsar_listeners = Vec::new();
            if let Some(l) = pulsar_listener {
                pulsar_listeners.push(magnetar_pulsar::PulsarListener {
                    listener: l,
                    tls: None,
                });
            }
            if let Some(l) = pulsar_tls_listener {
                pulsar_listeners.push(magnetar_pulsar::PulsarListener {
                    listener: l,
                    tls: Some(need_tls(&tls, "pulsar.tls.listen.address")?),
                });
            }
            let (pulsar, pulsar_front_end) = if pulsar_listeners.is_empty() {
                (Vec::new(), None)
            } else {
                log_anonymous(
                    "Pulsar",
                    "pulsar",
                    broker.config().pulsar_authentication().is_some(),
                    broker.config().pulsar_anonymous_principal(),
                    broker.config().authorizer().is_some(),
                );
                let security = magnetar_pulsar::PulsarSecurity {
                    authentication: broker.config().pulsar_authentication(),
                    anonymous: broker.config().pulsar_anonymous_principal().map(Arc::new),
                    tokens: tokens.clone(),
                    failed_delay: broker.config().failed_authentication_delay(),
                };
                let (servers, front_end) = magnetar_pulsar::serve(
                    pulsar_listeners,
                    broker.clone(),
                    urls.clone(),
                    security,
                )?;
                let front_end: Arc<dyn magnetar_pulsar::admin::Connections> = Arc::new(front_end);
                (servers, Some(front_end))
            };
            let mut http_listeners = Vec::new();
            if let Some(l) = http_listener {
                http_listeners.push(magnetar_http::HttpListener {
                    listener: l,
                    tls: None,
                });
            }
            if let Some(l) = https_listener {
                http_listeners.push(magnetar_http::HttpListener {
                    listener: l,
                    tls: Some(need_tls(&tls, "http.tls.listen.address")?),
                });
            }
            let http = if http_listeners.is_empty() {
                Vec::new()
            } else {
                let peer_tls = match broker.config().tls_settings() {
                    Some(s) => broker::security::tls::trusting(&s)
                        .map_err(|e| anyhow::anyhow!("TLS to other brokers: {e}"))?,
                    None => None,
                };
                log_anonymous(
                    "HTTP",
                    "http",
                    broker.config().http_authentication().is_some(),
                    broker.config().http_anonymous_principal(),
                    broker.config().authorizer().is_some(),
                );
                let config = magnetar_http::HttpConfig {
                    peer_tls,
                    pulsar_url: urls.plain,
                    pulsar_url_tls: urls.tls,
                    pulsar: pulsar_front_end,
                    http_url: format!("http://{}", http_advertised.clone().unwrap_or_default()),
                    https_url: https_advertised.as_ref().map(|a| format!("https://{a}")),
                    security: magnetar_http::auth::HttpSecurity {
                        methods: broker.config().http_authentication(),
                        anonymous: broker.config().http_anonymous_principal().map(Arc::new),
                        tokens: tokens.clone(),
                        failed_delay: broker.config().failed_authentication_delay(),
                        basic: Arc::default(),
                    },
                };
                magnetar_http::serve(http_listeners, broker.clone(), config)?
            };
            Ok((kafka, pulsar, http))
        })();
        let (kafka, pulsar, http) = match served {
            Ok(s) => s,
            Err(e) => {
                // Stop following the cluster before giving up.
                let mut m = membership;
                m.stop_tasks().await;
                m.shutdown_controller().await;
                return Err(e);
            }
        };
        let maintenance = broker::maintenance::spawn(broker.clone());
        let reloader = tls.clone().map(|t| {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let task = tokio::spawn(broker::security::tls::reload_loop(t, stopped));
            (stop, task)
        });
        let addrs = |servers: Vec<(bool, SocketAddr)>| {
            (
                servers.iter().find(|(t, _)| !t).map(|(_, a)| *a),
                servers.iter().find(|(t, _)| *t).map(|(_, a)| *a),
            )
        };
        let pulsar_addrs = addrs(tagged(&pulsar, pulsar_tls_advertised.is_some()));
        let http_addrs = addrs(tagged(&http, https_advertised.is_some()));
        Ok(Node {
            broker,
            kafka,
            pulsar,
            pulsar_addrs,
            http,
            http_addrs,
            maintenance,
            membership,
            reloader,
        })
    }

    /// Where this node's controller listens, in combined mode.
    pub fn controller_addr(&self) -> Option<String> {
        self.membership.controller_addr()
    }

    /// Resolves, with why, when a later registration of this node id
    /// replaced this node's in its cluster: the node must be shut down.
    /// Never resolves for a standalone node.
    pub async fn superseded(&self) -> String {
        self.membership.superseded().await
    }

    /// The broker core.
    pub fn broker(&self) -> Arc<Broker> {
        self.broker.clone()
    }

    /// Where the primary (first) Kafka listener is bound.
    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka[0].1.local_addr
    }

    /// Every Kafka listener's name and bound address, the primary first.
    pub fn kafka_listeners(&self) -> Vec<(String, SocketAddr)> {
        self.kafka
            .iter()
            .map(|(n, s)| (n.clone(), s.local_addr))
            .collect()
    }

    /// Where the Pulsar listener is bound, if there is one.
    pub fn pulsar_addr(&self) -> Option<SocketAddr> {
        self.pulsar_addrs.0
    }

    /// Where the Pulsar TLS (`pulsar+ssl`) listener is bound, if there is one.
    pub fn pulsar_tls_addr(&self) -> Option<SocketAddr> {
        self.pulsar_addrs.1
    }

    /// Where the HTTP service is bound, if there is one.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addrs.0
    }

    /// Where the HTTPS service is bound, if there is one.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.http_addrs.1
    }

    /// Stops accepting, closes every connection, stops the background
    /// work and waits for its file work to end, then flushes and closes the
    /// logs and the metadata (on a blocking thread).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        // Kafka's order: the controlled shutdown first, while this node
        // still serves and follows the metadata, so its partitions have
        // new leaders (and its replicas refuse writes) before its
        // listeners close; clients move on at once instead of waiting for
        // the listeners to drain.
        let mut membership = self.membership;
        membership.controlled_shutdown(&self.broker).await;
        for h in self.http {
            h.shutdown().await;
        }
        for p in self.pulsar {
            p.shutdown().await;
        }
        for (_, k) in self.kafka {
            k.shutdown().await;
        }
        self.maintenance.stop().await;
        if let Some((stop, task)) = self.reloader {
            let _ = stop.send(true);
            let _ = task.await;
        }
        membership.stop_tasks().await;
        let b = self.broker;
        tokio::task::spawn_blocking(move || b.shutdown()).await??;
        membership.shutdown_controller().await;
        Ok(())
    }
}

/// The TLS material (read once, shared by every TLS listener of any front
/// end), if any listener is TLS.
async fn tls_context(
    config: &BrokerConfig,
    kafka: &[(broker::security::KafkaListener, TcpListener)],
) -> anyhow::Result<Option<Arc<broker::security::tls::TlsContext>>> {
    let wanted = kafka
        .iter()
        .find(|(l, _)| l.protocol.tls())
        .map(|(l, _)| format!("listener {} is {}", l.name, l.protocol))
        .or_else(|| {
            config
                .pulsar_tls_listen_address()
                .map(|_| "pulsar.tls.listen.address is set".to_string())
        })
        .or_else(|| {
            config
                .http_tls_listen_address()
                .map(|_| "http.tls.listen.address is set".to_string())
        });
    let Some(why) = wanted else {
        return Ok(None);
    };
    let settings = config
        .tls_settings()
        .ok_or_else(|| anyhow::anyhow!("{why} but ssl.keystore.location is not set"))?;
    let ctx =
        tokio::task::spawn_blocking(move || broker::security::tls::TlsContext::load(settings))
            .await?
            .map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
    Ok(Some(Arc::new(ctx)))
}

fn need_tls(
    tls: &Option<Arc<broker::security::tls::TlsContext>>,
    key: &str,
) -> anyhow::Result<Arc<broker::security::tls::TlsContext>> {
    tls.clone()
        .ok_or_else(|| anyhow::anyhow!("{key} is set but ssl.keystore.location is not"))
}

/// Binds the listener a `host:port` key names, if set.
async fn bind_key(addr: Option<(String, u16)>, key: &str) -> anyhow::Result<Option<TcpListener>> {
    let Some((host, port)) = addr else {
        return Ok(None);
    };
    let l = TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {host}:{port} ({key}): {e}"))?;
    Ok(Some(l))
}

/// Each server with whether it is the TLS one (the last, when there is
/// one).
fn tagged<S: HasAddr>(servers: &[S], has_tls: bool) -> Vec<(bool, SocketAddr)> {
    let n = servers.len();
    servers
        .iter()
        .enumerate()
        .map(|(i, s)| (has_tls && i + 1 == n, s.addr()))
        .collect()
}

trait HasAddr {
    fn addr(&self) -> SocketAddr;
}

impl HasAddr for magnetar_pulsar::Server {
    fn addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl HasAddr for magnetar_http::Server {
    fn addr(&self) -> SocketAddr {
        self.local_addr
    }
}

/// What each Kafka listener asks of its clients: TLS material, SASL
/// mechanisms, session lifetime.
fn listener_securities(
    config: &BrokerConfig,
    listeners: &[(broker::security::KafkaListener, TcpListener)],
    tls: &Option<Arc<broker::security::tls::TlsContext>>,
    tokens: &Option<Arc<broker::security::token::TokenValidator>>,
) -> anyhow::Result<Vec<Arc<magnetar_kafka::ListenerSecurity>>> {
    if listeners.iter().any(|(l, _)| l.protocol.sasl())
        && broker::security::Mechanism::enabled(config)
            .contains(&broker::security::Mechanism::OAuthBearer)
        && tokens.is_none()
    {
        anyhow::bail!(
            "sasl.enabled.mechanisms has OAUTHBEARER but no token key is set (sasl.oauthbearer.jwks.endpoint.url, token.secret.key or token.public.key)"
        );
    }
    Ok(listeners
        .iter()
        .map(|(l, _)| {
            Arc::new(magnetar_kafka::ListenerSecurity {
                name: l.name.clone(),
                registry_key: Arc::from(l.registry_key()),
                protocol: l.protocol,
                mechanisms: broker::security::Mechanism::enabled(config),
                reauth: config.max_reauth(),
                failed_delay: config.failed_authentication_delay(),
                tls: l.protocol.tls().then(|| tls.clone()).flatten(),
                tokens: tokens.clone(),
            })
        })
        .collect())
}

/// The bearer-token validator, if token keys are configured (read on the
/// blocking pool).
async fn tokens(
    config: &BrokerConfig,
) -> anyhow::Result<Option<Arc<broker::security::token::TokenValidator>>> {
    let settings = config.token_settings().map_err(|e| anyhow::anyhow!(e))?;
    let v = tokio::task::spawn_blocking(move || {
        broker::security::token::TokenValidator::load(&settings)
    })
    .await?
    .map_err(|e| anyhow::anyhow!("bearer tokens: {e}"))?;
    Ok(v.map(Arc::new))
}

/// With a wildcard listen address, clients need a name that reaches us.
fn advertised_host(bound: SocketAddr) -> String {
    if !bound.ip().is_unspecified() {
        return bound.ip().to_string();
    }
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        if let Ok(h) = std::str::from_utf8(&buf[..end]) {
            if !h.is_empty() {
                return h.to_string();
            }
        }
    }
    "localhost".to_string()
}

/// Says once at start, when an authorizer makes it matter, what a front
/// end's clients without credentials are: the principal named for them,
/// or refused (every client, when the front end authenticates no one).
fn log_anonymous(
    front_end: &str,
    prefix: &str,
    authenticates: bool,
    anonymous: Option<broker::security::Principal>,
    authorizer: bool,
) {
    match anonymous {
        _ if !authorizer => {}
        Some(p) => tracing::info!(
            "{front_end} clients without credentials act as {p} ({prefix}.anonymous.principal)"
        ),
        None if !authenticates => tracing::warn!(
            "every {front_end} client is refused: an authorizer is set, {prefix}.authentication.enabled \
             is off and {prefix}.anonymous.principal is empty (an unauthenticated {front_end} client \
             is not the Kafka listeners' User:ANONYMOUS); enable {prefix}.authentication.enabled or \
             name the principal of clients without credentials in {prefix}.anonymous.principal"
        ),
        None => {}
    }
}
