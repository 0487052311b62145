"""Pulsar authentication and authorization against the broker with the
official Python client (pulsar-client, the C++ client inside).

usage: pulsar_security.py PHASE PULSAR_URL PULSAR_TLS_URL KAFKA_PLAINTEXT HTTP_URL PKI_DIR
PHASE: main (token and TLS authentication, refusals, ACLs) or refresh
(short-lived tokens refreshed on the same connection).
"""
import os
import sys
import time
import urllib.request
import uuid

import pulsar
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

phase, url, tls_url, kafka_plain, http, pki = sys.argv[1:7]
CA = os.path.join(pki, "ca.pem")
DEADLINE = 60


QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def token(name):
    with open(os.path.join(pki, "token-" + name)) as f:
        return f.read().strip()


def client(service_url, auth, **kw):
    extra = {"tls_trust_certs_file_path": CA, "tls_validate_hostname": True} \
        if service_url.startswith("pulsar+ssl") else {}
    extra.update(kw)
    return pulsar.Client(service_url, authentication=auth, operation_timeout_seconds=10,
                         logger=QUIET, **extra)


def roundtrip(c, topic, sub, label, n=3):
    topic = "persistent://public/default/" + topic
    cons = c.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest)
    prod = c.create_producer(topic)
    sent = ["%s-%d-%s" % (label, i, uuid.uuid4().hex[:6]) for i in range(n)]
    for m in sent:
        prod.send(m.encode())
    got = []
    while len(got) < n:
        msg = cons.receive(timeout_millis=DEADLINE * 1000)
        got.append(msg.data().decode())
        cons.acknowledge(msg)
    assert got == sent, f"{label}: {got} != {sent}"
    prod.close()
    cons.close()


def refused(fn, label, words=("Authorization", "Authentication", "Connect", "Timeout")):
    try:
        fn()
    except Exception as e:  # the client's exceptions are pulsar.* classes
        text = type(e).__name__ + ": " + str(e)
        assert any(w.lower() in text.lower() for w in words), f"{label}: unexpected {text}"
        return text
    raise AssertionError(f"{label}: was allowed")


def accepted_pulsar_connections():
    text = urllib.request.urlopen(http + "/metrics", timeout=10).read().decode()
    return sum(float(l.split()[-1]) for l in text.splitlines()
               if l.startswith("magnetar_connections_accepted_total") and 'listener="pulsar"' in l)


