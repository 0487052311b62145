"""kafka-python's transactional producer and read_committed consumer
against Magnetar (mirrors kafka-python's test_producer transactional tests
and test_consumer_integration's read_committed checks).

Usage: kafka_python_txn.py BOOTSTRAP

Commits one transaction, aborts one, commits a third with offsets sent to a
consumer group (send_offsets_to_transaction), then checks what a
read_committed and a read_uncommitted consumer see and the group's
committed offset. Exits non-zero with a message on any mismatch.
"""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata


def read(bootstrap, topic, isolation, expected):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        isolation_level=isolation,
        consumer_timeout_ms=5000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append(msg.value.decode())
    end = consumer.end_offsets([tp])[tp]
    consumer.close()
    if got != expected:
        raise AssertionError(f"{isolation}: read {got}, expected {expected}")
    return end


def main(bootstrap: str) -> int:
    topic = "py-txn"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-txn-admin")
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="py-txn-1")
    producer.init_transactions()

    producer.begin_transaction()
    for v in ("c1", "c2"):
        producer.send(topic, partition=0, value=v.encode())
    producer.commit_transaction()

    producer.begin_transaction()
    for v in ("a1", "a2", "a3"):
        producer.send(topic, partition=0, value=v.encode())
    producer.flush()
    producer.abort_transaction()

    producer.begin_transaction()
    producer.send(topic, partition=0, value=b"c3")
    producer.send_offsets_to_transaction(
        {TopicPartition(topic, 0): OffsetAndMetadata(42, "", -1)}, "py-txn-group"
    )
    producer.commit_transaction()
    producer.close()

    read(bootstrap, topic, "read_committed", ["c1", "c2", "c3"])
    read(bootstrap, topic, "read_uncommitted", ["c1", "c2", "a1", "a2", "a3", "c3"])

    group = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id="py-txn-group", enable_auto_commit=False
    )
    committed = group.committed(TopicPartition(topic, 0))
    group.close()
    if committed != 42:
        print(f"FAIL: the group's committed offset is {committed}, not 42")
        return 1
    admin.close()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
