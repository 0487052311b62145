#!/usr/bin/env python3
"""Pipelined Pulsar sends with the official Python client: send_async of N
1 KiB messages (batching on or off) to one topic, up to 5,000 in flight;
prints messages per second.

Usage: bench-pulsar-pipelined.py SERVICE_URL TOPIC N BATCHING(0|1)
"""
import sys, threading, time, pulsar
url, topic, n, batching = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
c = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
p = c.create_producer(topic, batching_enabled=batching, max_pending_messages=5000, block_if_queue_full=True)
done = threading.Semaphore(0)
payload = b"x" * 1024
ok = [0]
def cb(res, _id):
    if res == pulsar.Result.Ok: ok[0] += 1
    done.release()
p.send(payload)
t = time.time()
for i in range(n):
    p.send_async(payload, cb)
for i in range(n):
    done.acquire()
dt = time.time() - t
print("%s batching=%s: %d ok, %.0f msg/s" % (topic, batching, ok[0], n / dt))
c.close()