if phase == "main":
    admin = AdminClient({"bootstrap.servers": kafka_plain})

    def allow(principal, restype, name, op, pattern=ResourcePatternType.LITERAL):
        return AclBinding(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)

    acls = [
        allow("User:bob", ResourceType.TOPIC, "bob-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        allow("User:bob", ResourceType.TOPIC, "bob-", AclOperation.CREATE, ResourcePatternType.PREFIXED),
        allow("User:bob", ResourceType.TOPIC, "bob-in", AclOperation.READ),
        allow("User:bob", ResourceType.GROUP, "bob-sub", AclOperation.READ),
        allow("User:CN=client-1", ResourceType.TOPIC, "cert-t", AclOperation.WRITE),
        allow("User:CN=client-1", ResourceType.TOPIC, "cert-t", AclOperation.CREATE),
    ]
    futures = admin.create_acls(acls)
    for f in futures.values():
        f.result(DEADLINE)

    # alice (a super user) by token, plain and over TLS.
    alice = client(url, pulsar.AuthenticationToken(token("alice")))
    roundtrip(alice, "alice-t", "alice-sub", "alice")
    alice_tls = client(tls_url, pulsar.AuthenticationToken(token("alice")))
    roundtrip(alice_tls, "alice-tls", "s", "alice-tls")
    # A token from a callable (the supplier form).
    roundtrip(client(url, pulsar.AuthenticationToken(lambda: token("alice"))), "alice-sup", "s2", "sup")

    # No credentials, an expired token, a forged token: refused at connect.
    for label, auth in [("no credentials", None),
                        ("expired token", pulsar.AuthenticationToken(token("expired"))),
                        ("forged token", pulsar.AuthenticationToken(token("forged")))]:
        c = client(url, auth, connection_timeout_ms=5000) if auth else \
            pulsar.Client(url, operation_timeout_seconds=5, logger=QUIET)
        refused(lambda: c.create_producer("persistent://public/default/alice-t"), label)
        c.close()

    # bob: Write and Create on bob-*, Read on bob-in and the group bob-sub.
    bob = client(url, pulsar.AuthenticationToken(token("bob")))
    refused(lambda: bob.create_producer("persistent://public/default/not-bobs"),
            "bob creates a topic outside bob-*", ("Authorization",))
    p = bob.create_producer("persistent://public/default/bob-out")
    p.send(b"bob wrote")
    p.close()
    refused(lambda: bob.subscribe("persistent://public/default/bob-out", "bob-sub"),
            "bob consumes bob-out", ("Authorization",))
    p = alice.create_producer("persistent://public/default/bob-in")
    p.send(b"for bob")
    p.close()
    cons = bob.subscribe("persistent://public/default/bob-in", "bob-sub",
                         initial_position=pulsar.InitialPosition.Earliest)
    assert cons.receive(timeout_millis=DEADLINE * 1000).data() == b"for bob"
    cons.close()
    refused(lambda: bob.subscribe("persistent://public/default/bob-in", "other-sub"),
            "bob's other subscription", ("Authorization",))
    # A Reader needs no group.
    r = bob.create_reader("persistent://public/default/bob-in", pulsar.MessageId.earliest)
    assert r.read_next(timeout_millis=DEADLINE * 1000).data() == b"for bob"
    r.close()
    refused(lambda: bob.create_producer("persistent://public/default/alice-t"),
            "bob produces to alice-t", ("Authorization",))
    seen = bob.get_topic_partitions("persistent://public/default/bob-in")
    assert seen == ["persistent://public/default/bob-in"], seen
    refused(lambda: bob.get_topic_partitions("persistent://public/default/alice-t"),
            "bob looks up alice-t", ("Authorization",))

    # A TLS client certificate is the principal User:CN=client-1.
    cert = client(tls_url, pulsar.AuthenticationTLS(os.path.join(pki, "client.pem"),
                                                    os.path.join(pki, "client.key")))
    p = cert.create_producer("persistent://public/default/cert-t")
    p.send(b"by certificate")
    p.close()
    refused(lambda: cert.subscribe("persistent://public/default/cert-t", "c"),
            "the certificate's consume", ("Authorization",))
    # A plaintext client on the TLS port gets nowhere.
    wrong = pulsar.Client(tls_url.replace("pulsar+ssl", "pulsar"), operation_timeout_seconds=5,
                          authentication=pulsar.AuthenticationToken(token("alice")), logger=QUIET)
    refused(lambda: wrong.create_producer("persistent://public/default/alice-t"), "plaintext on TLS")
    for c in (alice, alice_tls, bob, cert, wrong):
        c.close()
elif phase == "refresh":
    # Tokens living 3 s each: the broker challenges at expiry and the
    # client answers with a fresh one on the same connection.
    with open(os.path.join(pki, "short-tokens")) as f:
        tokens = [line.split() for line in f if line.strip()]

    def fresh():
        now = time.time()
        for exp, t in tokens:
            if int(exp) - 1 > now:
                return t
        raise AssertionError("out of test tokens")

    c = client(url, pulsar.AuthenticationToken(fresh))
    p = c.create_producer("persistent://public/default/refresh-t")
    p.send(b"first")
    before = accepted_pulsar_connections()
    end = time.time() + 8
    n = 0
    while time.time() < end:
        p.send(b"m%d" % n)
        n += 1
        time.sleep(0.05)
    after = accepted_pulsar_connections()
    assert after == before, f"{after - before} new pulsar connections: credentials were not refreshed"
    p.close()
    c.close()
else:
    raise SystemExit("unknown phase " + phase)
print("OK")
