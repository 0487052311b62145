"""Kafka ACLs (StandardAuthorizer semantics) judged by two independent
clients: librdkafka (confluent-kafka) and kafka-python.

usage: kafka_acls.py PHASE PLAINTEXT SASL_PLAINTEXT
PHASE: main (make users, topics and ACLs, check every grant and refusal,
delete one ACL) or after-restart (what main left is still in force).
The PLAINTEXT listener's principal, User:ANONYMOUS, is a super user: it
is the admin. Names are fixed so that after-restart finds main's state.
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewTopic, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
import kafka
import kafka.admin as kp
import kafka.errors

phase, plain, sasl_plain = sys.argv[1:4]
DEADLINE = 60
TOPIC_AUTH = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = KafkaError.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = KafkaError.CLUSTER_AUTHORIZATION_FAILED
TXN_AUTH = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTH_CODES = (TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH)
USERS = ("alice", "bob", "carol", "dave")


def ck(addr, **extra):
    c = {"bootstrap.servers": addr, "socket.timeout.ms": 10000}
    c.update(extra)
    return c


def user(name, mechanism="SCRAM-SHA-512"):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": name, "sasl.password": name + "-pw"}


def kp_user(name):
    """kafka-python over SASL_PLAINTEXT with PLAIN, which the broker checks
    against the user's stored SCRAM credential."""
    return {"bootstrap_servers": sasl_plain, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": name,
            "sasl_plain_password": name + "-pw", "request_timeout_ms": 15000}


def binding(restype, name, pattern, who, op, perm=AclPermissionType.ALLOW):
    return AclBinding(restype, name, pattern, "User:" + who, "*", op, perm)


T, G, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALICE = {binding(T, "alice-", PRE, "alice", AclOperation.WRITE),
         binding(T, "alice-", PRE, "alice", AclOperation.READ),
         binding(G, "alice-group", LIT, "alice", AclOperation.READ)}
BOB_GROUP = binding(G, "bob-", PRE, "bob", AclOperation.READ)
BOB = {binding(T, "*", LIT, "bob", AclOperation.ALL),
       binding(T, "secret", LIT, "bob", AclOperation.READ, AclPermissionType.DENY),
       BOB_GROUP,
       binding(X, "bob-tx", PRE, "bob", AclOperation.WRITE)}
# Made with kafka-python: Kafka's CLUSTER is librdkafka's BROKER type.
DAVE = {binding(ResourceType.BROKER, "kafka-cluster", LIT, "dave", AclOperation.DESCRIBE),
        binding(ResourceType.BROKER, "kafka-cluster", LIT, "dave", AclOperation.ALTER_CONFIGS)}
EVERY = ALICE | BOB | DAVE
LEFT = EVERY - {BOB_GROUP}  # what main's deletion leaves


def name(code):
    return KafkaError(code).name()


def eventually(check, label):
    """Retries `check` (which raises AssertionError) until it passes or the
    deadline: an ACL change applies to later requests, not necessarily at
    once to the very next one."""
    end = time.time() + DEADLINE
    while True:
        try:
            return check()
        except AssertionError as e:
            if time.time() > end:
                raise AssertionError(f"{label}: still failing after {DEADLINE}s: {e}") from None
        time.sleep(0.2)


def only_result(futures):
    """The result of the one future of an admin call's map. The map stays
    referenced until then: confluent-kafka completes the per-item futures
    from a callback that dies with it."""
    (future,) = futures.values()
    return future.result(DEADLINE)


def raises(code, fn, label):
    """`fn` raises a KafkaException carrying error `code`."""
    try:
        got = fn()
    except KafkaException as e:
        err = e.args[0]
        assert err.code() == code, f"{label}: want {name(code)}, got {err}"
        return
    raise AssertionError(f"{label}: want {name(code)}, but it succeeded with {got!r}")


