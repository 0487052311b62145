"""kafka-python reads one partition from offset 0 to its end.

Usage: kafka_python_read_all.py BOOTSTRAP TOPIC COUNT

Assigns partition 0 of TOPIC, seeks to the beginning and polls until COUNT
messages have arrived (offsets 0..COUNT-1, in order) or 30 s pass. Prints
OK on success; exits non-zero (kafka-python raises CorruptRecordError on a
malformed stored batch) otherwise.
"""

import sys
import time

from kafka import KafkaConsumer, TopicPartition


def main(bootstrap: str, topic: str, count: int) -> int:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    offsets = []
    deadline = time.monotonic() + 30
    while len(offsets) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            offsets.extend(r.offset for r in records)
    consumer.close()
    if offsets != list(range(count)):
        print(f"FAIL: read offsets {offsets}, expected 0..{count - 1}")
        return 1
    print(f"OK {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
