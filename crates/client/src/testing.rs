//! A tiny fake broker on a real socket for unit tests: ApiVersions,
//! Metadata and FindCoordinator only, with the versions a test chooses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the fake broker advertises and holds.
#[derive(Clone)]
pub(crate) struct FakeSpec {
    /// `(api_key, min, max)` advertised.
    pub apis: Vec<(i16, i16, i16)>,
    /// Topics and their partition counts.
    pub topics: HashMap<String, i32>,
    /// Whether a Metadata request that allows it creates a missing topic.
    pub auto_create: bool,
    /// Whether every partition is without a leader (LEADER_NOT_AVAILABLE,
    /// leader -1), as while its broker is down in a cluster.
    pub leaderless: bool,
}

impl FakeSpec {
    /// A broker speaking ApiVersions v0–v`av`, Metadata v0–v`mv`,
    /// FindCoordinator v0–v`fv`.
    pub fn new(av: i16, mv: i16, fv: i16) -> FakeSpec {
        FakeSpec {
            apis: vec![
                (ApiKey::ApiVersions as i16, 0, av),
                (ApiKey::Metadata as i16, 0, mv),
                (ApiKey::FindCoordinator as i16, 0, fv),
            ],
            topics: HashMap::new(),
            auto_create: true,
            leaderless: false,
        }
    }

    pub fn topic(mut self, name: &str, partitions: i32) -> FakeSpec {
        self.topics.insert(name.to_string(), partitions);
        self
    }

    fn max(&self, key: ApiKey) -> i16 {
        self.apis
            .iter()
            .find(|a| a.0 == key as i16)
            .map_or(-1, |a| a.2)
    }
}

/// A running fake broker; requests seen are counted per API key.
pub(crate) struct FakeBroker {
    pub addr: String,
    pub requests: Arc<Mutex<Vec<(i16, i16)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeBroker {
    pub async fn start(spec: FakeSpec) -> FakeBroker {
        Self::start_on("127.0.0.1:0", spec).await
    }

    /// Starts on a given address (to come back on the same port).
    pub async fn start_on(addr: &str, spec: FakeSpec) -> FakeBroker {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(Mutex::new(spec));
        let (r, s, a) = (requests.clone(), state.clone(), addr.clone());
        let task = tokio::spawn(async move {
            // Owning the connections here means aborting this task closes
            // them all, like a broker going away.
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                conns.spawn(serve(sock, r.clone(), s.clone(), a.clone()));
            }
        });
        FakeBroker {
            addr,
            requests,
            task,
        }
    }

    /// How many requests of `key` arrived.
    pub fn count(&self, key: ApiKey) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == key as i16)
            .count()
    }

    /// The versions used for `key`.
    pub fn versions_used(&self, key: ApiKey) -> Vec<i16> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == key as i16)
            .map(|(_, v)| *v)
            .collect()
    }
}

