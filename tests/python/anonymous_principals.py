"""Unauthenticated Pulsar clients under an authorizer, with the official
Python client (pulsar-client, the C++ client inside) and confluent-kafka
for the Kafka side.

usage: anonymous_principals.py PHASE PULSAR_URL KAFKA_PLAINTEXT
PHASE: readme (the README's ACL start: the Kafka listener's User:ANONYMOUS
is a super user, and a Pulsar client without credentials is refused) or
named (pulsar.anonymous.principal=User:guest: such a client is User:guest,
which ACLs then decide like any other principal).
"""
import sys
import time
import uuid

import pulsar
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

phase, url, kafka = sys.argv[1:4]
DEADLINE = 60
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def refused(fn, label, words):
    try:
        fn()
    except Exception as e:  # the client's exceptions are pulsar.* classes
        text = type(e).__name__ + ": " + str(e)
        assert any(w.lower() in text.lower() for w in words), f"{label}: unexpected {text}"
        return text
    raise AssertionError(f"{label}: was allowed")


def kafka_produce(topic, values):
    p = Producer({"bootstrap.servers": kafka})
    for v in values:
        p.produce(topic, v.encode())
    assert p.flush(DEADLINE) == 0


def kafka_read_all(topic):
    """Every value of the topic's only partition, up to its end."""
    c = Consumer({"bootstrap.servers": kafka, "group.id": "check-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE)
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    end = time.time() + DEADLINE
    while len(got) < high:
        assert time.time() < end, f"read {got} of {high}"
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    return got


admin = AdminClient({"bootstrap.servers": kafka})
topic = "acl-example-" + uuid.uuid4().hex[:6]
admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE)
pulsar_topic = "persistent://public/default/" + topic

if phase == "readme":
    # The loopback Kafka listener's User:ANONYMOUS is a super user.
    kafka_produce(topic, ["from-kafka"])
    # A Pulsar client without credentials is not that User:ANONYMOUS.
    anon = pulsar.Client(url, operation_timeout_seconds=10, logger=QUIET)
    for label, fn in [
        ("produce", lambda: anon.create_producer(pulsar_topic)),
        ("subscribe", lambda: anon.subscribe(pulsar_topic, "s")),
        ("create a topic", lambda: anon.create_producer("persistent://public/default/new-" + topic)),
        ("list partitions", lambda: anon.get_topic_partitions(pulsar_topic)),
    ]:
        refused(fn, label, ("Authorization",))
    anon.close()
    assert kafka_read_all(topic) == ["from-kafka"]
    topics = admin.list_topics(timeout=DEADLINE).topics
    assert not any(t.startswith("new-acl-example") for t in topics), sorted(topics)
elif phase == "named":
    guest = pulsar.Client(url, operation_timeout_seconds=10, logger=QUIET)
    # User:guest has no ACL yet: authenticated (as guest), not authorized.
    refused(lambda: guest.create_producer(pulsar_topic), "guest without ACLs", ("Authorization",))

    def allow(op):
        return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:guest",
                          "*", op, AclPermissionType.ALLOW)

    for f in admin.create_acls([allow(AclOperation.WRITE)]).values():
        f.result(DEADLINE)
    prod = guest.create_producer(pulsar_topic)
    prod.send(b"from-guest")
    prod.close()
    # Write is all guest may do: no Read.
    refused(lambda: guest.subscribe(pulsar_topic, "guest-sub"), "guest reads", ("Authorization",))
    guest.close()
    assert kafka_read_all(topic) == ["from-guest"]
else:
    raise SystemExit("unknown phase " + phase)

print("OK")
