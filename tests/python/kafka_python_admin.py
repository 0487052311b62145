"""kafka-python's admin client against Magnetar: topic configs and the
admin APIs of a single-node cluster.

Usage: kafka_python_admin.py BOOTSTRAP

Mirrors kafka-python's own integration tests where they exist
(test/integration/test_admin_integration.py: test_create_describe_delete_topics
with configs, test_describe_configs_*, test_incremental_alter_configs,
test_describe_log_dirs, test_elect_leaders, test_describe_cluster, ...)
against one broker. Exits non-zero with a message on any mismatch; prints
OK at the end.
"""

import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import (
    ElectionNotNeededError,
    InvalidConfigurationError,
    InvalidReplicationAssignmentError,
)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def configs_of(admin, topic, include_synonyms=False):
    """{name: entry} of a topic's configs (every key), as kafka-python 3
    returns them: {'topic': {name: {key: entry}}}."""
    res = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)],
        include_synonyms=include_synonyms,
        config_filter="all",
    )
    return res["topic"][topic]


def main(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-admin")

    # Topics with Kafka 4 configs, and an invalid one refused.
    admin.create_topics(
        {
            "py-configs": {
                "num_partitions": 2,
                "replication_factor": 1,
                "configs": {
                    "compression.type": "gzip",
                    "message.timestamp.type": "LogAppendTime",
                    "cleanup.policy": "compact,delete",
                    "min.cleanable.dirty.ratio": "0.25",
                    "segment.jitter.ms": "10",
                    "min.insync.replicas": "1",
                },
            }
        }
    )
    try:
        admin.create_topics(
            {"py-bad": {"num_partitions": 1, "configs": {"compression.zstd.level": "99"}}}
        )
        fail("an invalid zstd level was accepted")
    except InvalidConfigurationError:
        pass

    configs = configs_of(admin, "py-configs", include_synonyms=True)
    for key, value in [
        ("compression.type", "gzip"),
        ("message.timestamp.type", "LogAppendTime"),
        ("cleanup.policy", "compact,delete"),
        ("min.cleanable.dirty.ratio", "0.25"),
        ("message.timestamp.after.max.ms", "3600000"),
    ]:
        check(configs[key]["value"] == value, f"{key}: {configs[key]}")
    check(configs["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE", "DOUBLE type")
    check(configs["cleanup.policy"]["config_type"] == "LIST", "LIST type")
    check(configs["retention.ms"]["config_type"] == "LONG", "LONG type")
    check(configs["compression.type"]["config_source"] == "DYNAMIC_TOPIC_CONFIG", "source")
    synonyms = [s["name"] for s in configs["cleanup.policy"]["synonyms"]]
    check(synonyms == ["cleanup.policy", "log.cleanup.policy"], f"synonyms {synonyms}")

    # Incremental alter: APPEND to a list key, SET, DELETE.
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                "py-configs",
                configs={
                    "leader.replication.throttled.replicas": ("SET", "0:1"),
                    "follower.replication.throttled.replicas": ("APPEND", "1:1"),
                    "message.timestamp.type": ("DELETE", None),
                },
            )
        ],
        incremental=True,
    )
    configs = configs_of(admin, "py-configs")
    check(configs["leader.replication.throttled.replicas"]["value"] == "0:1", "SET")
    check(configs["follower.replication.throttled.replicas"]["value"] == "1:1", "APPEND")
    check(configs["message.timestamp.type"]["value"] == "CreateTime", "DELETE")

    # Produce with idempotence (uncompressed; the topic recompresses to gzip,
    # the codec kafka-python reads without extra libraries).
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all"
    )
    for i in range(10):
        producer.send("py-configs", key=b"k%d" % i, value=b"v%d" % i, partition=1)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=20000
    )
    tp = TopicPartition("py-configs", 1)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = [(m.key, m.value) for _, m in zip(range(10), consumer)]
    consumer.close()
    check(got == [(b"k%d" % i, b"v%d" % i) for i in range(10)], f"consumed {got}")

    # DescribeProducers: the idempotent producer's state.
    producers = admin.describe_producers([tp])
    state = producers[tp]
    active = getattr(state, "active_producers", None)
    if active is None:
        active = state["active_producers"]
    check(len(active) == 1, f"producers {producers}")
    last_seq = getattr(active[0], "last_sequence", None)
    if last_seq is None:
        last_seq = active[0]["last_sequence"]
    check(last_seq == 9, f"last sequence {active[0]}")

    # DescribeLogDirs: one log dir, the partition's bytes.
    dirs = admin.describe_log_dirs({"py-configs": [1]})
    check(len(dirs) == 1 and len(dirs[0]["log_dirs"]) == 1, f"log dirs {dirs}")
    log_dir = dirs[0]["log_dirs"][0]
    check(log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0, f"log dir {log_dir}")
    partitions = log_dir["topics"][0]["partitions"]
    check(
        [(p["partition_index"], p["partition_size"] > 0) for p in partitions] == [(1, True)],
        f"log dir partitions {partitions}",
    )

    # DescribeTopicPartitions with paging (KIP-966).
    page = admin.describe_topic_partitions(["py-configs"], response_partition_limit=1)
    parts = [p["partition_index"] for p in page["topics"][0]["partitions"]]
    check(parts == [0], f"first page {page}")
    check(page["next_cursor"] == {"topic_name": "py-configs", "partition_index": 1}, f"cursor {page}")
    page = admin.describe_topic_partitions(
        ["py-configs"], response_partition_limit=1, cursor=page["next_cursor"]
    )
    parts = [p["partition_index"] for p in page["topics"][0]["partitions"]]
    check(parts == [1] and page["next_cursor"] is None, f"second page {page}")

    # ListConfigResources (KIP-1142).
    resources = admin.list_config_resources()
    check(resources.get("broker") == ["1"], f"config resources {resources}")
    check("py-configs" in resources.get("topic", []), f"config resources {resources}")

    # Leader election and reassignments as a single node answers them.
    elected = admin.elect_leaders(0, {"py-configs": [0, 1]}, raise_errors=False)
    codes = [
        (p.partition_id, p.error_code)
        for t in elected.replica_election_results
        for p in t.partition_result
    ]
    check(codes == [(0, ElectionNotNeededError.errno), (1, ElectionNotNeededError.errno)], f"elect {elected}")
    moved = admin.alter_partition_reassignments({TopicPartition("py-configs", 0): [1]})
    check(moved == {TopicPartition("py-configs", 0): None}, f"reassignment {moved}")
    ongoing = admin.list_partition_reassignments()
    check(not ongoing, f"ongoing reassignments {ongoing}")

    # CreatePartitions naming an unknown broker.
    try:
        admin.create_partitions({"py-configs": {"count": 3, "assignments": [[42]]}})
        fail("an assignment to broker 42 was accepted")
    except InvalidReplicationAssignmentError:
        pass

    cluster = admin.describe_cluster()
    check(len(cluster["brokers"]) == 1, f"cluster {cluster}")
    admin.close()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
