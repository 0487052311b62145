"""Magnetar's admin REST API (stats, subscriptions) checked with the
official Pulsar Python client producing, consuming and reading, and plain
HTTP requests (urllib) reading the answers.

Usage: pulsar_admin_checks.py CHECK PULSAR_URL HTTP_URL

Each CHECK exits non-zero with a message on any mismatch and prints OK at
the end. The broker is started by crates/server/tests/http_stats.rs.
"""

import json
import sys
import time
import urllib.error
import urllib.request

import pulsar
from pulsar import ConsumerType, InitialPosition, MessageId

QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
TIMEOUT_MS = 10_000
DEADLINE_S = 20


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def http(method, url, body=None):
    """(status, headers, body bytes) of one request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(url):
    status, _, body = http("GET", url)
    check(status == 200, "GET %s: %s %s" % (url, status, body))
    return json.loads(body)


def eventually(what, f):
    """Waits (with a deadline) until f() returns something truthy."""
    deadline = time.time() + DEADLINE_S
    while True:
        v = f()
        if v:
            return v
        if time.time() > deadline:
            fail("timed out waiting for " + what)
        time.sleep(0.05)


def produce(c, topic, n, prefix="m"):
    p = c.create_producer(topic, batching_enabled=False, producer_name="stats-producer-" + prefix)
    for i in range(n):
        p.send(("%s-%d" % (prefix, i)).encode(), properties={"i": str(i)}, partition_key="k%d" % i)
    return p


def readers_in_stats(url, http_url):
    c = pulsar.Client(url, operation_timeout_seconds=15, logger=QUIET)
    base = http_url + "/admin/v2/persistent/public/default/"
    # A non-partitioned topic: the Reader shows while connected.
    p = produce(c, "stats-plain", 5)
    reader = c.create_reader("stats-plain", MessageId.earliest)
    for i in range(2):
        m = reader.read_next(TIMEOUT_MS)
        check(m.data() == b"m-%d" % i, "reader read %r" % m.data())

    def reader_sub():
        subs = get_json(base + "stats-plain/stats")["subscriptions"]
        names = [n for n in subs if n.startswith("reader-")]
        return names and (names[0], subs[names[0]])

    name, sub = eventually("the reader in stats", reader_sub)
    check(sub["isDurable"] is False, "reader subscription durable: %r" % sub)
    check(len(sub["consumers"]) == 1, "reader consumers: %r" % sub)
    check(sub["type"] == "Exclusive", "reader type: %r" % sub)
    # The reader's receiver queue was sent everything there is.
    eventually("delivery counters", lambda: get_json(base + "stats-plain/stats")["subscriptions"][name]["msgOutCounter"] == 5)
    stats = get_json(base + "stats-plain/stats")
    check(stats["msgInCounter"] == 5, "msgInCounter: %r" % stats["msgInCounter"])
    check(stats["msgOutCounter"] == 5, "msgOutCounter: %r" % stats["msgOutCounter"])
    check(stats["storageSize"] > 0, "storageSize: %r" % stats)
    consumer = stats["subscriptions"][name]["consumers"][0]
    check(consumer["msgOutCounter"] == 5, "consumer counters: %r" % consumer)
    check(consumer["address"] and consumer["clientVersion"], "consumer client: %r" % consumer)
    pubs = stats["publishers"]
    check([x["producerName"] for x in pubs] == ["stats-producer-m"], "publishers: %r" % pubs)
    check(pubs[0]["accessMode"] == "Shared" and pubs[0]["clientVersion"], "publisher: %r" % pubs[0])
    # A reader never holds back anything: the topic has no durable backlog.
    check(stats["backlogSize"] == 0, "backlogSize with only a reader: %r" % stats["backlogSize"])
    status, _, body = http("GET", base + "stats-plain/partitioned-stats")
    check(status == 404, "partitioned-stats of a plain topic: %s %s" % (status, body))
    reader.close()
    p.close()
    eventually("the reader gone from stats", lambda: not reader_sub())
    eventually("the producer gone from stats", lambda: get_json(base + "stats-plain/stats")["publishers"] == [])

    # A partition of a partitioned topic.
    p = produce(c, "stats-parts-partition-1", 3, prefix="p")
    reader = c.create_reader("stats-parts-partition-1", MessageId.earliest)
    check(reader.read_next(TIMEOUT_MS).data() == b"p-0", "partition reader")

    def partition_reader():
        s = get_json(base + "stats-parts/partitioned-stats?perPartition=true")
        part = s["partitions"].get("persistent://public/default/stats-parts-partition-1", {})
        names = [n for n in part.get("subscriptions", {}) if n.startswith("reader-")]
        return names and (s, names[0])

    s, name = eventually("the partition's reader in partitioned-stats", partition_reader)
    check(s["metadata"]["partitions"] == 3, "metadata: %r" % s["metadata"])
    check(name in s["subscriptions"], "aggregated subscriptions: %r" % list(s["subscriptions"]))
    check(s["msgInCounter"] == 3, "aggregated msgInCounter: %r" % s["msgInCounter"])
    other = s["partitions"]["persistent://public/default/stats-parts-partition-0"]
    check(other["subscriptions"] == {}, "partition 0 subscriptions: %r" % other["subscriptions"])
    s = get_json(base + "stats-parts/partitioned-stats?perPartition=false")
    check(s["partitions"] == {}, "perPartition=false: %r" % s["partitions"])
    status, _, _ = http("GET", base + "stats-parts/stats")
    check(status == 404, "stats of a partitioned topic itself: %s" % status)
    reader.close()
    eventually("the partition's reader gone", lambda: not partition_reader())
    p.close()
    c.close()


def subscription_admin(url, http_url):
    c = pulsar.Client(url, operation_timeout_seconds=15, logger=QUIET)
    topic = "sub-admin"
    t = http_url + "/admin/v2/persistent/public/default/" + topic
    sub = t + "/subscription/audit"
    p = produce(c, topic, 10, prefix="a")
    publish_times = []
    r = c.create_reader(topic, MessageId.earliest)
    for _ in range(10):
        publish_times.append(r.read_next(TIMEOUT_MS).publish_timestamp())
    r.close()

    status, _, body = http("PUT", sub, {"ledgerId": -1, "entryId": -1, "partitionIndex": -1})
    check(status == 204, "create at earliest: %s %s" % (status, body))
    status, _, body = http("PUT", sub)
    check(status == 409, "create again: %s %s" % (status, body))
    check(json.loads(body)["reason"], "409 without a reason")
    status, _, body = http("PUT", t + "/subscription/late")
    check(status == 204, "create at latest: %s %s" % (status, body))
    check(get_json(t + "/subscriptions") == ["audit", "late"], "subscriptions list")
    subs = get_json(t + "/stats")["subscriptions"]
    check(subs["audit"]["msgBacklog"] == 10 and subs["audit"]["isDurable"], "audit: %r" % subs["audit"])
    check(subs["late"]["msgBacklog"] == 0, "late: %r" % subs["late"])
    check(get_json(t + "/stats")["backlogSize"] > 0, "backlogSize of the slowest durable cursor")

    status, _, body = http("POST", sub + "/skip/3")
    check(status == 204, "skip 3: %s %s" % (status, body))
    check(get_json(t + "/stats")["subscriptions"]["audit"]["msgBacklog"] == 7, "backlog after skip")

    # Peek: the 1st and 2nd entries holding unacked messages.
    status, headers, body = http("GET", sub + "/position/1")
    check(status == 200 and body == b"a-3", "peek 1: %s %r" % (status, body))
    check(headers["X-Pulsar-Message-ID"].split(":")[1] == "3", "peek id: %r" % headers["X-Pulsar-Message-ID"])
    check(json.loads(headers["X-Pulsar-Property"]) == {"i": "3"}, "peek properties: %r" % headers["X-Pulsar-Property"])
    check(headers["X-Pulsar-partition-key"] == "k3", "peek key")
    check(headers["X-Pulsar-producer-name"] == "stats-producer-a", "peek producer")
    status, _, body = http("GET", sub + "/position/2")
    check(status == 200 and body == b"a-4", "peek 2: %s %r" % (status, body))
    status, _, _ = http("GET", sub + "/position/99")
    check(status == 404, "peek past the end: %s" % status)
    check(get_json(t + "/stats")["subscriptions"]["audit"]["msgBacklog"] == 7, "peek consumed nothing")

    # A consumer of the subscription starts after the skipped messages.
    cons = c.subscribe(topic, "audit", consumer_type=ConsumerType.Shared)
    m = cons.receive(TIMEOUT_MS)
    check(m.data() == b"a-3", "first after skip: %r" % m.data())
    cons.acknowledge(m)
    eventually("the ack", lambda: get_json(t + "/stats")["subscriptions"]["audit"]["msgBacklog"] == 6)

    # Reset to the first message's publish time: the consumer is
    # disconnected, comes back and reads from the start again (nothing is
    # acknowledged meanwhile, so the backlog is exact).
    status, _, body = http("POST", sub + "/resetcursor/%d" % publish_times[0])
    check(status == 204, "reset by time: %s %s" % (status, body))
    check(get_json(t + "/stats")["subscriptions"]["audit"]["msgBacklog"] == 10, "backlog after reset")
    seen = []
    deadline = time.time() + DEADLINE_S
    while b"a-0" not in seen and time.time() < deadline:
        seen.append(cons.receive(TIMEOUT_MS).data())
    check(b"a-0" in seen, "after the reset the consumer read %r" % seen)
    cons.close()

    # Reset to a message id, just after message 5, with no consumer.
    status, _, body = http("GET", t + "/subscription/late/position/1")
    check(status == 404, "late has nothing to peek: %s %s" % (status, body))
    status, headers, _ = http("GET", sub + "/position/1")
    ledger_id = int(headers["X-Pulsar-Message-ID"].split(":")[0])
    excluded = {"ledgerId": ledger_id, "entryId": 5, "partitionIndex": -1, "isExcluded": True}
    status, _, body = http("POST", sub + "/resetcursor", excluded)
    check(status == 204, "reset by id: %s %s" % (status, body))
    check(get_json(t + "/stats")["subscriptions"]["audit"]["msgBacklog"] == 4, "backlog after reset by id")
    cons = c.subscribe(topic, "audit", consumer_type=ConsumerType.Shared)
    m = cons.receive(TIMEOUT_MS)
    check(m.data() == b"a-6", "first after the reset by id: %r" % m.data())

    # Deleting with a consumer connected needs force.
    status, _, body = http("DELETE", sub)
    check(status == 412, "delete with a consumer: %s %s" % (status, body))
    status, _, body = http("DELETE", sub + "?force=true")
    check(status == 204, "forced delete: %s %s" % (status, body))
    check(get_json(t + "/subscriptions") == ["late"], "after delete")
    status, _, _ = http("DELETE", sub)
    check(status == 404, "delete again")
    status, _, body = http("POST", t + "/subscription/late/skip_all")
    check(status == 204, "skip_all: %s %s" % (status, body))
    status, _, body = http("POST", t + "/subscription/nope/skip_all")
    check(status == 404, "skip_all of a missing subscription: %s %s" % (status, body))
    cons.close()
    p.close()
    c.close()


CHECKS = {
    "readers-in-stats": readers_in_stats,
    "subscription-admin": subscription_admin,
}

if __name__ == "__main__":
    CHECKS[sys.argv[1]](sys.argv[2], sys.argv[3])
    print("OK")
