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
    kafka: magnetar_kafka::Server,
    pulsar: Option<magnetar_pulsar::Server>,
    http: Option<magnetar_http::Server>,
    maintenance: broker::maintenance::Maintenance,
    membership: Option<crate::membership::Membership>,
}

impl Node {
    /// Binds the listeners `config` names, opens the broker (recovering
    /// its logs on a blocking thread) and starts serving.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Node> {
        let listener = TcpListener::bind(config.kafka_addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.kafka_addr))?;
        let bound = listener.local_addr()?;
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
        let endpoint = match config.advertised_listener() {
            Some((host, port)) => Endpoint { host, port },
            None => Endpoint {
                host: advertised_host(bound),
                port: bound.port(),
            },
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
            let mut endpoints = std::collections::BTreeMap::new();
            endpoints.insert(
                broker::cluster::KAFKA_LISTENER.to_string(),
                format!("{}:{}", endpoint.host, endpoint.port),
            );
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
        let served = (|| -> anyhow::Result<_> {
            let kafka = magnetar_kafka::serve(listener, broker.clone())?;
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

    /// Where the Kafka listener is bound.
    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka.local_addr
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
        self.kafka.shutdown().await;
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
