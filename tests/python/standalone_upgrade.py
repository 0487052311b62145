"""A data directory written by `magnetar standalone` before it ran a quorum
of one (its metadata in cluster-metadata.json), opened by this version:
everything the old version acknowledged is still there, seen through
independent clients (librdkafka via confluent-kafka, the Pulsar C++ client,
plain HTTP). Read-only apart from one new record, so it can run again after
a restart.

usage: standalone_upgrade.py KAFKA PULSAR_URL HTTP_URL FIXTURE_JSON
FIXTURE_JSON: {"cluster_id": ..., "topic_ids": {name: uuid},
"producer_id_limit": N} as the fixture
was made (crates/server/tests/fixtures/make_standalone_file_metadata.py).
"""
import json
import sys
import time
import urllib.request
import uuid

from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, Producer,
                             TopicCollection, TopicPartition)
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
import pulsar

kafka, pulsar_url, http, fixture = sys.argv[1:5]
fixture = json.loads(fixture)
admin = AdminClient({"bootstrap.servers": kafka})

# The cluster and every topic keep their ids.
cluster = admin.describe_cluster().result(30)
assert cluster.cluster_id == fixture["cluster_id"], cluster.cluster_id
names = sorted(fixture["topic_ids"])
described = admin.describe_topics(TopicCollection(names))
for name, f in described.items():
    d = f.result(30)
    mask = (1 << 64) - 1
    got = ((d.topic_id.get_most_significant_bits() & mask) << 64) | (
        d.topic_id.get_least_significant_bits() & mask)
    assert got == uuid.UUID(fixture["topic_ids"][name]).int, (name, d.topic_id)
    assert d.is_internal == (name == "__consumer_offsets"), name
assert len(described["orders"].result().partitions) == 3

# The group's committed offsets: 30 on the partition the 30 records went to,
# 0 on the two it found empty.
committed = admin.list_consumer_group_offsets(
    [ConsumerGroupTopicPartitions("billing")])["billing"].result(30)
offsets = {p.partition: p.offset for p in committed.topic_partitions if p.topic == "orders"}
assert offsets == {0: 0, 1: 30, 2: 0}, offsets

# A member of the group gets exactly the 5 records produced after its
# commit (with the offsets lost it would start from the earliest: 35).
c = Consumer({"bootstrap.servers": kafka, "group.id": "billing",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe(["orders"])
got = []
deadline = time.time() + 60
while time.time() < deadline and len(got) < 5:
    m = c.poll(1.0)
    if m is not None and m.error() is None:
        got.append(m.value().decode())
quiet = time.time() + 3
while time.time() < quiet:
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        got.append(m.value().decode())
c.close()
assert sorted(got) == [f"late-{i}" for i in range(5)], got

# Every record, read from the start without a group.
r = Consumer({"bootstrap.servers": kafka, "group.id": "reader-" + uuid.uuid4().hex,
              "enable.auto.commit": False})
r.assign([TopicPartition("orders", p, 0) for p in range(3)])
values = set()
every = {f"order-{i}" for i in range(30)} | {f"late-{i}" for i in range(5)}
deadline = time.time() + 60
while time.time() < deadline and not every <= values:
    m = r.poll(1.0)
    if m is not None and m.error() is None:
        values.add(m.value().decode())
r.close()
assert every <= values, values

# Configs: the topic's override, the broker's dynamic key.
topic_res = ConfigResource(ResourceType.TOPIC, "orders")
broker_res = ConfigResource(ResourceType.BROKER, "1")
for res, key, want in [(topic_res, "retention.ms", "86400000"),
                       (broker_res, "log.cleaner.backoff.ms", "20000")]:
    entries = admin.describe_configs([res])[res].result(30)
    assert entries[key].value == want, (key, entries[key].value)

# The SCRAM credential.
creds = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
infos = [(i.mechanism.name, i.iterations) for i in creds.scram_credential_infos]
assert infos == [("SCRAM_SHA_256", 4096)], infos

# The ACL and the client quota (no client library offers quotas but
# kafka-python's protocol classes).
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                   ResourcePatternType)
everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
acls = [(a.name, a.principal, a.operation.name, a.permission_type.name)
        for a in admin.describe_acls(everything).result(30)]
assert acls == [("secret", "User:alice", "READ", "ALLOW")], acls
import kafka as kp
from kafka.protocol.admin import DescribeClientQuotasRequest as D
ka = kp.KafkaAdminClient(bootstrap_servers=kafka)
d = D(version=0, strict=False,
      components=[D.ComponentData(entity_type="client-id", match_type=2, match=None)])
r = ka._manager.run(ka._send_request_to_controller, d, lambda r: [], True)
quotas = [([(e.entity_type, e.entity_name) for e in q.entity], [(v.key, v.value) for v in q.values])
          for q in r.entries]
assert quotas == [([("client-id", "app-1")], [("producer_byte_rate", 1048576.0)])], quotas
ka.close()

# Tenants and namespaces over HTTP.
def get(path):
    return json.loads(urllib.request.urlopen(http + path, timeout=30).read())
assert "acme" in get("/admin/v2/tenants")
assert get("/admin/v2/namespaces/acme") == ["acme/billing"]

# The Pulsar subscription's cursor: two of three acknowledged.
client = pulsar.Client(pulsar_url, operation_timeout_seconds=30)
sub = client.subscribe("persistent://acme/billing/events", "sub1")
m = sub.receive(30000)
assert m.data() == b"event-2", m.data()
client.close()

# New topics and records as before (a topic per run: the script runs
# again after a restart).
from confluent_kafka.admin import NewTopic
fresh = "fresh-" + uuid.uuid4().hex[:8]
admin.create_topics([NewTopic(fresh, 2)])[fresh].result(30)
p = Producer({"bootstrap.servers": kafka})
p.produce(fresh, b"after-upgrade", partition=1)
assert p.flush(30) == 0
# Producer ids go on from the block the old version had reserved (taking
# one of its ids again would mix two producers' sequences).
kprod = kp.KafkaProducer(bootstrap_servers=kafka, enable_idempotence=True)
kprod.send(fresh, b"idempotent", partition=0).get(30)
pid = kprod._transaction_manager.producer_id_and_epoch.producer_id
assert pid >= fixture["producer_id_limit"], pid
kprod.close()
c = Consumer({"bootstrap.servers": kafka, "group.id": "g-" + fresh,
              "auto.offset.reset": "earliest"})
c.subscribe([fresh])
seen = set()
deadline = time.time() + 60
while time.time() < deadline and len(seen) < 2:
    m = c.poll(1.0)
    if m is not None and m.error() is None:
        seen.add(m.value())
c.close()
assert seen == {b"after-upgrade", b"idempotent"}, seen
print("OK")