def produce(addr, conf, topic, label, code=None, n=3):
    """Produces `n` records; every delivery report succeeds (code None) or
    fails with `code`. Answers the values written."""
    reports = []
    p = Producer(ck(addr, **conf, **{"message.timeout.ms": 20000}))
    values = [f"{label}-{uuid.uuid4().hex[:8]}-{i}".encode() for i in range(n)]
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: reports.append(err))
    left = p.flush(DEADLINE)
    assert left == 0, f"{label}: {left} records without a delivery report"
    codes = [e.code() if e else None for e in reports]
    assert codes == [code] * n, \
        f"{label}: delivery reports {reports}, want {name(code) if code else 'success'} for all {n}"
    return values


def consume(addr, conf, topic, group, label, want=(), code=None, wait=20):
    """Subscribes `group` to `topic`: sees every value of `want` with no
    authorization error (code None), or gets a consumer error `code`."""
    c = Consumer(ck(addr, **conf, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, errors = set(), []
    end = time.time() + wait
    try:
        while time.time() < end:
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is None:
                got.add(m.value())
                if code is None and set(want) <= got:
                    return
                continue
            errors.append(err)
            if code is not None and err.code() == code:
                return
            assert code is not None or err.code() not in AUTH_CODES, f"{label}: consumer error {err}"
    finally:
        c.close()
    if code is None:
        raise AssertionError(f"{label}: missing {sorted(set(want) - got)}; errors {errors}")
    raise AssertionError(f"{label}: no consumer error {name(code)} in {wait}s; errors {errors}")


def topics_of(addr, conf):
    return set(AdminClient(ck(addr, **conf)).list_topics(timeout=DEADLINE).topics)


def described(admin, flt):
    return set(admin.describe_acls(flt, request_timeout=DEADLINE).result())


def any_filter(**kw):
    args = dict(restype=ResourceType.ANY, name=None, resource_pattern_type=ResourcePatternType.ANY,
                principal=None, host=None, operation=AclOperation.ANY,
                permission_type=AclPermissionType.ANY)
    args.update(kw)
    return AclBindingFilter(**args)


def same(got, want, label):
    assert got == want, f"{label}:\n got  {sorted(got)}\n want {sorted(want)}\n" \
                        f" extra {sorted(got - want)}\n missing {sorted(want - got)}"


def kp_key(a):
    """A kafka-python ACL as (resource type, name, pattern, principal,
    host, operation, permission), the protocol's numbers."""
    r = a.resource_pattern
    return (int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal, a.host,
            int(a.operation), int(a.permission_type))


def ck_key(b):
    return (b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
            b.operation.value, b.permission_type.value)


def kp_describe(principal, **client):
    a = kafka.KafkaAdminClient(**(client or {"bootstrap_servers": plain}))
    try:
        acls, err = a.describe_acls(kp.ACLFilter(
            principal=principal, host=None, operation=kp.ACLOperation.ANY,
            permission_type=kp.ACLPermissionType.ANY,
            resource_pattern=kp.ResourcePatternFilter(kp.ResourceType.ANY, None,
                                                      kp.ACLResourcePatternType.ANY)))
        assert err is kafka.errors.NoError, err
        return {kp_key(x) for x in acls}
    finally:
        a.close()


def kp_produce(topic):
    """alice with kafka-python, idempotent as it is by default: its
    InitProducerId is allowed by Write on some topic (KIP-679)."""
    p = kafka.KafkaProducer(max_block_ms=20000, **kp_user("alice"))
    try:
        return p.send(topic, b"kafka-python").get(timeout=DEADLINE)
    finally:
        p.close(timeout=10)


def kp_denied_topic(topic):
    try:
        got = kp_produce(topic)
    except kafka.errors.TopicAuthorizationFailedError:
        return
    raise AssertionError(f"kafka-python: alice wrote {got} to {topic}, want TopicAuthorizationFailedError")


admin = AdminClient(ck(plain))

if phase == "main":
    for u, f in admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                         (u + "-pw").encode()) for u in USERS]).items():
        f.result(DEADLINE)
    for t, f in admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)
                                     for t in ("alice-orders", "public", "secret")]).items():
        f.result(DEADLINE)
    public = produce(plain, {}, "public", "admin-public")
    produce(plain, {}, "secret", "admin-secret")

    for b, f in admin.create_acls(sorted(ALICE | BOB)).items():
        assert f.result(DEADLINE) is None, b
    # dave's through kafka-python: another client's CreateAcls encoding.
    kpa = kafka.KafkaAdminClient(bootstrap_servers=plain)
    cluster = kp.ResourcePattern(kp.ResourceType.CLUSTER, "kafka-cluster", kp.ACLResourcePatternType.LITERAL)
    made = kpa.create_acls([kp.ACL("User:dave", "*", op, kp.ACLPermissionType.ALLOW, cluster)
                            for op in (kp.ACLOperation.DESCRIBE, kp.ACLOperation.ALTER_CONFIGS)])
    assert len(made["succeeded"]) == 2 and not made["failed"], made
    kpa.close()

    # DescribeAcls filters.
    eventually(lambda: same(described(admin, any_filter()), EVERY, "every binding"), "describe all")
    same(described(admin, any_filter(principal="User:alice")), ALICE, "principal filter")
    same(described(admin, any_filter(restype=T, name="alice-orders",
                                     resource_pattern_type=ResourcePatternType.MATCH)),
         {b for b in EVERY if b.restype == T and b.name in ("alice-", "*")}, "MATCH alice-orders")
    same(described(admin, any_filter(restype=T, name="secret",
                                     resource_pattern_type=ResourcePatternType.MATCH)),
         {b for b in BOB if b.restype == T}, "MATCH secret")
    same(described(admin, any_filter(restype=T, resource_pattern_type=PRE,
                                     operation=AclOperation.WRITE)),
         {binding(T, "alice-", PRE, "alice", AclOperation.WRITE)}, "PREFIXED WRITE filter")
    same(described(admin, any_filter(principal="User:carol")), set(), "carol has none")

    # alice: her prefix and her group, nothing else.
    alice = user("alice")
    orders = eventually(lambda: produce(sasl_plain, alice, "alice-orders", "alice"), "alice produces")
    consume(sasl_plain, alice, "alice-orders", "alice-group", "alice consumes", want=orders)
    produce(sasl_plain, alice, "public", "alice-public", code=TOPIC_AUTH)
    consume(sasl_plain, alice, "alice-orders", "other-group", "alice, other group", code=GROUP_AUTH)
    seen = topics_of(sasl_plain, alice)
    assert seen == {"alice-orders"}, f"alice's metadata for all topics lists {seen}"
    md = AdminClient(ck(sasl_plain, **alice)).list_topics(topic="public", timeout=DEADLINE)
    t = md.topics.get("public")
    err = t.error if t is not None else "no such topic in the answer"
    assert t is not None and err is not None and err.code() == TOPIC_AUTH, \
        f"alice's metadata for public: {err}"

    # bob: ALL on every topic, but DENY READ on secret beats it.
    bob = user("bob")
    consume(sasl_plain, bob, "public", "bob-1", "bob consumes public", want=public)
    consume(sasl_plain, bob, "secret", "bob-secret", "bob reads secret", code=TOPIC_AUTH)
    produce(sasl_plain, bob, "secret", "bob-secret")
    tx = Producer(ck(sasl_plain, **bob, **{"transactional.id": "bob-tx-1"}))
    tx.init_transactions(DEADLINE)
    tx.begin_transaction()
    tx.produce("public", value=b"bob-in-a-transaction")
    tx.commit_transaction(DEADLINE)

    # carol: no ACL at all.
    carol = user("carol")
    assert topics_of(sasl_plain, carol) == set(), "carol sees topics"
    produce(sasl_plain, carol, "public", "carol", code=TOPIC_AUTH)
    ca = AdminClient(ck(sasl_plain, **carol))
    raises(TOPIC_AUTH, lambda: ca.create_topics([NewTopic("carol-new", 1, 1)])["carol-new"].result(DEADLINE),
           "carol CreateTopics")
    raises(TOPIC_AUTH, lambda: ca.delete_topics(["secret"])["secret"].result(DEADLINE), "carol DeleteTopics")
    everything = topics_of(plain, {})
    assert "secret" in everything and "carol-new" not in everything, f"carol changed topics: {everything}"
    raises(CLUSTER_AUTH, lambda: only_result(ca.create_acls([binding(T, "carol-", PRE, "carol", AclOperation.ALL)])), "carol CreateAcls")
    raises(CLUSTER_AUTH, lambda: only_result(ca.delete_acls([any_filter(principal="User:bob")])), "carol DeleteAcls")
    # librdkafka drops DescribeAcls' top-level error code (it answers an
    # empty list): nothing may leak, and kafka-python checks the code.
    try:
        leaked = described(ca, any_filter())
        assert leaked == set(), f"carol described {leaked}"
    except KafkaException as e:
        assert e.args[0].code() == CLUSTER_AUTH, f"carol DescribeAcls: {e}"
    try:
        kp_describe(None, **kp_user("carol"))
        raise AssertionError("kafka-python: carol described ACLs")
    except kafka.errors.ClusterAuthorizationFailedError:
        pass
    broker = str(next(iter(admin.list_topics(timeout=DEADLINE).brokers)))
    raises(CLUSTER_AUTH, lambda: only_result(ca.describe_configs([ConfigResource(ResourceType.BROKER, broker)])), "carol DescribeConfigs BROKER")
    carol_tx = Producer(ck(sasl_plain, **carol, **{"transactional.id": "carol-tx"}))
    raises(TXN_AUTH, lambda: carol_tx.init_transactions(DEADLINE), "carol InitTransactions")

    # dave: Describe and AlterConfigs on the cluster; not Alter.
    da = AdminClient(ck(sasl_plain, **user("dave")))
    same(described(da, any_filter()), EVERY, "dave describes every binding")
    raises(CLUSTER_AUTH, lambda: only_result(da.create_acls([binding(T, "dave-", PRE, "dave", AclOperation.ALL)])), "dave CreateAcls")
    configs = only_result(da.describe_configs([ConfigResource(ResourceType.BROKER, broker)]))
    assert isinstance(configs, dict), f"dave's DescribeConfigs (implied by AlterConfigs): {configs!r}"

    # kafka-python: PLAIN login against alice's SCRAM credential.
    kp_produce("alice-orders")
    kp_denied_topic("public")
    assert kp_describe("User:bob") == {ck_key(b) for b in BOB}, kp_describe("User:bob")

    # DeleteAcls answers what it removed; bob's groups are then refused.
    res = admin.delete_acls([any_filter(restype=G, name="bob-", resource_pattern_type=PRE,
                                        principal="User:bob", host="*", operation=AclOperation.READ,
                                        permission_type=AclPermissionType.ALLOW),
                             any_filter(principal="User:nobody")])
    deleted = [f.result(DEADLINE) for f in res.values()]
    assert deleted == [[BOB_GROUP], []], f"DeleteAcls answered {deleted}"
    eventually(lambda: same(described(admin, any_filter()), LEFT, "after DeleteAcls"),
               "describe after delete")
    eventually(lambda: consume(sasl_plain, bob, "public", "bob-" + uuid.uuid4().hex[:6],
                               "bob after deletion", code=GROUP_AUTH, wait=15), "bob's group refused")
else:
    eventually(lambda: same(described(admin, any_filter()), LEFT, "after restart"), "ACLs after restart")
    alice = user("alice")
    orders = eventually(lambda: produce(sasl_plain, alice, "alice-orders", "alice-again"),
                        "alice produces after restart")
    consume(sasl_plain, alice, "alice-orders", "alice-group", "alice consumes after restart", want=orders)
    produce(sasl_plain, alice, "public", "alice-public-again", code=TOPIC_AUTH)
    assert topics_of(sasl_plain, alice) == {"alice-orders"}, topics_of(sasl_plain, alice)
    consume(sasl_plain, user("bob"), "public", "bob-2", "bob's deleted group ACL", code=GROUP_AUTH)
    carol = user("carol", "PLAIN")
    assert topics_of(sasl_plain, carol) == set(), "carol sees topics after restart"
    produce(sasl_plain, carol, "public", "carol-again", code=TOPIC_AUTH)
    kp_produce("alice-orders")
    kp_denied_topic("public")
    assert kp_describe("User:alice") == {ck_key(b) for b in ALICE}, kp_describe("User:alice")

print("OK")
