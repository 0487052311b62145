"""TLS and SASL against the broker with two independent clients:
librdkafka (confluent-kafka) and kafka-python.

usage: kafka_security.py PHASE PLAINTEXT SSL SASL_PLAINTEXT SASL_SSL PKI_DIR HTTP_URL
PHASE: main (create users, then check everything) or after-restart (the
users made in main still authenticate; the deleted one still does not).
"""
import os
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)
import kafka
import kafka.errors

phase, plain, ssl_addr, sasl_plain, sasl_ssl, pki, http = sys.argv[1:8]
CA = os.path.join(pki, "ca.pem")
DEADLINE = 60


def ck(addr, **extra):
    c = {"bootstrap.servers": addr, "socket.timeout.ms": 10000}
    c.update(extra)
    return c


def sasl(protocol, mechanism, user, password):
    c = {"security.protocol": protocol, "sasl.mechanism": mechanism,
         "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        c["ssl.ca.location"] = CA
    return c


def roundtrip_librdkafka(addr, conf, label):
    topic = "sec-" + uuid.uuid4().hex[:8]
    errors = []
    p = Producer(ck(addr, **conf, error_cb=errors.append))
    for i in range(5):
        p.produce(topic, key=b"k%d" % i, value=("%s-%d" % (label, i)).encode())
    left = p.flush(DEADLINE)
    assert left == 0, f"{label}: {left} messages not delivered; errors {errors}"
    c = Consumer(ck(addr, **conf, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    end = time.time() + DEADLINE
    while len(got) < 5 and time.time() < end:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    assert sorted(got) == ["%s-%d" % (label, i) for i in range(5)], f"{label}: {got}"


def refused_librdkafka(addr, conf, label, want=None):
    """The client cannot get metadata; with `want`, its error callback
    reports that error code."""
    errors = []
    a = AdminClient(ck(addr, **conf, error_cb=errors.append))
    try:
        a.list_topics(timeout=8)
        raise AssertionError(f"{label}: metadata was served")
    except KafkaException:
        pass
    if want is not None:
        end = time.time() + DEADLINE
        while not any(e.code() == want for e in errors) and time.time() < end:
            a.poll(0.5)
        assert any(e.code() == want for e in errors), f"{label}: errors {errors}"


def kp_conf(protocol, mechanism=None, user=None, password=None, cert=None):
    c = {"security_protocol": protocol, "request_timeout_ms": 15000}
    if mechanism:
        c.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    if "SSL" in protocol:
        c["ssl_cafile"] = CA
        c["ssl_check_hostname"] = True
    if cert:
        c["ssl_certfile"] = os.path.join(pki, cert + ".pem")
        c["ssl_keyfile"] = os.path.join(pki, cert + ".key")
    return c


def roundtrip_kafka_python(addr, conf, label):
    topic = "kp-" + uuid.uuid4().hex[:8]
    p = kafka.KafkaProducer(bootstrap_servers=addr, **conf)
    for i in range(3):
        p.send(topic, ("%s-%d" % (label, i)).encode()).get(timeout=DEADLINE)
    p.close()
    c = kafka.KafkaConsumer(topic, bootstrap_servers=addr, auto_offset_reset="earliest",
                            consumer_timeout_ms=20000, **conf)
    got = []
    for m in c:
        got.append(m.value.decode())
        if len(got) == 3:
            break
    c.close()
    assert got == ["%s-%d" % (label, i) for i in range(3)], f"{label}: {got}"


def refused_kafka_python(addr, conf, label):
    try:
        p = kafka.KafkaProducer(bootstrap_servers=addr, max_block_ms=8000, **conf)
        p.send("kp-refused", b"x").get(timeout=10)
    except (kafka.errors.KafkaError, OSError, AssertionError):
        return
    raise AssertionError(f"{label}: kafka-python got through")


admin = AdminClient(ck(plain))

if phase == "main":
    ups = [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     b"alice-secret"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"carol-secret"),
    ]
    for user, f in admin.alter_user_scram_credentials(ups).items():
        f.result(DEADLINE)
    # Kafka's bounds: too few iterations is UNACCEPTABLE_CREDENTIAL.
    bad = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10), b"pw")])
    try:
        bad["dave"].result(DEADLINE)
        raise AssertionError("10 iterations accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL, e
    described = admin.describe_user_scram_credentials(["alice", "nobody"])
    alice = described["alice"].result(DEADLINE)
    infos = [(i.mechanism, i.iterations) for i in alice.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_512, 8192)], infos
    try:
        described["nobody"].result(DEADLINE)
        raise AssertionError("a user without credentials was described")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.RESOURCE_NOT_FOUND, e

    # librdkafka over every protocol and mechanism.
    roundtrip_librdkafka(ssl_addr, {"security.protocol": "SSL", "ssl.ca.location": CA}, "ssl")
    roundtrip_librdkafka(ssl_addr, {"security.protocol": "SSL", "ssl.ca.location": CA,
                                    "ssl.certificate.location": os.path.join(pki, "client.pem"),
                                    "ssl.key.location": os.path.join(pki, "client.key")}, "mtls")
    roundtrip_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "alice-secret"),
                         "sasl-plaintext-scram512")
    roundtrip_librdkafka(sasl_ssl, sasl("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"),
                         "sasl-ssl-scram256")
    roundtrip_librdkafka(sasl_ssl, sasl("SASL_SSL", "PLAIN", "alice", "alice-secret"), "sasl-ssl-plain")

    # kafka-python too.
    roundtrip_kafka_python(ssl_addr, kp_conf("SSL", cert="client"), "kp-mtls")
    roundtrip_kafka_python(sasl_ssl, kp_conf("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
                           "kp-sasl-ssl-scram512")
    roundtrip_kafka_python(sasl_plain, kp_conf("SASL_PLAINTEXT", "PLAIN", "bob", "bob-secret"),
                           "kp-sasl-plain")

    # Refusals.
    auth = KafkaError._AUTHENTICATION
    refused_librdkafka(sasl_ssl, sasl("SASL_SSL", "SCRAM-SHA-512", "alice", "wrong"), "wrong password", auth)
    refused_librdkafka(sasl_ssl, sasl("SASL_SSL", "SCRAM-SHA-256", "mallory", "x"), "unknown user", auth)
    refused_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"), "wrong PLAIN", auth)
    # alice has no SHA-256 credential.
    refused_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret"),
                       "other mechanism", auth)
    refused_librdkafka(ssl_addr, {}, "plaintext client on the TLS port")
    refused_librdkafka(plain, {"security.protocol": "SSL", "ssl.ca.location": CA},
                       "TLS client on the plaintext port")
    refused_librdkafka(sasl_plain, {}, "no SASL on a SASL port")
    refused_kafka_python(sasl_ssl, kp_conf("SASL_SSL", "SCRAM-SHA-512", "alice", "nope"), "kp wrong password")

    # A deleted credential no longer authenticates.
    roundtrip_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "carol-secret"),
                         "carol before deletion")
    for _, f in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]).items():
        f.result(DEADLINE)
    refused_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "carol-secret"),
                       "carol after deletion", auth)
