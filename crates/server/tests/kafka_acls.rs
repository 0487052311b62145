//! Kafka ACLs with the StandardAuthorizer's semantics, judged by
//! independent clients: librdkafka (Python confluent-kafka) and
//! kafka-python, through `tests/python/kafka_acls.py`. The PLAINTEXT
//! listener (principal `User:ANONYMOUS`, a super user) is the admin; SASL
//! users are checked on the SASL_PLAINTEXT listener: prefixed and literal
//! grants, wildcards, DENY beating ALLOW, implied operations, cluster
//! ACLs, the exact authorization error codes, DescribeAcls filters,
//! DeleteAcls, and ACLs surviving a SIGKILL.

mod common;

use common::BrokerProcess;

fn run(phase: &str, broker: &BrokerProcess) {
    let (bootstrap, sasl) = (broker.bootstrap(), broker.listener("SASL_PLAINTEXT"));
    broker.run_python_script(
        "kafka_acls.py",
        &[phase.as_ref(), bootstrap.as_ref(), sasl.as_ref()],
    );
}

/// Users alice, bob, carol and dave (SCRAM-SHA-512, also usable with
/// PLAIN) and their ACLs made by the admin; then, for each, what the ACLs
/// grant works and everything else is refused with Kafka's error code
/// (TOPIC_, GROUP_, CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
/// with both clients; a deleted ACL stops granting. After a SIGKILL and a
/// restart the remaining ACLs, and only they, are still in force.
#[test]
fn acls_with_librdkafka_and_kafka_python() {
    let settings = [
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=false",
        "group.initial.rebalance.delay.ms=0",
        "connection.failed.authentication.delay.ms=50",
    ];
    let mut broker = BrokerProcess::start(&settings);
    run("main", &broker);
    broker.kill();
    broker.restart();
    run("after-restart", &broker);
}
