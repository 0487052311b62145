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
    pulsar: Option<magnetar_pulsar::Server>,
    http: Option<magnetar_http::Server>,
    maintenance: broker::maintenance::Maintenance,
    membership: Option<crate::membership::Membership>,
}

impl Node {
    /// Binds the listeners `config` names, opens the broker (recovering
    /// its logs on a blocking thread) and starts serving.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Node> {
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
        let securities = listener_securities(&config, &kafka_listeners).await?;
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
        let clustered = !config.string_value("controller.quorum.voters").is_empty();
        let (broker, membership) = if clustered {
            let mut endpoints: std::collections::BTreeMap<String, String> = kafka_endpoints
                .iter()
                .map(|(k, e)| (k.clone(), format!("{}:{}", e.host, e.port)))
                .collect();
            if let Some(a) = &pulsar_advertised {
                endpoints.insert(broker::cluster::PULSAR_LISTENER.to_string(), a.clone());
            }
            if let Some(a) = &http_advertised {
                endpoints.insert(broker::cluster::HTTP_LISTENER.to_string(), a.clone());
            }
            let (b, m) = crate::membership::join(config, endpoint, endpoints).await?;
            (b, Some(m))
        } else {
            let b = tokio::task::spawn_blocking(move || Broker::open(config, endpoint)).await??;
            (b, None)
        };
        broker.set_listener_endpoints(kafka_endpoints);
        let served = (|| -> anyhow::Result<_> {
            let mut kafka = Vec::new();
            for ((spec, l), security) in kafka_listeners.into_iter().zip(securities) {
                kafka.push((
                    spec.name.clone(),
                    magnetar_kafka::serve_listener(l, broker.clone(), security)?,
                ));
            }
            let mut pulsar_url = None;
            let mut pulsar_front_end = None;
            let pulsar = match pulsar_listener {
                Some(l) => {
                    let advertised = pulsar_advertised.clone().unwrap_or_default();
                    pulsar_url = Some(format!("pulsar://{advertised}"));
                    let (server, front_end) =
                        magnetar_pulsar::serve(l, broker.clone(), advertised)?;
                    pulsar_front_end = Some(front_end);
                    Some(server)
                }
                None => None,
            };
            let http = match http_listener {
                Some(l) => {
                    let config = magnetar_http::HttpConfig {
                        pulsar_url,
                        pulsar: pulsar_front_end,
                        http_url: format!("http://{}", http_advertised.clone().unwrap_or_default()),
                    };
                    Some(magnetar_http::serve(l, broker.clone(), config)?)
                }
                None => None,
            };
            Ok((kafka, pulsar, http))
        })();
        let (kafka, pulsar, http) = match served {
            Ok(s) => s,
            Err(e) => {
                // Stop following the cluster before giving up.
                if let Some(mut m) = membership {
                    m.stop_tasks().await;
                    m.shutdown_controller().await;
                }
                return Err(e);
            }
        };
        let maintenance = broker::maintenance::spawn(broker.clone());
        Ok(Node {
            broker,
            kafka,
            pulsar,
            http,
            maintenance,
            membership,
        })
    }

    /// Where this node's controller listens, in combined mode.
    pub fn controller_addr(&self) -> Option<String> {
        self.membership.as_ref().and_then(|m| m.controller_addr())
    }

    /// Resolves, with why, when a later registration of this node id
    /// replaced this node's in its cluster: the node must be shut down.
    /// Never resolves for a standalone node.
    pub async fn superseded(&self) -> String {
        match &self.membership {
            Some(m) => m.superseded().await,
            None => std::future::pending().await,
        }
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
        self.pulsar.as_ref().map(|p| p.local_addr)
    }

    /// Where the HTTP service is bound, if there is one.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|h| h.local_addr)
    }

    /// Stops accepting, closes every connection, stops the background
    /// work and waits for its file work to end, then flushes and closes the
    /// logs and the metadata (on a blocking thread).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        if let Some(h) = self.http {
            h.shutdown().await;
        }
        if let Some(p) = self.pulsar {
            p.shutdown().await;
        }
        for (_, k) in self.kafka {
            k.shutdown().await;
        }
        self.maintenance.stop().await;
        let mut membership = self.membership;
        if let Some(m) = membership.as_mut() {
            m.stop_tasks().await;
            m.controlled_shutdown().await;
        }
        let b = self.broker;
        tokio::task::spawn_blocking(move || b.shutdown()).await??;
        if let Some(m) = membership {
            m.shutdown_controller().await;
        }
        Ok(())
    }
}

/// What each Kafka listener asks of its clients: TLS material (read once,
/// shared by the TLS listeners), SASL mechanisms, session lifetime.
async fn listener_securities(
    config: &BrokerConfig,
    listeners: &[(broker::security::KafkaListener, TcpListener)],
) -> anyhow::Result<Vec<Arc<magnetar_kafka::ListenerSecurity>>> {
    let tls = match listeners.iter().find(|(l, _)| l.protocol.tls()) {
        None => None,
        Some((l, _)) => {
            let settings = config.tls_settings().ok_or_else(|| {
                anyhow::anyhow!(
                    "listener {} is {} but ssl.keystore.location is not set",
                    l.name,
                    l.protocol
                )
            })?;
            let ctx = tokio::task::spawn_blocking(move || {
                broker::security::tls::TlsContext::load(settings)
            })
            .await?
            .map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
            Some(Arc::new(ctx))
        }
    };
    let tokens = tokens(config).await?;
    if listeners.iter().any(|(l, _)| l.protocol.sasl())
        && config
            .sasl_mechanisms()
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
                mechanisms: config.sasl_mechanisms(),
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
