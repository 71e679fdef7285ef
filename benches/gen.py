#!/usr/bin/env python3
"""Deterministic benchmark corpus: realistic container logs.

    python3 benches/gen.py LINES [--shape mixed|json|keyed|traced] [--per-second N] > corpus.log

Shape `json`: plain zap JSON lines from 24 livekit-server and 8 egress
nodes, interleaved, with no kubectl/stern prefix (as log files and Loki
deliver them); nodeID on egress lines and on livekit's service/router lines
only; about 1 % signatures and 2 % near-misses.

Shape `keyed`: the same, but every line carries its `nodeID` (as many
services log it: a group key on every line). Shape `traced`: `keyed` plus a
`traceID` and a `requestID` on every line (fresh ids: high-cardinality
fields the decoder must step over).

Mix (by line): livekit-server zap JSON behind `kubectl --prefix` (12 nodes),
egress zap console lines behind stern prefixes (6 nodes), kube event JSON,
kubelet journal (klog) lines, gateway logfmt with upstreams, go-redis and
other plain text. About 1 % of lines are incident signatures (spread over
time and nodes, so alerts fire and resolve), about 2 % near-misses that share
words with the signatures but must not match.
"""
import random
import sys
from datetime import datetime, timezone

args = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(args[0]) if args else 2_000_000
SHAPE = sys.argv[sys.argv.index("--shape") + 1] if "--shape" in sys.argv else "mixed"
# Lines per second of event time (mean): the default 1000 keeps the corpora
# of earlier runs byte for byte.
PER_SECOND = float(sys.argv[sys.argv.index("--per-second") + 1]) if "--per-second" in sys.argv else 1000.0
SCALE = 1000.0 / PER_SECOND
if SHAPE not in ("mixed", "json", "keyed", "traced"):
    sys.exit(f"unknown shape {SHAPE}: mixed, json, keyed or traced")
rng = random.Random(20261129)
B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def rid(p, n=12):
    return p + "".join(rng.choice(B62) for _ in range(n))


lk = [(f"livekit-server-7c9d8f6b5-{''.join(rng.choice('bcdfghjkmnpqrstvwxz2456789') for _ in range(5))}", rid("ND_")) for _ in range(12)]
eg = [(f"egress-5f7d9c8b4-{''.join(rng.choice('bcdfghjkmnpqrstvwxz2456789') for _ in range(5))}", rid("NE_")) for _ in range(6)]
rooms = [rid("RM_") for _ in range(50)]
parts = [rid("PA_") for _ in range(200)]
ups = ["10.2.0.13:9090", "10.2.0.14:9090", "10.2.0.15:9090", "10.2.0.16:9090"]
t = 1764000000.0
out = sys.stdout
w = out.write
day = datetime.fromtimestamp(t, tz=timezone.utc)



