"""Helpers of crates/server/tests/http_metrics.rs.

Usage:
  metrics_check.py parse < EXPOSITION
      Parses an OpenMetrics exposition (GET /metrics) with the official
      Prometheus client's strict OpenMetrics parser and prints it as JSON:
      [{"name", "type", "unit", "samples": [{"name", "labels", "value"}]}].
      Exits non-zero if the exposition does not parse.
  metrics_check.py pulsar PULSAR_URL TOPIC N ACKED
      With the official Pulsar client: produces N messages to TOPIC, one
      SEND each (no batching), receives them on the Shared subscription
      "metrics-sub" from the earliest message, acknowledges the first
      ACKED, and closes the consumer (the broker stores its acks before
      answering the close). Then asks for the partitions of a topic that
      does not exist (TopicNotFound with auto-creation off). Prints OK.
"""

import json
import sys

TIMEOUT_MS = 10_000


def parse():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    families = []
    for f in text_string_to_metric_families(sys.stdin.read()):
        families.append({
            "name": f.name,
            "type": f.type,
            "unit": f.unit,
            "samples": [
                {"name": s.name, "labels": dict(s.labels), "value": s.value}
                for s in f.samples
            ],
        })
    json.dump(families, sys.stdout)


def pulsar_traffic(url, topic, n, acked):
    import pulsar

    quiet = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    c = pulsar.Client(url, operation_timeout_seconds=15, logger=quiet)
    p = c.create_producer(topic, batching_enabled=False)
    for i in range(n):
        p.send(("message-%d" % i).encode())
    p.close()
    consumer = c.subscribe(topic, "metrics-sub", consumer_type=pulsar.ConsumerType.Shared,
                           initial_position=pulsar.InitialPosition.Earliest)
    got = [consumer.receive(TIMEOUT_MS) for _ in range(n)]
    want = ["message-%d" % i for i in range(n)]
    if [m.data().decode() for m in got] != want:
        print("FAIL: received %r" % [m.data() for m in got])
        sys.exit(1)
    for m in got[:acked]:
        consumer.acknowledge(m)
    consumer.close()
    try:
        c.get_topic_partitions("metrics-no-such-topic")
        print("FAIL: a missing topic was reported")
        sys.exit(1)
    except pulsar.TopicNotFound:
        pass
    c.close()
    print("OK")


if __name__ == "__main__":
    if sys.argv[1] == "parse":
        parse()
    elif sys.argv[1] == "pulsar":
        pulsar_traffic(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("unknown command %r" % sys.argv[1])