elif phase == "mtls-required":
    roundtrip_librdkafka(ssl_addr, {"security.protocol": "SSL", "ssl.ca.location": CA,
                                    "ssl.certificate.location": os.path.join(pki, "client.pem"),
                                    "ssl.key.location": os.path.join(pki, "client.key")}, "mtls-required")
    refused_librdkafka(ssl_addr, {"security.protocol": "SSL", "ssl.ca.location": CA,
                                  "ssl.certificate.location": os.path.join(pki, "rogue.pem"),
                                  "ssl.key.location": os.path.join(pki, "rogue.key")},
                       "client certificate of another CA")
    refused_librdkafka(ssl_addr, {"security.protocol": "SSL", "ssl.ca.location": CA}, "no client certificate")
    refused_kafka_python(ssl_addr, kp_conf("SSL", cert="rogue"), "kp rogue certificate")
elif phase == "reauth":
    # connections.max.reauth.ms is 2 s: librdkafka re-authenticates on its
    # connections (KIP-368) and keeps them; nothing is refused or lost.
    import urllib.request

    def accepted():
        text = urllib.request.urlopen(http + "/metrics", timeout=10).read().decode()
        # Kafka's connections only (the scrape is an http one).
        return sum(float(l.split()[-1]) for l in text.splitlines()
                   if l.startswith("magnetar_connections_accepted_total") and 'listener="kafka"' in l)

    admin = AdminClient(ck(plain))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dora", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dora-secret")])["dora"].result(DEADLINE)
    topic = "reauth-" + uuid.uuid4().hex[:8]
    errors, delivered = [], []
    p = Producer(ck(sasl_plain, **sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "dora", "dora-secret"),
                    error_cb=errors.append))
    p.produce(topic, b"first", on_delivery=lambda e, m: delivered.append(e))
    assert p.flush(DEADLINE) == 0 and delivered == [None], f"first delivery: {delivered} {errors}"
    # The admin client may still open connections of its own: gone before
    # counting.
    del admin
    before = accepted()
    assert before >= 2, f"{before} kafka connections counted"
    end = time.time() + 7
    sent = 1
    while time.time() < end:
        p.produce(topic, b"m%d" % sent, on_delivery=lambda e, m: delivered.append(e))
        sent += 1
        p.poll(0.2)
    assert p.flush(DEADLINE) == 0, "undelivered messages"
    assert delivered == [None] * sent, f"deliveries: {[e for e in delivered if e]}"
    after = accepted()
    assert after == before, f"{after - before} new connections: the sessions were not re-authenticated"
    assert not errors, f"client errors: {errors}"
