"""The official Pulsar client (pulsar-client) producing and consuming one
replicated partition while the calling test moves its leadership between
brokers (a controlled shutdown, a restart, leadership moving back).

Usage:
  pulsar_failover.py SERVICE_URL TOPIC PROGRESS_FILE STOP_FILE

Sends numbered messages one at a time (each send waits for its receipt)
and writes how many were acknowledged to PROGRESS_FILE, until STOP_FILE
exists; a Shared consumer reads and acknowledges meanwhile. Then checks
that no send failed and that every acknowledged message was received
(a message may come twice: cursors are kept by the broker that led the
partition when they were written). Prints OK on success; exits non-zero
with a message otherwise.
"""

import os
import sys
import threading
import time

import pulsar


def write_progress(path: str, n: int) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(n))
    os.replace(tmp, path)


def main() -> int:
    url, topic, progress, stop = sys.argv[1:5]
    client = pulsar.Client(url, operation_timeout_seconds=30)
    received = set()
    copies = 0
    done = threading.Event()
    consumer = client.subscribe(
        topic,
        "failover-check",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )

    def consume() -> None:
        nonlocal copies
        while not done.is_set():
            try:
                msg = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                continue
            value = msg.data().decode()
            if value in received:
                copies += 1
            received.add(value)
            consumer.acknowledge(msg)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        send_timeout_millis=60000,
        block_if_queue_full=True,
    )
    acked = []
    i = 0
    while not os.path.exists(stop):
        value = f"m-{i:06d}"
        try:
            producer.send(value.encode())
        except Exception as e:  # any failure fails the check
            print(f"send of {value} failed after {len(acked)} acknowledged: {e!r}")
            return 1
        acked.append(value)
        i += 1
        if i % 10 == 0:
            write_progress(progress, len(acked))
        time.sleep(0.005)
    write_progress(progress, len(acked))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        missing = [v for v in acked if v not in received]
        if not missing:
            break
        time.sleep(0.2)
    done.set()
    reader.join(timeout=5)
    missing = [v for v in acked if v not in received]
    producer.close()
    consumer.close()
    client.close()
    if missing:
        print(f"{len(missing)} of {len(acked)} acknowledged messages never received, "
              f"first {missing[:5]}")
        return 1
    print(f"OK {len(acked)} messages acknowledged and received ({copies} received again)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