def json_shape(keyed=False, traced=False):
    """Plain zap JSON from many nodes, no prefixes; `keyed`: nodeID on every
    line; `traced`: also a traceID and a requestID on every line."""
    global t
    lkn = [rid("ND_") for _ in range(24)]
    egn = [rid("NE_") for _ in range(8)]
    tracks = [rid("TR_") for _ in range(300)]
    lk_msgs = [
        ("info", "livekit.room", "rtc/room.go:512", "participant active", True),
        ("debug", "livekit.transport", "rtc/transport.go:990", "sending offer", True),
        ("info", "livekit.room", "rtc/participant.go:874", "mediaTrack published", True),
        ("debug", "livekit.pub", "rtc/mediatrack.go:221", "RTCP sender report", True),
        ("info", "livekit.room", "rtc/participant.go:1203", "participant closing", True),
        ("info", "livekit", "service/roommanager.go:427", "starting RTC session", False),
        ("debug", "livekit", "routing/redisrouter.go:249", "updated node stats", False),
        ("warn", "livekit.transport", "rtc/transport.go:1123", "ICE connection timeout", True),
    ]
    def node(nid):
        if not keyed:
            return ""
        ids = f',"nodeID":"{nid}"'
        if traced:
            ids += f',"traceID":"{rng.getrandbits(128):032x}","requestID":"{rid("REQ_", 16)}"'
        return ids

    def extra(nid):
        # Lines that carry nodeID already: only the trace ids are added.
        if not traced:
            return ""
        return f',"traceID":"{rng.getrandbits(128):032x}","requestID":"{rid("REQ_", 16)}"'

    for i in range(N):
        t += (0.0005 + rng.random() * 0.001) * SCALE
        hit = rng.random() < 0.01
        near = rng.random() < 0.02
        r = rng.random()
        if r < 0.78:
            nid = lkn[(i * 7) % 24]
            if hit:
                msg = rng.choice(["waiting for participants to exit", "could not update node", "failed to mark as draining"])
                w(f'{{"level":"error","ts":{t:.6f},"logger":"livekit","caller":"routing/redisrouter.go:249","msg":"{msg}","nodeID":"{nid}"{extra(nid)},"error":"could not register node: dial tcp 10.0.0.21:6379: i/o timeout"}}\n')
            elif near:
                msg = rng.choice(["draining RTP buffer before close", "exit requested for track writer", "waiting for participant to publish"])
                w(f'{{"level":"debug","ts":{t:.6f},"logger":"livekit.transport","caller":"rtc/transport.go:990","msg":"{msg}"{node(nid)},"room":"standup","roomID":"{rooms[i % 50]}"}}\n')
            else:
                level, logger, caller, msg, room = lk_msgs[i % len(lk_msgs)]
                if room:
                    w(f'{{"level":"{level}","ts":{t:.6f},"logger":"{logger}","caller":"{caller}","msg":"{msg}"{node(nid)},"room":"standup-{i % 50}","roomID":"{rooms[i % 50]}","participant":"user_{i % 997}","participantID":"{parts[i % 200]}","trackID":"{tracks[i % 300]}","remote":false}}\n')
                else:
                    w(f'{{"level":"{level}","ts":{t:.6f},"logger":"{logger}","caller":"{caller}","msg":"{msg}","nodeID":"{nid}"{extra(nid)},"nodeIP":"10.0.{i % 24}.7","numRooms":{i % 9},"numClients":{i % 31},"cpuLoad":{rng.random():.3f}}}\n')
        else:
            nid = egn[i % 8]
            eg = rid("EG_")
            if hit:
                w(f'{{"level":"info","ts":{t:.6f},"logger":"egress","caller":"info/io.go:269","msg":"egress_failed","nodeID":"{nid}"{extra(nid)},"clusterID":"","egressID":"{eg}","error":"No space left on the resource.","code":500}}\n')
            else:
                w(f'{{"level":"debug","ts":{t:.6f},"logger":"egress","caller":"stats/monitor.go:246","msg":"cpu check","nodeID":"{nid}"{extra(nid)},"clusterID":"","total":8,"available":{rng.random() * 8:.2f},"pending":0,"used":1.5,"required":4,"activeRequests":{i % 3},"canAccept":true}}\n')


if SHAPE != "mixed":
    json_shape(keyed=SHAPE in ("keyed", "traced"), traced=SHAPE == "traced")
    sys.exit(0)

