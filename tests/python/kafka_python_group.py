"""kafka-python classic group consumer.

Usage:
  kafka_python_group.py consume BOOTSTRAP GROUP TOPIC COUNT
      Joins GROUP, subscribes to TOPIC, reads COUNT messages, commits them
      synchronously, prints "VALUE <v>" per message and "DONE", then leaves.
  kafka_python_group.py member BOOTSTRAP GROUP TOPIC
      Joins GROUP and stays, printing "ASSIGNED <n>" whenever its number of
      assigned partitions changes (used to be killed with SIGKILL).
"""

import sys
import time

from kafka import KafkaConsumer


def consumer(bootstrap, group, topic, **extra):
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=3000,
        heartbeat_interval_ms=300,
        **extra,
    )
    c.subscribe([topic])
    return c


def consume(bootstrap, group, topic, count):
    c = consumer(bootstrap, group, topic)
    got = 0
    deadline = time.time() + 60
    while got < count and time.time() < deadline:
        batches = c.poll(timeout_ms=500)
        for records in batches.values():
            for r in records:
                print("VALUE", r.value.decode(), flush=True)
                got += 1
    c.commit()
    c.close()
    print("DONE" if got >= count else f"SHORT {got}", flush=True)
    return 0 if got >= count else 1


def member(bootstrap, group, topic):
    c = consumer(bootstrap, group, topic)
    last = -1
    while True:
        c.poll(timeout_ms=200)
        n = len(c.assignment())
        if n != last:
            print("ASSIGNED", n, flush=True)
            last = n


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "consume":
        sys.exit(consume(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    elif mode == "member":
        member(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown mode {mode}")
