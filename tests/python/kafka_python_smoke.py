"""kafka-python (a second, independent Kafka client) against Magnetar.

Usage: kafka_python_smoke.py BOOTSTRAP

Creates a topic with the admin client, produces with idempotence on (which
needs InitProducerId), consumes everything back, and lists topics. Exits
non-zero with a message on any mismatch.
"""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def main(bootstrap: str) -> int:
    topic = "py-smoke"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-smoke-admin")
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
    )
    sent = {}
    futures = []
    for i in range(200):
        key = b"key-%d" % i
        value = b"value-%d" % i
        futures.append((key, value, producer.send(topic, key=key, value=value)))
    producer.flush(timeout=30)
    for key, value, fut in futures:
        md = fut.get(timeout=30)
        sent[(md.partition, md.offset)] = (key, value)
    producer.close()
    if len(sent) != 200:
        print(f"FAIL: {len(sent)} distinct offsets for 200 messages")
        return 1

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=20000,
    )
    partitions = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    got = {}
    for msg in consumer:
        got[(msg.partition, msg.offset)] = (msg.key, msg.value)
        if len(got) >= len(sent):
            break
    if got != sent:
        missing = set(sent) - set(got)
        print(f"FAIL: consumed {len(got)} of {len(sent)}; missing {sorted(missing)[:5]}")
        return 1

    topics = consumer.topics()
    consumer.close()
    if topic not in topics:
        print(f"FAIL: {topic} not in consumer.topics(): {topics}")
        return 1
    listed = admin.list_topics()
    admin.close()
    if topic not in listed:
        print(f"FAIL: {topic} not in admin.list_topics(): {listed}")
        return 1
    print("OK kafka-python produced, consumed and listed", len(got), "messages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