elif phase == "mapped-principal":
    # The broker maps CN=client-1 to User:CLIENT-1, its only super user:
    # anything else would be denied everything by the authorizer.
    mtls = {"security.protocol": "SSL", "ssl.ca.location": CA,
            "ssl.certificate.location": os.path.join(pki, "client.pem"),
            "ssl.key.location": os.path.join(pki, "client.key")}
    roundtrip_librdkafka(ssl_addr, mtls, "mapped-principal")
elif phase == "unmapped-principal":
    # No mapping rule applies to CN=client-1: refused after the handshake.
    mtls = {"security.protocol": "SSL", "ssl.ca.location": CA,
            "ssl.certificate.location": os.path.join(pki, "client.pem"),
            "ssl.key.location": os.path.join(pki, "client.key")}
    refused_librdkafka(ssl_addr, mtls, "no mapping rule applies")
elif phase == "oauthbearer":
    # JWTs signed with the broker's token.secret.key; alice is the super
    # user of an authorizer that denies everyone else.
    def token(name):
        with open(os.path.join(pki, "token-" + name)) as f:
            return f.read().strip()

    def oauth(name, protocol):
        t = token(name)
        c = {"security.protocol": protocol, "sasl.mechanisms": "OAUTHBEARER",
             "oauth_cb": lambda _config: (t, time.time() + 3600)}
        if protocol == "SASL_SSL":
            c["ssl.ca.location"] = CA
        return c

    roundtrip_librdkafka(sasl_ssl, oauth("alice", "SASL_SSL"), "oauth-alice-ssl")
    roundtrip_librdkafka(sasl_plain, oauth("alice", "SASL_PLAINTEXT"), "oauth-alice")
    refused_librdkafka(sasl_plain, oauth("expired", "SASL_PLAINTEXT"), "an expired token",
                       KafkaError._AUTHENTICATION)
    refused_librdkafka(sasl_plain, oauth("forged", "SASL_PLAINTEXT"), "a token of another key",
                       KafkaError._AUTHENTICATION)
    # bob's token is good, but bob may do nothing.
    results = []
    p = Producer(ck(sasl_plain, **oauth("bob", "SASL_PLAINTEXT"), **{"message.timeout.ms": 20000}))
    p.produce("oauth-bob", b"x", on_delivery=lambda e, m: results.append(e))
    p.flush(DEADLINE)
    assert len(results) == 1 and results[0] is not None and \
        results[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, f"bob's produce: {results}"

    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def __init__(self, name):
            self.name = name

        def token(self):
            return token(self.name)

    kp = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
          "request_timeout_ms": 15000}
    roundtrip_kafka_python(sasl_plain, dict(kp, sasl_oauth_token_provider=Tokens("alice")),
                           "kp-oauth-alice")
    refused_kafka_python(sasl_plain, dict(kp, sasl_oauth_token_provider=Tokens("forged")),
                         "kp forged token")
else:
    roundtrip_librdkafka(sasl_ssl, sasl("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
                         "after-restart-alice")
    roundtrip_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
                         "after-restart-bob")
    refused_librdkafka(sasl_plain, sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "carol-secret"),
                       "carol after restart", KafkaError._AUTHENTICATION)

print("OK")
