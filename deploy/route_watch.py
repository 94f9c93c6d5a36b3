#!/usr/bin/env python3
"""How long after a leader's election the NameServer routes to it (issue 29), as
deploy/failover-gaps.sh records it.

    deploy/route_watch.py NAMESRV TOPIC OLD_LEADER_REMOTING ADMIN[=REMOTING] ...

Started just before the leader is stopped. Every 5 ms it asks each surviving replica's
`/api/v1/status` for its role and term, and the NameServer for the topic's route
(GET_ROUTEINFO_BY_TOPIC, the request every RocketMQ client polls). It prints one JSON line:

- `elected_ms`: from the start to the first status that shows a replica other than the old leader
  as leader;
- `routed_ms`: from the start to the first route whose brokerId 0 is that replica's address;
- `route_delay_ms`: routed_ms - elected_ms, the time the route lags the election.

A status answer is read as soon as it arrives, so `elected_ms` is late by at most one poll (5 ms
plus one HTTP round trip); the delay is then an upper bound minus that error.
"""

import json
import re
import socket
import struct
import sys
import time
import urllib.request

POLL_S = 0.005
DEADLINE_S = 30.0
GET_ROUTEINFO_BY_TOPIC = 105


def route_leader(ns, topic, opaque):
    """brokerId 0's address in the NameServer's route for `topic`, or None."""
    host, port = ns.rsplit(":", 1)
    header = json.dumps({
        "code": GET_ROUTEINFO_BY_TOPIC, "language": "JAVA", "version": 0, "opaque": opaque,
        "flag": 0, "extFields": {"topic": topic},
    }).encode()
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    try:
        with socket.create_connection((host, int(port)), timeout=1) as s:
            s.sendall(frame)
            data = b""
            while len(data) < 4:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
            total = struct.unpack(">I", data[:4])[0]
            while len(data) < 4 + total:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
    except OSError:
        return None
    header_len = struct.unpack(">I", data[4:8])[0] & 0xFFFFFF
    head = json.loads(data[8:8 + header_len])
    if head.get("code") != 0:
        return None
    body = data[8 + header_len:4 + total].decode("utf-8", "replace")
    # fastjson writes the brokerAddrs map with bare numeric keys ({0:"host:port"}).
    m = re.search(r'"brokerAddrs"\s*:\s*\{[^}]*?"?\b0\b"?\s*:\s*"([^"]+)"', body)
    return m.group(1) if m else None


def status_role(admin):
    try:
        with urllib.request.urlopen(f"http://{admin}/api/v1/status", timeout=0.5) as r:
            s = json.load(r)
            return s.get("role"), s.get("term")
    except (OSError, ValueError):
        return None, None


def main():
    ns, topic, old = sys.argv[1], sys.argv[2], sys.argv[3]
    replicas = [a.split("=", 1) for a in sys.argv[4:]]
    start = time.monotonic()
    elected_at = routed_at = None
    new_leader = None
    opaque = 0
    while time.monotonic() - start < DEADLINE_S:
        now = time.monotonic()
        if elected_at is None:
            for admin, remoting in replicas:
                if remoting == old:
                    continue
                role, _term = status_role(admin)
                if role == "leader":
                    elected_at, new_leader = time.monotonic(), remoting
                    break
        if new_leader is not None:
            opaque += 1
            if route_leader(ns, topic, opaque) == new_leader:
                routed_at = time.monotonic()
                break
        time.sleep(max(0.0, POLL_S - (time.monotonic() - now)))
    out = {"new_leader": new_leader}
    if elected_at is not None:
        out["elected_ms"] = round((elected_at - start) * 1000, 1)
    if routed_at is not None:
        out["routed_ms"] = round((routed_at - start) * 1000, 1)
        out["route_delay_ms"] = round((routed_at - elected_at) * 1000, 1)
    print(json.dumps(out), flush=True)
    sys.exit(0 if routed_at is not None else 1)


if __name__ == "__main__":
    main()
