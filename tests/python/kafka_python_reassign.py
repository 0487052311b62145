"""kafka-python (an independent Kafka client) moves partitions between the
brokers of a Magnetar cluster with AlterPartitionReassignments and watches
the moves with ListPartitionReassignments.

Usage:
  kafka_python_reassign.py BOOTSTRAP move TOPIC PARTITION BROKER[,BROKER...]
      starts moving TOPIC-PARTITION to those brokers (first: preferred
      leader); fails unless the broker accepted it;
  kafka_python_reassign.py BOOTSTRAP wait TOPIC PARTITION BROKER[,BROKER...] SECONDS
      waits (at most SECONDS) until no reassignment of TOPIC-PARTITION is
      listed and the topic's metadata names exactly those replicas; prints
      the reassignments it saw listed meanwhile;
  kafka_python_reassign.py BOOTSTRAP refused TOPIC PARTITION BROKER[,BROKER...] ERROR
      checks that the move is refused with ERROR (an error class name).

Prints OK on success; exits non-zero with a message otherwise.
"""

import sys
import time

from kafka import KafkaAdminClient, TopicPartition


def brokers(spec: str) -> list:
    return [int(b) for b in spec.split(",")]


def move(admin, topic: str, partition: int, target: list) -> int:
    tp = TopicPartition(topic, partition)
    result = admin.alter_partition_reassignments({tp: target})
    if tp not in result or result[tp] is not None:
        print(f"move of {tp} refused or unanswered: {result}")
        return 1
    print(f"OK kafka-python moves {topic}-{partition} to {target}")
    return 0


def refused(admin, topic: str, partition: int, target: list, error: str) -> int:
    tp = TopicPartition(topic, partition)
    result = admin.alter_partition_reassignments({tp: target})
    got = result.get(tp)
    name = getattr(got, "__name__", str(got))
    if got is None or name != error:
        print(f"expected {error} for {tp}, got {result}")
        return 1
    print(f"OK kafka-python was refused with {error}")
    return 0


def wait(admin, topic: str, partition: int, target: list, seconds: float) -> int:
    tp = TopicPartition(topic, partition)
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        listed = admin.list_partition_reassignments({topic: [partition]})
        if tp in listed:
            if listed[tp] not in seen:
                seen.append(listed[tp])
        else:
            described = admin.describe_topics([topic])[0]
            replicas = None
            for p in described["partitions"]:
                if p["partition_index"] == partition:
                    replicas = p["replica_nodes"]
            if replicas == target:
                print(f"listed while moving: {seen}")
                print(f"OK kafka-python saw {topic}-{partition} on {replicas}")
                return 0
        time.sleep(0.2)
    print(f"{tp} did not reach {target} in {seconds}s; listed: {seen}")
    return 1


def main(argv: list) -> int:
    bootstrap, command, topic, partition, target = argv[1:6]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        if command == "move":
            return move(admin, topic, int(partition), brokers(target))
        if command == "wait":
            return wait(admin, topic, int(partition), brokers(target), float(argv[6]))
        if command == "refused":
            return refused(admin, topic, int(partition), brokers(target), argv[6])
        print(f"unknown command {command}")
        return 2
    finally:
        admin.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
