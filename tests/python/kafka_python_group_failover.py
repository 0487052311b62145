"""kafka-python (an independent Kafka client) commits a consumer group's
offsets on a three-broker Magnetar cluster, and after the calling test
SIGKILLs the group's coordinator, reads them back from the new one.

Usage:
  kafka_python_group_failover.py BOOTSTRAP commit TOPIC GROUP P:OFFSET ...
      commits OFFSET for partition P of TOPIC in GROUP (a "simple" commit,
      no member), retried while the coordinator moves;
  kafka_python_group_failover.py BOOTSTRAP check TOPIC GROUP P:OFFSET ...
      waits (60 s at most) until GROUP's committed offsets of TOPIC are
      exactly these.

Prints OK on success; exits non-zero with a message otherwise.
"""

import sys
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata


def parse(pairs):
    out = {}
    for pair in pairs:
        p, o = pair.split(":")
        out[int(p)] = int(o)
    return out


def consumer(bootstrap, group):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=15000,
        retry_backoff_ms=200,
    )


def commit(bootstrap, topic, group, wanted):
    c = consumer(bootstrap, group)
    offsets = {
        TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in wanted.items()
    }
    deadline = time.time() + 60
    while True:
        try:
            c.commit(offsets)
            break
        except Exception as e:  # the coordinator may be moving
            if time.time() > deadline:
                raise
            print(f"commit retried: {e!r}", file=sys.stderr)
            time.sleep(0.5)
    coordinator = c._coordinator.coordinator_id
    c.close()
    print(f"OK kafka-python committed {wanted} at broker {coordinator}")
    return 0


def check(bootstrap, topic, group, wanted):
    deadline = time.time() + 60
    last = None
    while time.time() < deadline:
        c = consumer(bootstrap, group)
        try:
            got = {p: c.committed(TopicPartition(topic, p)) for p in wanted}
            last = (got, c._coordinator.coordinator_id)
            if got == wanted:
                print(f"OK kafka-python read the committed offsets {got}")
                return 0
        except Exception as e:
            last = repr(e)
        finally:
            c.close()
        time.sleep(0.5)
    print(f"committed offsets of {group}: {last}, expected {wanted}")
    return 1


def main(argv):
    bootstrap, mode, topic, group = argv[1:5]
    wanted = parse(argv[5:])
    if mode == "commit":
        return commit(bootstrap, topic, group, wanted)
    if mode == "check":
        return check(bootstrap, topic, group, wanted)
    print(f"unknown mode {mode}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
