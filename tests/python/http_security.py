"""HTTPS, authentication (Bearer JWT, Basic) and authorization on the HTTP
admin API, with Python's own HTTP and TLS stack (urllib, ssl).

usage: http_security.py HTTP_URL HTTPS_URL KAFKA_PLAINTEXT PKI_DIR
"""
import base64
import http.client as httpclient
import json
import os
import ssl
import sys
import urllib.error
import urllib.request

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

http, https, kafka_plain, pki = sys.argv[1:5]
DEADLINE = 60
CTX = ssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))


def token(name):
    with open(os.path.join(pki, "token-" + name)) as f:
        return f.read().strip()


def bearer(name):
    return {"Authorization": "Bearer " + token(name)}


def basic(user, password):
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": "Basic " + raw}


def parse(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def call(method, path, headers=None, base=None, body=None):
    base = base or https
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=20, context=CTX if base.startswith("https") else None) as r:
            text = r.read().decode()
            return r.status, parse(text), r.headers
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        return e.code, parse(text), e.headers


def status(method, path, headers=None, base=None, body=None):
    return call(method, path, headers, base, body)[0]


admin = AdminClient({"bootstrap.servers": kafka_plain})
admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret")])["carol"].result(DEADLINE)


def allow(principal, restype, name, op, pattern=ResourcePatternType.LITERAL):
    return AclBinding(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


futures = admin.create_acls([
    allow("User:bob", ResourceType.TOPIC, "bob-", AclOperation.CREATE, ResourcePatternType.PREFIXED),
    allow("User:bob", ResourceType.TOPIC, "bob-", AclOperation.DESCRIBE, ResourcePatternType.PREFIXED),
    allow("User:carol", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
])
for f in futures.values():
    f.result(DEADLINE)

# Health checks and the API document are open, on both listeners.
for base in (http, https):
    assert status("GET", "/health/live", base=base) == 200, base
    assert status("GET", "/openapi.json", base=base) == 200, base

# No credentials: 401 with a challenge.
code, body, headers = call("GET", "/admin/v2/tenants")
assert code == 401 and "Bearer" in headers.get("WWW-Authenticate", ""), (code, body, dict(headers))
assert status("GET", "/admin/v2/tenants", base=http) == 401

# Bad credentials: 401 whatever was wrong.
for label, h in [("forged token", bearer("forged")), ("expired token", bearer("expired")),
                 ("wrong password", basic("carol", "nope")), ("unknown user", basic("mallory", "x")),
                 ("garbage", {"Authorization": "Basic !!!"}), ("other scheme", {"Authorization": "Digest x"})]:
    assert status("GET", "/admin/v2/tenants", h) == 401, label

# alice, a super user, by token over HTTPS.
code, tenants, _ = call("GET", "/admin/v2/tenants", bearer("alice"))
assert code == 200 and "public" in tenants, (code, tenants)
assert status("PUT", "/admin/v2/persistent/public/default/alice-t", bearer("alice")) in (200, 204)
code, lookup, _ = call("GET", "/lookup/v2/topic/persistent/public/default/alice-t", bearer("alice"))
assert code == 200 and lookup["brokerUrlTls"].startswith("pulsar+ssl://"), lookup
assert lookup["httpUrlTls"].startswith("https://"), lookup
assert status("GET", "/metrics", bearer("alice")) == 200

# carol by password (Basic, checked against her SCRAM credential): may
# describe the cluster, nothing more.
assert status("GET", "/admin/v2/tenants", basic("carol", "carol-secret")) == 200
assert status("PUT", "/admin/v2/tenants/carols", basic("carol", "carol-secret"),
              body={"allowedClusters": []}) == 403
assert status("GET", "/metrics", basic("carol", "carol-secret")) == 200

# bob: Create and Describe on bob-*.
assert status("PUT", "/admin/v2/persistent/public/default/bob-t", bearer("bob")) in (200, 204)
assert status("PUT", "/admin/v2/persistent/public/default/not-bobs", bearer("bob")) == 403
code, listed, _ = call("GET", "/admin/v2/persistent/public/default", bearer("bob"))
assert code == 200 and listed == ["persistent://public/default/bob-t"], (code, listed)
code, listed, _ = call("GET", "/admin/v2/namespaces/public/default/topics", bearer("bob"))
assert code == 200 and listed == ["persistent://public/default/bob-t"], (code, listed)
assert status("GET", "/admin/v2/persistent/public/default/bob-t/stats", bearer("bob")) == 200
assert status("GET", "/admin/v2/persistent/public/default/alice-t/stats", bearer("bob")) == 403
assert status("DELETE", "/admin/v2/persistent/public/default/bob-t", bearer("bob")) == 403
assert status("GET", "/metrics", bearer("bob")) == 403
assert status("DELETE", "/admin/v2/persistent/public/default/bob-t", bearer("alice")) in (200, 204)

# Plain HTTP on the HTTPS port gets no answer from the API.
try:
    code = status("GET", "/admin/v2/tenants", bearer("alice"), base=https.replace("https://", "http://"))
    raise AssertionError(f"plain HTTP on the HTTPS port answered {code}")
except (urllib.error.URLError, httpclient.HTTPException, OSError):
    pass
print("OK")