async fn serve(
    mut sock: TcpStream,
    requests: Arc<Mutex<Vec<(i16, i16)>>>,
    state: Arc<Mutex<FakeSpec>>,
    addr: String,
) {
    loop {
        let Ok(len) = sock.read_i32().await else {
            return;
        };
        let mut buf = vec![0u8; len as usize];
        if sock.read_exact(&mut buf).await.is_err() {
            return;
        }
        let mut body = Bytes::from(buf);
        let key = (&body[..2]).get_i16();
        let version = (&body[2..4]).get_i16();
        let Ok(api) = ApiKey::try_from(key) else {
            return;
        };
        requests.lock().unwrap().push((key, version));
        let spec = state.lock().unwrap().clone();
        // Like Kafka: an ApiVersions above our range gets a v0 answer.
        let (resp_version, api_versions_fallback) =
            if api == ApiKey::ApiVersions && version > spec.max(api) {
                (0, true)
            } else if version > spec.max(api) {
                return;
            } else {
                (version, false)
            };
        let header = match RequestHeader::decode(&mut body, api.request_header_version(version)) {
            Ok(h) => h,
            Err(_) if api_versions_fallback => {
                RequestHeader::default().with_correlation_id((&body[4..8]).get_i32())
            }
            Err(_) => return,
        };
        let mut out = BytesMut::new();
        out.put_i32(0);
        let rh = ResponseHeader::default().with_correlation_id(header.correlation_id);
        let ok = match api {
            ApiKey::ApiVersions => {
                if !api_versions_fallback {
                    let _ = ApiVersionsRequest::decode(&mut body, version);
                }
                let resp = ApiVersionsResponse::default()
                    .with_error_code(if api_versions_fallback { 35 } else { 0 })
                    .with_api_keys(
                        spec.apis
                            .iter()
                            .map(|&(k, min, max)| {
                                ApiVersion::default()
                                    .with_api_key(k)
                                    .with_min_version(min)
                                    .with_max_version(max)
                            })
                            .collect(),
                    );
                rh.encode(&mut out, ApiVersionsResponse::header_version(resp_version))
                    .and_then(|_| resp.encode(&mut out, resp_version))
            }
            ApiKey::Metadata => {
                let Ok(req) = MetadataRequest::decode(&mut body, version) else {
                    return;
                };
                let resp = metadata(&req, version, &state, &addr);
                rh.encode(&mut out, MetadataResponse::header_version(version))
                    .and_then(|_| resp.encode(&mut out, version))
            }
            ApiKey::FindCoordinator => {
                let Ok(req) = FindCoordinatorRequest::decode(&mut body, version) else {
                    return;
                };
                let resp = find_coordinator(&req, version, &addr);
                rh.encode(&mut out, FindCoordinatorResponse::header_version(version))
                    .and_then(|_| resp.encode(&mut out, version))
            }
            _ => return,
        };
        if ok.is_err() {
            return;
        }
        let n = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&n.to_be_bytes());
        if sock.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn host_port(addr: &str) -> (StrBytes, i32) {
    let (h, p) = addr.rsplit_once(':').unwrap();
    (StrBytes::from_string(h.to_string()), p.parse().unwrap())
}

fn metadata(
    req: &MetadataRequest,
    version: i16,
    state: &Arc<Mutex<FakeSpec>>,
    addr: &str,
) -> MetadataResponse {
    let (host, port) = host_port(addr);
    let mut st = state.lock().unwrap();
    // v0-v3 have no flag: asking names a topic to create.
    let allow = version < 4 || req.allow_auto_topic_creation;
    let names: Vec<String> = match &req.topics {
        Some(t) if !(version == 0 && t.is_empty()) => t
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect(),
        _ => st.topics.keys().cloned().collect(),
    };
    let topics = names
        .into_iter()
        .map(|name| {
            if !st.topics.contains_key(&name) && allow && st.auto_create {
                st.topics.insert(name.clone(), 1);
            }
            let t = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
            match st.topics.get(&name) {
                None => t.with_error_code(3),
                Some(&n) => t.with_partitions(
                    (0..n)
                        .map(|p| {
                            MetadataResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(if st.leaderless { 5 } else { 0 })
                                .with_leader_id(BrokerId(if st.leaderless { -1 } else { 1 }))
                                .with_replica_nodes(vec![BrokerId(1)])
                                .with_isr_nodes(vec![BrokerId(1)])
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(host)
            .with_port(port)])
        .with_controller_id(BrokerId(if version >= 1 { 1 } else { -1 }))
        .with_topics(topics)
}

fn find_coordinator(
    req: &FindCoordinatorRequest,
    version: i16,
    addr: &str,
) -> FindCoordinatorResponse {
    let (host, port) = host_port(addr);
    if version >= 4 {
        FindCoordinatorResponse::default().with_coordinators(
            req.coordinator_keys
                .iter()
                .map(|k| {
                    Coordinator::default()
                        .with_key(k.clone())
                        .with_node_id(BrokerId(1))
                        .with_host(host.clone())
                        .with_port(port)
                })
                .collect(),
        )
    } else {
        FindCoordinatorResponse::default()
            .with_node_id(BrokerId(1))
            .with_host(host)
            .with_port(port)
    }
}
