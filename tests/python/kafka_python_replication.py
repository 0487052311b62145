"""kafka-python (an independent Kafka client) against a replicated topic of
a three-broker Magnetar cluster, across a leader failover the calling test
causes between runs.

Usage:
  kafka_python_replication.py BOOTSTRAP produce TOPIC PREFIX COUNT
      produces PREFIX-0 .. PREFIX-(COUNT-1) with acks=all and idempotence,
      every one acknowledged (retried across a leader change);
  kafka_python_replication.py BOOTSTRAP consume TOPIC PREFIX:COUNT ...
      reads TOPIC from the beginning and checks it holds exactly those
      values, each once, each prefix's values in order within a partition.

Prints OK on success; exits non-zero with a message otherwise.
"""

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap: str, topic: str, prefix: str, count: int) -> int:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        retries=1000,
        retry_backoff_ms=200,
        request_timeout_ms=15000,
        linger_ms=5,
    )
    futures = []
    for i in range(count):
        value = f"{prefix}-{i}".encode()
        futures.append(producer.send(topic, key=value, value=value))
    producer.flush(timeout=120)
    for fut in futures:
        fut.get(timeout=120)
    producer.close()
    print(f"OK kafka-python had {count} records acknowledged")
    return 0


def consume(bootstrap: str, topic: str, wanted: list) -> int:
    expected = {}
    for spec in wanted:
        prefix, count = spec.split(":")
        for i in range(int(count)):
            expected[f"{prefix}-{i}"] = (prefix, i)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=10000,
    )
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    seen = []
    per_partition = {}
    for msg in consumer:
        v = msg.value.decode()
        seen.append(v)
        per_partition.setdefault(msg.partition, []).append(v)
    consumer.close()
    if len(seen) != len(set(seen)):
        print("FAIL: a record was read twice")
        return 1
    if set(seen) != set(expected):
        missing = sorted(set(expected) - set(seen))[:5]
        extra = sorted(set(seen) - set(expected))[:5]
        print(f"FAIL: read {len(seen)} of {len(expected)}; missing {missing}, unexpected {extra}")
        return 1
    for p, values in per_partition.items():
        last = {}
        for v in values:
            prefix, i = expected[v]
            if last.get(prefix, -1) > i:
                print(f"FAIL: partition {p} has {v} after {prefix}-{last[prefix]}")
                return 1
            last[prefix] = i
    print(f"OK kafka-python read {len(seen)} records, each once, in order")
    return 0


if __name__ == "__main__":
    bootstrap, mode, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "produce":
        sys.exit(produce(bootstrap, topic, sys.argv[4], int(sys.argv[5])))
    sys.exit(consume(bootstrap, topic, sys.argv[4:]))
