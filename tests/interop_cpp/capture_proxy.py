"""A logging TCP proxy that captures the request frames a RocketMQ client sends, one per code.

    python3 capture_proxy.py --namesrv 127.0.0.1:9876 --out DIR [--label cpp]

Listens on a free port (printed as `{"event": "listening", "namesrv": "127.0.0.1:PORT"}`) and
forwards to the real NameServer. Every broker address in a NameServer response (a route, a cluster
table) is replaced by the address of a further proxy to that broker, started on first sight, so the
client's broker traffic flows through the proxy too. The first request frame of every request code
each side receives is written to `DIR/<label>-<namesrv|broker>-<code>[-<variant>].hex`: the whole
frame (length prefix included) as lowercase hex, 64 bytes a line. Sends have variants (`batch`,
`oneway`, `retry` for a send to a `%RETRY%` topic), so each way a client sends is kept. Stops on
stdin EOF.

Clients send CONSUMER_SEND_MSG_BACK to a message's store host (the C++ client does), not to a
routed address: so the STOREHOST of every record in a PULL_MESSAGE response is rewritten to the
proxy of that broker too (IPv4 records; the body CRC does not cover it).

A frame is `i32 total | i32 (serializeType << 24 | headerLen) | header | body`; responses have bit
0 of `flag` set. Only JSON headers are rewritten (every 4.x client's default); frames are passed
through unchanged otherwise.
"""

import argparse
import json
import os
import re
import socket
import struct
import sys
import threading

ADDRESS = re.compile(rb"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d{1,5}")
HEX_LINE_BYTES = 64

_lock = threading.Lock()
_captured = set()
_broker_proxies = {}


def read_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data.extend(chunk)
    return bytes(data)


def read_frame(sock):
    prefix = read_exact(sock, 4)
    if prefix is None:
        return None
    (total,) = struct.unpack(">i", prefix)
    rest = read_exact(sock, total)
    return None if rest is None else prefix + rest


def split(frame):
    (word,) = struct.unpack(">i", frame[4:8])
    header_len = word & 0xFFFFFF
    serialize = (word >> 24) & 0xFF
    return serialize, frame[8:8 + header_len], frame[8 + header_len:]


def code_and_flag(frame):
    serialize, header, _ = split(frame)
    if serialize == 0:
        h = json.loads(header.decode("utf-8"))
        return h.get("code"), h.get("flag", 0)
    # ROCKETMQ binary header: i16 code, u8 language, i16 version, i32 opaque, i32 flag, ...
    code, _lang, _ver, _opaque, flag = struct.unpack(">hBhii", header[:13])
    return code, flag


SEND_CODES = (10, 310, 320)


def variant(frame, code, flag):
    if code not in SEND_CODES:
        return None
    serialize, header, _ = split(frame)
    fields = json.loads(header.decode("utf-8")).get("extFields", {}) if serialize == 0 else {}
    topic = str(fields.get("topic", fields.get("b", "")))
    if code == 320 or str(fields.get("batch", fields.get("m", ""))).lower() in ("1", "true"):
        return "batch"
    if topic.startswith("%RETRY%"):
        return "retry"
    if flag & 2:
        return "oneway"
    return None


def opaque_of(frame):
    serialize, header, _ = split(frame)
    if serialize == 0:
        return json.loads(header.decode("utf-8")).get("opaque")
    return struct.unpack(">i", header[5:9])[0]


def capture(out, label, role, frame):
    code, flag = code_and_flag(frame)
    if flag & 1:
        return
    kind = variant(frame, code, flag)
    key = (role, code, kind)
    with _lock:
        if key in _captured:
            return
        _captured.add(key)
    hexed = frame.hex()
    lines = [hexed[i:i + 2 * HEX_LINE_BYTES] for i in range(0, len(hexed), 2 * HEX_LINE_BYTES)]
    name = "%s-%s-%d%s.hex" % (label, role, code, "-" + kind if kind else "")
    path = os.path.join(out, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    emit("captured", role=role, code=code, path=path)


def rewrite_addresses(frame, out, label):
    """Replaces every broker address in a NameServer response body by its proxy's address."""
    serialize, header, body = split(frame)
    if not ADDRESS.search(body):
        return frame

    def replace(match):
        return broker_proxy(match.group(0).decode(), out, label).encode()

    body = ADDRESS.sub(replace, body)
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize << 24) | len(header)) + header + body


PULL_MESSAGE = 11
# Offset of STOREHOST in a record with IPv4 hosts: total, magic, body CRC, queue id, flag (4 each),
# queue offset, physical offset (8 each), sysFlag (4), born timestamp (8), born host (8), store
# timestamp (8); then the 4-byte address and the 4-byte port.
STORE_HOST_OFFSET = 64


def rewrite_store_hosts(frame, broker, out, label):
    """Points every record's STOREHOST in a PULL_MESSAGE response at the proxy of `broker`."""
    serialize, header, body = split(frame)
    proxy_port = int(broker_proxy(broker, out, label).rsplit(":", 1)[1])
    body = bytearray(body)
    at = 0
    while at + STORE_HOST_OFFSET + 8 <= len(body):
        (size,) = struct.unpack(">i", body[at:at + 4])
        if size <= STORE_HOST_OFFSET + 8:
            break
        struct.pack_into(">i", body, at + STORE_HOST_OFFSET + 4, proxy_port)
        at += size
    return frame[:8] + header + bytes(body)


def pump(src, dst, on_frame):
    try:
        while True:
            frame = read_frame(src)
            if frame is None:
                break
            dst.sendall(on_frame(frame))
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener, target, role, out, label):
    host, port = target.rsplit(":", 1)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, int(port)))
        pulls = set()

        def to_server(frame, role=role, pulls=pulls):
            capture(out, label, role, frame)
            code, flag = code_and_flag(frame)
            if code == PULL_MESSAGE and not flag & 1:
                pulls.add(opaque_of(frame))
            return frame

        def to_client(frame, role=role, pulls=pulls):
            if role == "namesrv":
                return rewrite_addresses(frame, out, label)
            code, flag = code_and_flag(frame)
            opaque = opaque_of(frame)
            if flag & 1 and opaque in pulls:
                pulls.discard(opaque)
                if code == 0:
                    return rewrite_store_hosts(frame, target, out, label)
            return frame

        threading.Thread(target=pump, args=(client, server, to_server), daemon=True).start()
        threading.Thread(target=pump, args=(server, client, to_client), daemon=True).start()


def listen(target, role, out, label):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, target, role, out, label), daemon=True).start()
    return "127.0.0.1:%d" % listener.getsockname()[1]


def broker_proxy(addr, out, label):
    with _lock:
        if addr in _broker_proxies.values():
            return addr
        if addr not in _broker_proxies:
            _broker_proxies[addr] = listen(addr, "broker", out, label)
            emit("broker_proxy", broker=addr, proxy=_broker_proxies[addr])
        return _broker_proxies[addr]


def emit(event, **fields):
    sys.stdout.write(json.dumps(dict(event=event, **fields)) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", default="cpp")
    a = parser.parse_args()
    os.makedirs(a.out, exist_ok=True)
    emit("listening", namesrv=listen(a.namesrv, "namesrv", a.out, a.label))
    sys.stdin.read()


if __name__ == "__main__":
    main()