for i in range(N):
    t += (0.0005 + rng.random() * 0.001) * SCALE
    r = rng.random()
    hit = rng.random() < 0.01
    near = rng.random() < 0.02
    if r < 0.40:
        pod, nid = lk[i % 12]
        if hit:
            msg = rng.choice(["waiting for participants to exit", "could not update node", "failed to mark as draining"])
            w(f'[pod/{pod}/livekit-server] {{"level":"error","ts":{t:.6f},"logger":"livekit","caller":"routing/redisrouter.go:249","msg":"{msg}","nodeID":"{nid}","error":"could not register node: dial tcp 10.0.0.21:6379: i/o timeout"}}\n')
        elif near:
            msg = rng.choice(["draining RTP buffer before close", "exit requested for track writer", "waiting for participant to publish"])
            w(f'[pod/{pod}/livekit-server] {{"level":"debug","ts":{t:.6f},"logger":"livekit.transport","caller":"rtc/transport.go:990","msg":"{msg}","room":"standup","roomID":"{rooms[i % 50]}"}}\n')
        else:
            w(f'[pod/{pod}/livekit-server] {{"level":"info","ts":{t:.6f},"logger":"livekit.room","caller":"rtc/room.go:512","msg":"participant active","room":"standup-{i % 50}","roomID":"{rooms[i % 50]}","participant":"user_{i % 997}","participantID":"{parts[i % 200]}","remote":false,"trackCount":{i % 7}}}\n')
    elif r < 0.55:
        pod, nid = eg[i % 6]
        ts = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if hit:
            w(f'{pod} egress {ts}\tINFO\tegress\tinfo/io.go:269\tegress_failed\t{{"nodeID": "{nid}", "clusterID": "", "egressID": "{rid("EG_")}", "error": "No space left on the resource.", "code": 500}}\n')
        else:
            w(f'{pod} egress {ts}\tDEBUG\tegress\tstats/monitor.go:246\tcpu check\t{{"nodeID": "{nid}", "clusterID": "", "total": 8, "available": {rng.random() * 8:.2f}, "pending": 0, "used": 1.5, "required": 4, "activeRequests": {i % 3}, "canAccept": true}}\n')
    elif r < 0.60:
        pod = f"api-6b8f7c9d4-{i % 40:05d}"
        ts = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if hit:
            msg, reason, typ = "Liveness probe failed: HTTP probe failed with statuscode: 503", "Unhealthy", "Warning"
        else:
            msg, reason, typ = "Container image \\\"api:1.4\\\" already present on machine", "Pulled", "Normal"
        w(f'{{"apiVersion":"v1","count":1,"eventTime":null,"firstTimestamp":"{ts}","involvedObject":{{"apiVersion":"v1","fieldPath":"spec.containers{{api}}","kind":"Pod","name":"{pod}","namespace":"prod","uid":"0b8c2e0e-6c1d-4f55-9a58-2f0a8b7e1d11"}},"kind":"Event","lastTimestamp":"{ts}","message":"{msg}","metadata":{{"name":"{pod}.17cb1a2b3c4d5e6f","namespace":"prod"}},"reason":"{reason}","source":{{"component":"kubelet","host":"node-{i % 8}"}},"type":"{typ}"}}\n')
    elif r < 0.70:
        d = datetime.fromtimestamp(t, tz=timezone.utc)
        host = f"node-{i % 8}"
        w(d.strftime("%b %d %H:%M:%S") + f' {host} kubelet[1187]: I' + d.strftime("%m%d %H:%M:%S.%f") + f'    1187 kubelet.go:2668] "SyncLoop (probe)" probe="readiness" status="ready" pod="prod/api-6b8f7c9d4-{i % 40:05d}"\n')
    elif r < 0.95:
        u = ups[i % 4]
        ts = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if hit:
            w(f'time={ts} level=error msg="auth check failed" upstream={u} method=/auth.v1.Auth/Check err="rpc error: code = DeadlineExceeded desc = context deadline exceeded"\n')
        elif near:
            w(f'time={ts} level=warn msg="deadline budget low" upstream={u} method=/auth.v1.Auth/Check remaining=3ms\n')
        else:
            w(f'time={ts} level=info msg="auth check ok" upstream={u} method=/auth.v1.Auth/Check duration={rng.random() * 0.05:.4f}s status=200\n')
    else:
        d = datetime.fromtimestamp(t, tz=timezone.utc)
        if hit:
            w("redis: " + d.strftime("%Y/%m/%d %H:%M:%S") + " pool.go:762: redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused\n")
        else:
            w(f"GStreamer-CRITICAL **: {d.strftime('%H:%M:%S')}.{i % 1000:03d}: gst_pad_push: assertion 'GST_IS_PAD (pad)' failed\n")
