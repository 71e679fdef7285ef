//! One row per log format family, through the decoder the pipeline uses:
//! a real-shaped line (invented values), the event time it must get, its
//! level, its message (the header gone) and some of its fields — in the
//! manner of the aho-corasick crate's test tables. Lines are decoded one
//! per fresh decoder whose input was modified at `MODIFIED`, which
//! completes stamps without a year.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use sigwatch::clock::format_rfc3339;
use sigwatch::decode::time::parse_rfc3339;
use sigwatch::decode::{mined, payload, Decoder, KeyConfig, TimeFrom};
use sigwatch::source::Source;

const MODIFIED: &str = "2024-05-07T12:00:00Z";

struct Row {
    name: &'static str,
    line: &'static str,
    /// The event time (RFC 3339, ms).
    time: &'static str,
    level: Option<&'static str>,
    message: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

const ROWS: &[Row] = &[
    // Cloud-native services.
    Row {
        name: "zap JSON",
        line: r#"{"level":"error","ts":1715079353.434,"logger":"livekit","msg":"failed to mark as draining","nodeID":"ND_1"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "failed to mark as draining",
        fields: &[("nodeID", "ND_1")],
    },
    Row {
        name: "zap console",
        line: "2024-05-07T10:55:53.434Z\tWARN\tegress\tstats/monitor.go:246\tcpu check\t{\"nodeID\": \"NE_1\"}",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "cpu check",
        fields: &[("nodeID", "NE_1"), ("logger", "egress")],
    },
    Row {
        name: "logfmt (Prometheus, Loki, Grafana)",
        line: r#"ts=2024-05-07T10:55:53.434Z caller=main.go:123 level=warn msg="WAL segment loaded" segment=12"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "WAL segment loaded",
        fields: &[("caller", "main.go:123"), ("segment", "12")],
    },
    Row {
        name: "logfmt (containerd, Docker)",
        line: r#"time="2024-05-07T10:55:53.434567890Z" level=error msg="failed to pull image" image="registry/app:1.2""#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "failed to pull image",
        fields: &[("image", "registry/app:1.2")],
    },
    Row {
        name: "klog",
        line: r#"E0507 10:55:53.434567    1187 pod_workers.go:1298] "Error syncing pod, skipping" err="failed to \"StartContainer\"" pod="prod/api-0""#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Error syncing pod, skipping",
        fields: &[("pod", "prod/api-0")],
    },
    Row {
        name: "journal short (kubelet's klog inside)",
        line: r#"May 07 10:55:53 node-a kubelet[1187]: I0507 10:55:53.434567    1187 prober.go:107] "Probe failed" probeType="Liveness""#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("info"),
        message: "Probe failed",
        fields: &[("host", "node-a"), ("program", "kubelet"), ("probeType", "Liveness")],
    },
    Row {
        name: "syslog with an RFC 3339 stamp (rsyslog, journalctl -o short-iso)",
        line: "2024-05-07T10:55:53.434567+00:00 node-a sshd[4242]: Accepted publickey for core from 10.0.0.5 port 52114 ssh2",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("info"),
        message: "Accepted publickey for core from 10.0.0.5 port 52114 ssh2",
        fields: &[("host", "node-a"), ("program", "sshd"), ("pid", "4242")],
    },
    Row {
        name: "syslog RFC 5424",
        line: "<11>1 2024-05-07T10:55:53.434Z node-a app 4242 ID47 - connection refused by upstream",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "connection refused by upstream",
        fields: &[("host", "node-a"), ("program", "app"), ("msgid", "ID47")],
    },
    Row {
        name: "syslog RFC 3164 with a priority and no host",
        line: "<134>May  7 10:55:53 haproxy[7]: 10.0.0.1:5000 [07/May/2024:10:55:53.434] fe be/srv 0/0/0/1/1 200 512",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("info"),
        message: "10.0.0.1:5000 [07/May/2024:10:55:53.434] fe be/srv 0/0/0/1/1 200 512",
        fields: &[("program", "haproxy"), ("pid", "7")],
    },
    Row {
        name: "hclog (Vault, Consul, Nomad)",
        line: "2024-05-07T10:55:53.434Z [ERROR] core: failed to acquire lock: error=\"context deadline exceeded\"",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "failed to acquire lock: error=\"context deadline exceeded\"",
        fields: &[("logger", "core")],
    },
    Row {
        name: "Calico felix",
        line: "2024-05-07 10:55:53.434 [WARNING][606918] felix/route_table.go 902: Failed to get interface; assuming it's down ifaceName=\"cali12ab\"",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Failed to get interface; assuming it's down ifaceName=\"cali12ab\"",
        fields: &[("pid", "606918"), ("caller", "felix/route_table.go 902")],
    },
    Row {
        name: "CoreDNS",
        line: "[ERROR] plugin/errors: 2 example.internal. A: read udp 10.1.0.5:41234->10.0.0.10:53: i/o timeout",
        time: "2024-05-07T12:00:00.000Z",
        level: Some("error"),
        message: "2 example.internal. A: read udp 10.1.0.5:41234->10.0.0.10:53: i/o timeout",
        fields: &[("logger", "plugin/errors")],
    },
    Row {
        name: "Istio / Envoy proxy (lower-case level, tab columns)",
        line: "2024-05-07T10:55:53.434567Z\twarn\tads\tADS: \"10.1.0.7:41234\" sidecar~10.1.0.7 terminated",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "ADS: \"10.1.0.7:41234\" sidecar~10.1.0.7 terminated",
        fields: &[("logger", "ads")],
    },
    Row {
        name: "Envoy",
        line: "[2024-05-07 10:55:53.434][12][warning][config] [source/common/config/grpc_stream.h:101] StreamAggregatedResources gRPC config stream closed: 14, no healthy upstream",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "StreamAggregatedResources gRPC config stream closed: 14, no healthy upstream",
        fields: &[("caller", "source/common/config/grpc_stream.h:101")],
    },
    Row {
        name: "nginx error log",
        line: "2024/05/07 10:55:53 [error] 31#31: *4 connect() failed (111: Connection refused) while connecting to upstream, client: 10.1.0.9",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("error"),
        message: "*4 connect() failed (111: Connection refused) while connecting to upstream, client: 10.1.0.9",
        fields: &[("pid", "31")],
    },
    Row {
        name: "nginx / ingress access log (common log format)",
        line: "10.1.0.9 - - [07/May/2024:10:55:53 +0000] \"GET /healthz HTTP/1.1\" 503 190 \"-\" \"kube-probe/1.29\"",
        time: "2024-05-07T10:55:53.000Z",
        level: None,
        message: "\"GET /healthz HTTP/1.1\" 503 190 \"-\" \"kube-probe/1.29\"",
        fields: &[],
    },
    Row {
        name: "Go log",
        line: "2024/05/07 10:55:53 http: TLS handshake error from 10.1.0.9:52114: EOF",
        time: "2024-05-07T10:55:53.000Z",
        // Go's `log` writes no level; none is guessed from the words.
        level: None,
        message: "http: TLS handshake error from 10.1.0.9:52114: EOF",
        fields: &[],
    },
    Row {
        name: "go-redis (Go log behind a prefix)",
        line: "redis: 2024/05/07 10:55:53 pool.go:762: redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused",
        time: "2024-05-07T10:55:53.000Z",
        level: None,
        message: "redis: connection pool: failed to dial after 5 attempts: dial tcp 10.0.0.21:6379: connect: connection refused",
        fields: &[("caller", "pool.go:762")],
    },
    Row {
        name: "PostgreSQL",
        line: "2024-05-07 10:55:53.434 UTC [61] FATAL:  the database system is starting up",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("fatal"),
        message: "the database system is starting up",
        fields: &[("pid", "61")],
    },
    Row {
        name: "MySQL 8",
        line: "2024-05-07T10:55:53.434567Z 0 [ERROR] [MY-010119] [Server] Aborting",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Aborting",
        fields: &[],
    },
    Row {
        name: "MariaDB",
        line: "2024-05-07 10:55:53 0 [Note] mariadbd: ready for connections.",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("info"),
        message: "ready for connections.",
        fields: &[("logger", "mariadbd")],
    },
    Row {
        name: "Redis server",
        line: "1:M 07 May 2024 10:55:53.434 # Server initialized",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Server initialized",
        fields: &[],
    },
    Row {
        name: "MongoDB (JSON)",
        line: r#"{"t":{"$date":"2024-05-07T10:55:53.434+00:00"},"s":"I","c":"NETWORK","id":23016,"ctx":"listener","msg":"Waiting for connections"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("info"),
        message: "Waiting for connections",
        fields: &[("c", "NETWORK")],
    },
    Row {
        name: "Kafka (bracketed log4j)",
        line: "[2024-05-07 10:55:53,434] WARN [ReplicaFetcher replicaId=1, leaderId=0, fetcherId=0] Error in response for fetch request (kafka.server.ReplicaFetcherThread)",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "[ReplicaFetcher replicaId=1, leaderId=0, fetcherId=0] Error in response for fetch request (kafka.server.ReplicaFetcherThread)",
        fields: &[],
    },
    Row {
        name: "ZooKeeper",
        line: "2024-05-07 10:55:53,434 [myid:1] - WARN  [QuorumPeer[myid=1](plain=0.0.0.0:2181):Follower@129] - Exception when following the leader",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Exception when following the leader",
        fields: &[],
    },
    Row {
        name: "Elasticsearch / Logstash",
        line: "[2024-05-07T10:55:53,434][WARN ][o.e.c.r.a.DiskThresholdMonitor] [es-0] high disk watermark [90%] exceeded on [abc][es-0]",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "high disk watermark [90%] exceeded on [abc][es-0]",
        fields: &[("logger", "o.e.c.r.a.DiskThresholdMonitor")],
    },
    Row {
        name: "Cassandra",
        line: "WARN  [GossipTasks:1] 2024-05-07 10:55:53,434 FailureDetector.java:288 - Not marking nodes down due to local pause",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Not marking nodes down due to local pause",
        fields: &[("caller", "FailureDetector.java:288")],
    },
    Row {
        name: "RabbitMQ",
        line: "2024-05-07 10:55:53.434567+00:00 [error] <0.222.0> closing AMQP connection <0.345.0> (10.1.0.9:52114 -> 10.1.0.4:5672)",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "closing AMQP connection <0.345.0> (10.1.0.9:52114 -> 10.1.0.4:5672)",
        fields: &[],
    },
    Row {
        name: "ClickHouse",
        line: "2024.05.07 10:55:53.434567 [ 1 ] {} <Error> Application: Connection refused",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Connection refused",
        fields: &[("logger", "Application")],
    },
    Row {
        name: "Fluent Bit",
        line: "[2024/05/07 10:55:53] [error] [output:es:es.0] HTTP status=429 URI=/_bulk",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("error"),
        message: "HTTP status=429 URI=/_bulk",
        fields: &[("logger", "output:es:es.0")],
    },
    Row {
        name: "Fluentd",
        line: "2024-05-07 10:55:53 +0000 [warn]: #0 failed to flush the buffer. retry_times=3",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("warn"),
        message: "#0 failed to flush the buffer. retry_times=3",
        fields: &[],
    },
    Row {
        name: "Spring Boot",
        line: "2024-05-07T10:55:53.434+02:00 ERROR 1 --- [nio-8080-exec-1] o.a.c.c.C.[.[.[/].[dispatcherServlet]    : Servlet.service() threw exception",
        time: "2024-05-07T08:55:53.434Z",
        level: Some("error"),
        message: "Servlet.service() threw exception",
        fields: &[("thread", "nio-8080-exec-1")],
    },
    Row {
        name: "logback default",
        line: "10:55:53.434 [main] ERROR com.example.Billing - payment provider unavailable",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "payment provider unavailable",
        fields: &[("thread", "main"), ("logger", "com.example.Billing")],
    },
    Row {
        name: "Keycloak / Quarkus",
        line: "2024-05-07 10:55:53,434 WARN  [org.keycloak.events] (executor-thread-1) type=LOGIN_ERROR, realmId=master, error=invalid_user_credentials",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "(executor-thread-1) type=LOGIN_ERROR, realmId=master, error=invalid_user_credentials",
        fields: &[("logger", "org.keycloak.events")],
    },
    Row {
        name: "Tomcat (java.util.logging)",
        line: "07-May-2024 10:55:53.434 SEVERE [main] org.apache.catalina.core.StandardService.startInternal Failed to start connector",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Failed to start connector",
        fields: &[("thread", "main"), ("logger", "org.apache.catalina.core.StandardService.startInternal")],
    },
    Row {
        name: "Jenkins",
        line: "2024-05-07 10:55:53.434+0000 [id=22]\tWARNING\thudson.model.UpdateCenter#updateDefaultSite: Upgrading Jenkins. Failed to update the default Update Site",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Upgrading Jenkins. Failed to update the default Update Site",
        fields: &[("thread", "id=22")],
    },
    Row {
        name: "Python logging",
        line: "2024-05-07 10:55:53,434 - worker.tasks - ERROR - task 17 failed: timeout",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "task 17 failed: timeout",
        fields: &[("logger", "worker.tasks")],
    },
    Row {
        name: "gunicorn",
        line: "[2024-05-07 10:55:53 +0000] [7] [CRITICAL] WORKER TIMEOUT (pid:12)",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("fatal"),
        message: "WORKER TIMEOUT (pid:12)",
        fields: &[("pid", "7")],
    },
    Row {
        name: "uvicorn",
        line: "ERROR:    Exception in ASGI application",
        time: "2024-05-07T12:00:00.000Z",
        level: Some("error"),
        message: "Exception in ASGI application",
        fields: &[],
    },
    Row {
        name: "Celery",
        line: "[2024-05-07 10:55:53,434: ERROR/ForkPoolWorker-2] Task app.tasks.send[9a1] raised unexpected: ConnectionError()",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Task app.tasks.send[9a1] raised unexpected: ConnectionError()",
        fields: &[("logger", "ForkPoolWorker-2")],
    },
    Row {
        name: "Airflow",
        line: "[2024-05-07T10:55:53.434+0000] {taskinstance.py:2731} ERROR - Task failed with exception",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Task failed with exception",
        fields: &[],
    },
    Row {
        name: "Rust tracing",
        line: "2024-05-07T10:55:53.434567Z ERROR vector::sinks::http: Service call failed. error=Timeout",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Service call failed. error=Timeout",
        fields: &[("logger", "vector::sinks::http")],
    },
    Row {
        name: "Rust env_logger",
        line: "[2024-05-07T10:55:53Z WARN  myapp::db] pool exhausted, waiting",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("warn"),
        message: "pool exhausted, waiting",
        fields: &[("logger", "myapp::db")],
    },
    Row {
        name: "Ruby Logger",
        line: "E, [2024-05-07T10:55:53.434123 #1] ERROR -- sidekiq: job failed: Redis::TimeoutError",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "job failed: Redis::TimeoutError",
        fields: &[("logger", "sidekiq")],
    },
    Row {
        name: "Node winston",
        line: "error: ECONNREFUSED 10.0.0.21:6379 {\"service\":\"api\"}",
        time: "2024-05-07T12:00:00.000Z",
        level: Some("error"),
        message: "ECONNREFUSED 10.0.0.21:6379 {\"service\":\"api\"}",
        fields: &[],
    },
    Row {
        name: "PHP-FPM",
        line: "[07-May-2024 10:55:53] WARNING: [pool www] server reached pm.max_children setting (5), consider raising it",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("warn"),
        message: "[pool www] server reached pm.max_children setting (5), consider raising it",
        fields: &[],
    },
    Row {
        name: "Elixir / Erlang",
        line: "10:55:53.434 [error] GenServer MyApp.Cache terminating",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "GenServer MyApp.Cache terminating",
        fields: &[],
    },
    Row {
        name: "AWS Lambda",
        line: "2024-05-07T10:55:53.434Z\t6d5ab2f2-7c1a-4b3e-9d2f-0a1b2c3d4e5f\tERROR\tInvoke Error",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Invoke Error",
        fields: &[],
    },
    Row {
        name: "supervisord",
        line: "2024-05-07 10:55:53,434 WARN exited: worker (exit status 1; not expected)",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "exited: worker (exit status 1; not expected)",
        fields: &[],
    },
    Row {
        name: "a Go panic",
        line: "panic: runtime error: invalid memory address or nil pointer dereference",
        time: "2024-05-07T12:00:00.000Z",
        level: Some("fatal"),
        message: "panic: runtime error: invalid memory address or nil pointer dereference",
        fields: &[],
    },
    Row {
        name: "Grafana (logfmt with t=)",
        line: r#"logger=sqlstore t=2024-05-07T10:55:53.434567Z level=error msg="Database locked, sleeping then retrying" error="database is locked""#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Database locked, sleeping then retrying",
        fields: &[("logger", "sqlstore")],
    },
    Row {
        name: "OpenTelemetry Collector (zap console, lower-case level)",
        line: "2024-05-07T10:55:53.434Z\terror\texporterhelper/queue_sender.go:101\tExporting failed. Dropping data.\t{\"kind\": \"exporter\", \"data_type\": \"traces\", \"dropped_items\": 512}",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Exporting failed. Dropping data.",
        fields: &[("data_type", "traces")],
    },
    Row {
        name: "Elastic Common Schema JSON",
        line: r#"{"@timestamp":"2024-05-07T10:55:53.434Z","log.level":"WARN","message":"Circuit breaker open","ecs.version":"1.2.0","service.name":"checkout"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Circuit breaker open",
        fields: &[("service.name", "checkout")],
    },
    Row {
        name: "Serilog compact JSON",
        line: r#"{"@t":"2024-05-07T10:55:53.4340000Z","@mt":"Payment {PaymentId} failed","@l":"Error","PaymentId":42}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Payment {PaymentId} failed",
        fields: &[("PaymentId", "42")],
    },
    Row {
        name: "NATS",
        line: "[1] 2024/05/07 10:55:53.434567 [ERR] 10.1.0.9:52114 - cid:12 - TLS handshake error: EOF",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "10.1.0.9:52114 - cid:12 - TLS handshake error: EOF",
        fields: &[],
    },
    Row {
        name: "Heroku router",
        line: "2024-05-07T10:55:53.434567+00:00 heroku[router]: at=error code=H12 desc=\"Request timeout\" method=GET path=\"/\" status=503",
        time: "2024-05-07T10:55:53.434Z",
        level: None,
        message: "at=error code=H12 desc=\"Request timeout\" method=GET path=\"/\" status=503",
        fields: &[("code", "H12")],
    },
    // The families of LogHub (logpai/loghub), with other values.
    Row {
        name: "Hadoop / log4j",
        line: "2015-10-18 18:01:50,353 WARN [main] org.apache.hadoop.hdfs.LeaseRenewer: Failed to renew lease for [DFSClient_NONMAPREDUCE_1537864556_1] for 30 seconds",
        time: "2015-10-18T18:01:50.353Z",
        level: Some("warn"),
        message: "Failed to renew lease for [DFSClient_NONMAPREDUCE_1537864556_1] for 30 seconds",
        fields: &[("thread", "main"), ("logger", "org.apache.hadoop.hdfs.LeaseRenewer")],
    },
    Row {
        name: "HDFS",
        line: "081109 214043 2561 WARN dfs.DataNode$DataXceiver: 10.251.30.6:50010:Got exception while serving blk_-2918118818249673980 to /10.251.90.64:",
        time: "2008-11-09T21:40:43.000Z",
        level: Some("warn"),
        message: "10.251.30.6:50010:Got exception while serving blk_-2918118818249673980 to /10.251.90.64:",
        fields: &[("pid", "2561"), ("logger", "dfs.DataNode$DataXceiver")],
    },
    Row {
        name: "Spark",
        line: "17/06/09 20:11:11 ERROR executor.Executor: Exception in task 1.0 in stage 2.0 (TID 9)",
        time: "2017-06-09T20:11:11.000Z",
        level: Some("error"),
        message: "Exception in task 1.0 in stage 2.0 (TID 9)",
        fields: &[("logger", "executor.Executor")],
    },
    Row {
        name: "Android logcat",
        line: "03-17 16:15:02.111  2227  2227 E AndroidRuntime: FATAL EXCEPTION: main",
        time: "2024-03-17T16:15:02.111Z",
        level: Some("error"),
        message: "FATAL EXCEPTION: main",
        fields: &[("pid", "2227"), ("logger", "AndroidRuntime")],
    },
    Row {
        name: "Apache error log",
        line: "[Sun Dec 04 07:18:00 2005] [error] mod_jk child workerEnv in error state 7",
        time: "2005-12-04T07:18:00.000Z",
        level: Some("error"),
        message: "mod_jk child workerEnv in error state 7",
        fields: &[],
    },
    Row {
        name: "BGL",
        line: "- 1117869872 2005.06.04 R23-M1-N8-I:J18-U11 2005-06-04-00.24.32.432192 R23-M1-N8-I:J18-U11 RAS KERNEL FATAL data storage interrupt",
        time: "2005-06-04T07:24:32.000Z",
        level: Some("fatal"),
        message: "data storage interrupt",
        fields: &[],
    },
    Row {
        name: "HPC",
        line: "460903 node-128 unix.hw state_change.available 1084680778 1 Component State Change: Component \\042alt0\\042 is in the available state (HWID=2752)",
        time: "2004-05-16T04:12:58.000Z",
        level: None,
        message: "Component State Change: Component \\042alt0\\042 is in the available state (HWID=2752)",
        fields: &[],
    },
    Row {
        name: "HealthApp",
        line: "20171224-0:0:0:216|Step_StandStepDataManager|30002312|theDayChanged 1514044800216",
        time: "2017-12-24T00:00:00.216Z",
        level: None,
        message: "theDayChanged 1514044800216",
        fields: &[("logger", "Step_StandStepDataManager"), ("pid", "30002312")],
    },
    Row {
        name: "Linux syslog",
        line: "Jun 15 12:12:34 combo ftpd[24085]: connection from 207.30.238.8 (host8.topspot.net) at Wed Jun 15 12:12:34 2005",
        time: "2023-06-15T12:12:34.000Z",
        level: Some("info"),
        message: "connection from 207.30.238.8 (host8.topspot.net) at Wed Jun 15 12:12:34 2005",
        fields: &[("host", "combo"), ("program", "ftpd"), ("pid", "24085")],
    },
    Row {
        name: "Thunderbird",
        line: "- 1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session opened for user root by (uid=0)",
        time: "2005-11-09T20:01:01.000Z",
        level: Some("info"),
        message: "session opened for user root by (uid=0)",
        fields: &[("program", "crond(pam_unix)")],
    },
    Row {
        name: "OpenStack",
        line: "nova-compute.log.1.2017-05-16_13:55:31 2017-05-16 00:00:04.500 2931 INFO nova.compute.manager [req-3ea4052c-895d - - - - -] [instance: b9000564-fe1a] VM Started (Lifecycle Event)",
        time: "2017-05-16T00:00:04.500Z",
        level: Some("info"),
        message: "[instance: b9000564-fe1a] VM Started (Lifecycle Event)",
        fields: &[("logger", "nova.compute.manager"), ("pid", "2931")],
    },
    Row {
        name: "Proxifier",
        line: "[10.30 16:49:07] chrome.exe - proxy.cse.cuhk.edu.hk:5070 close, 0 bytes sent, 0 bytes received, lifetime <1 sec",
        time: "2023-10-30T16:49:07.000Z",
        level: None,
        message: "proxy.cse.cuhk.edu.hk:5070 close, 0 bytes sent, 0 bytes received, lifetime <1 sec",
        fields: &[("logger", "chrome.exe")],
    },
    Row {
        name: "Windows CBS",
        line: "2016-09-28 04:30:31, Info                  CSI    00000001@2016/9/27:20:30:31.455 WcpInitialize (wcp.dll version 0.0.0.6) called",
        time: "2016-09-28T04:30:31.000Z",
        level: Some("info"),
        message: "00000001@2016/9/27:20:30:31.455 WcpInitialize (wcp.dll version 0.0.0.6) called",
        fields: &[("logger", "CSI")],
    },
    // Wrappers in front of all of it.
    Row {
        name: "kubectl logs --timestamps, JSON",
        line: r#"2024-05-07T10:55:53.500000001Z {"level":"error","ts":1715079353.434,"msg":"egress_failed","nodeID":"NE_2"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "egress_failed",
        fields: &[("nodeID", "NE_2")],
    },
    Row {
        name: "kubectl logs --timestamps, plain text",
        line: "2024-05-07T10:55:53.500000001Z could not register node: READONLY You can't write against a read only replica.",
        time: "2024-05-07T10:55:53.500Z",
        level: None,
        message: "could not register node: READONLY You can't write against a read only replica.",
        fields: &[],
    },
    Row {
        name: "kubectl logs --timestamps --prefix, log4j",
        line: "[pod/kafka-0/kafka] 2024-05-07T10:55:53.500000001Z [2024-05-07 10:55:53,434] ERROR [Controller id=0] Error while electing leader (kafka.controller.KafkaController)",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "[Controller id=0] Error while electing leader (kafka.controller.KafkaController)",
        fields: &[],
    },
    Row {
        name: "stern --timestamps (short), JSON",
        line: r#"api-7c9d8f6b5-x2x7q api 05-07 12:55:53 {"level":"warn","time":"2024-05-07T10:55:53.434Z","msg":"slow query"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "slow query",
        fields: &[],
    },
    Row {
        name: "CRI, klog inside",
        line: "2024-05-07T10:55:53.500000001Z stderr F W0507 10:55:53.434567       1 reflector.go:539] failed to list *v1.Pod: context deadline exceeded",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "failed to list *v1.Pod: context deadline exceeded",
        fields: &[],
    },
    // Key names spelled otherwise (matched without case, `_ - .`, and
    // inside the record objects that carry them).
    Row {
        name: "Serilog JsonFormatter",
        line: r#"{"Timestamp":"2024-05-07T10:55:53.434Z","Level":"Warning","MessageTemplate":"Slow request {Path}","Properties":{"Path":"/api"}}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Slow request {Path}",
        fields: &[("Properties.Path", "/api")],
    },
    Row {
        name: "a nested level name",
        line: r#"{"Time":"2024-05-07T10:55:53.434Z","Level":{"Name":"DEBUG","Value":1},"Message":"cache warmed"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("debug"),
        message: "cache warmed",
        fields: &[],
    },
    Row {
        name: "ECS (nested log object)",
        line: r#"{"@timestamp":"2024-05-07T10:55:53.434Z","log":{"level":"ERROR","logger":"app"},"message":"failed to connect","ecs.version":"8.11.0"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "failed to connect",
        fields: &[("log.logger", "app")],
    },
    Row {
        name: "OTLP JSON log record",
        line: r#"{"timeUnixNano":"1715079353434000000","severityNumber":17,"severityText":"ERROR","body":{"stringValue":"export failed"},"traceId":"5b8efff798038103d269b633813fc60c"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "export failed",
        fields: &[("traceId", "5b8efff798038103d269b633813fc60c")],
    },
    Row {
        name: "log4j2 JsonLayout",
        line: r#"{"instant":{"epochSecond":1715079353,"nanoOfSecond":434000000},"thread":"main","level":"WARN","loggerName":"com.example.App","message":"slow query"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "slow query",
        fields: &[("loggerName", "com.example.App")],
    },
    Row {
        name: "loguru serialize=True",
        line: r#"{"text":"2024-05-07 10:55:53.434 | ERROR | app:main:1 - boom\n","record":{"level":{"icon":"x","name":"ERROR","no":40},"message":"boom","time":{"repr":"2024-05-07 10:55:53.434000+00:00","timestamp":1715079353.434}}}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "boom",
        fields: &[],
    },
    Row {
        name: "logstash-logback-encoder",
        line: r#"{"@timestamp":"2024-05-07T10:55:53.434+00:00","@version":"1","message":"Started Application","logger_name":"com.example.App","thread_name":"main","level":"INFO","level_value":20000}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("info"),
        message: "Started Application",
        fields: &[("thread_name", "main")],
    },
    Row {
        name: "bunyan",
        line: r#"{"name":"api","hostname":"h1","pid":7,"level":40,"msg":"slow","time":"2024-05-07T10:55:53.434Z","v":0}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "slow",
        fields: &[("hostname", "h1")],
    },
    Row {
        name: "python-json-logger",
        line: r#"{"asctime":"2024-05-07 10:55:53,434","levelname":"ERROR","name":"app","message":"handler crashed"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "handler crashed",
        fields: &[("name", "app")],
    },
    Row {
        name: "logfmt, OpenTelemetry spelling",
        line: r#"Timestamp=2024-05-07T10:55:53.434Z SeverityText=WARN Body="queue full" service.name=api"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "queue full",
        fields: &[("service.name", "api")],
    },
    // `docker compose logs` prefixes.
    Row {
        name: "docker compose, JSON inside",
        line: r#"web-1  | {"time":"2024-05-07T10:55:53.434Z","level":"error","msg":"db down"}"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "db down",
        fields: &[],
    },
    Row {
        name: "docker compose v1, logfmt inside",
        line: r#"shop_api_1    | time=2024-05-07T10:55:53.434Z level=warn msg="slow upstream" upstream=auth"#,
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "slow upstream",
        fields: &[("upstream", "auth")],
    },
    // Redis's own header, with and without a year (before 7.x).
    Row {
        name: "Redis before 7 (no year)",
        line: "4961:M 07 May 10:55:53.434 # Connection with replica 10.0.0.5:6379 lost.",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "Connection with replica 10.0.0.5:6379 lost.",
        fields: &[],
    },
    Row {
        name: "docker compose, Redis inside",
        line: "redis-1  | 1:M 07 May 2024 10:55:53.434 * Ready to accept connections tcp",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("info"),
        message: "Ready to accept connections tcp",
        fields: &[],
    },
    // Levels joined by colons or pipes.
    Row {
        name: "stamp:LEVEL:message",
        line: "2024-05-07 10:55:53,434:WARNING:disk almost full",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("warn"),
        message: "disk almost full",
        fields: &[],
    },
    Row {
        name: "stamp::LEVEL:: (sabnzbd)",
        line: "2024-05-07 10:55:53,434::ERROR::[interface:657] Unsuccessful login attempt from 10.0.0.9",
        time: "2024-05-07T10:55:53.434Z",
        level: Some("error"),
        message: "Unsuccessful login attempt from 10.0.0.9",
        fields: &[],
    },
    Row {
        name: "[LEVEL|logger|line] stamp:",
        line: "[ERROR|auth|L83] 2024-05-07T10:55:53: Incorrect username or password from 10.0.0.9",
        time: "2024-05-07T10:55:53.000Z",
        level: Some("error"),
        message: "Incorrect username or password from 10.0.0.9",
        fields: &[],
    },
    Row {
        name: "Gin",
        line: "[GIN] 2024/05/07 - 10:55:53 | 401 |     505.317µs |       10.1.2.3 | POST     \"/client\"",
        time: "2024-05-07T10:55:53.000Z",
        level: None,
        message: "10.1.2.3 | POST     \"/client\"",
        fields: &[],
    },
    Row {
        name: "MM/DD/YY (ZoneMinder), the day tells it from YY/MM/DD",
        line: "05/27/24 10:55:53.434003 web_php[118770].ERR [10.0.0.9] [Could not retrieve user details]",
        time: "2024-05-27T10:55:53.434Z",
        level: None,
        message: "web_php[118770].ERR [10.0.0.9] [Could not retrieve user details]",
        fields: &[],
    },
];

#[test]
fn every_family_decodes_to_its_time_level_message_and_fields() {
    let keys = KeyConfig::default();
    let mut source = Source::named("formats.log");
    source.modified = parse_rfc3339(MODIFIED);
    let mut failures = Vec::new();
    for row in ROWS {
        let mut d = Decoder::new(&keys, false);
        let Some(p) = d.prepare(&source, row.line, None) else {
            failures.push(format!("{}: held", row.name));
            continue;
        };
        let level = d.level(&p).map(|l| l.as_str());
        let event = d.event(&p);
        let time = format_rfc3339(p.time);
        let mut wrong = Vec::new();
        if time != row.time {
            wrong.push(format!(
                "time {time} ({:?}), want {}",
                p.time_from, row.time
            ));
        }
        if level != row.level {
            wrong.push(format!("level {level:?}, want {:?}", row.level));
        }
        if event.level.map(|l| l.as_str()) != level {
            wrong.push(format!(
                "the event's level {:?} is not the level reader's {level:?}",
                event.level
            ));
        }
        if event.message != row.message {
            wrong.push(format!(
                "message {:?}\n      want    {:?}",
                event.message, row.message
            ));
        }
        for (k, v) in row.fields {
            let got = event.get(k);
            if got.as_deref() != Some(*v) {
                wrong.push(format!("field {k} = {got:?}, want {v:?}"));
            }
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{}:\n    {}\n    {}",
                row.name,
                row.line,
                wrong.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
}

#[test]
fn a_stamp_without_a_year_takes_it_from_the_line_before_not_the_clock() {
    let keys = KeyConfig::default();
    let source = Source::named("s");
    let mut d = Decoder::new(&keys, false);
    // No modification time, no arrival: the first line's year comes from
    // nowhere, the second's from the first.
    let first = d
        .prepare(
            &source,
            r#"{"ts":1735689590.5,"msg":"before new year"}"#,
            None,
        )
        .unwrap()
        .time;
    assert_eq!(format_rfc3339(first), "2024-12-31T23:59:50.500Z");
    let p = d
        .prepare(
            &source,
            "Jan  1 00:00:07 node-a app[1]: after new year",
            None,
        )
        .unwrap();
    assert_eq!(format_rfc3339(p.time), "2025-01-01T00:00:07.000Z");
    assert_eq!(p.time_from, TimeFrom::Line);
    // Without anything before it, a year-less stamp gives no time: the
    // line is untimed rather than timed by the wall clock.
    let mut fresh = Decoder::new(&keys, false);
    let p = fresh
        .prepare(
            &Source::named("t"),
            "Jan  1 00:00:07 node-a app[1]: x",
            None,
        )
        .unwrap();
    assert_eq!(p.time_from, TimeFrom::None);
    assert_eq!(fresh.stats().untimed, 1);
}

#[test]
fn lines_without_a_time_are_counted_one_by_one_and_inherit_their_streams() {
    let keys = KeyConfig::default();
    let mut source = Source::named("s");
    source.modified = parse_rfc3339(MODIFIED);
    let mut d = Decoder::new(&keys, false);
    let p = d.prepare(&source, "starting worker", None).unwrap();
    assert_eq!(p.time_from, TimeFrom::Modified);
    assert_eq!(format_rfc3339(p.time), "2024-05-07T12:00:00.000Z");
    let t = d
        .prepare(&source, "2024-05-06 08:00:00,000 INFO ready", None)
        .unwrap();
    assert_eq!(t.time_from, TimeFrom::Line);
    for _ in 0..3 {
        let p = d.prepare(&source, "still working", None).unwrap();
        assert_eq!(p.time_from, TimeFrom::Previous);
        assert_eq!(format_rfc3339(p.time), "2024-05-06T08:00:00.000Z");
    }
    assert_eq!(d.stats().untimed, 4);
    assert_eq!(d.stats().formats.text, 1);
    assert_eq!(d.stats().formats.plain, 4);
}

#[test]
fn replay_takes_the_year_from_the_files_modification_time_and_rolls_over_new_year() {
    // A syslog file written across New Year, modified on 2 January: its
    // December lines are in the year before, its January lines in that
    // year — whatever today's date is.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("messages");
    std::fs::write(
        &path,
        "Dec 31 23:59:58 node-a app[1]: ERROR disk /data full\n\
         Jan  1 00:00:03 node-a app[1]: ERROR disk /data full\n",
    )
    .unwrap();
    let modified = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_735_776_000); // 2025-01-02
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
        .args(["templates", "--json", "--log-level", "error"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["first_seen"], "2024-12-31T23:59:58.000Z");
    assert_eq!(rows[0]["last_seen"], "2025-01-01T00:00:03.000Z");
    assert_eq!(rows[0]["count"], 2);
}

/// The message as the full decoder gives it, with its error detail (for
/// warnings and above), first line only: what template mining must read
/// (by its cheaper path).
fn decoded_mining_message(text: &str, time: i64, detail: bool) -> Option<String> {
    let pl = payload::decode(text, Some(time));
    if pl.malformed {
        // A cut JSON object: the decoder keeps the whole text; mining
        // reads the message key it still finds.
        return None;
    }
    let err = ["error", "err", "exception"]
        .iter()
        .filter(|_| detail)
        .find_map(|k| pl.fields.get(k).map(|v| v.into_owned()));
    let mut m = pl.message.clone();
    if let Some(e) = err.filter(|e| !e.is_empty() && !m.contains(e.as_str())) {
        m = if m.is_empty() { e } else { format!("{m}: {e}") };
    }
    let line = if m.starts_with("Traceback (most recent call last)") {
        m.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("")
    } else {
        m.split('\n').next().unwrap_or("")
    };
    let mut to = line.len().min(mined::MAX_MESSAGE);
    while !line.is_char_boundary(to) {
        to -= 1;
    }
    let line = line[..to].trim();
    (!line.is_empty()).then(|| line.to_string())
}

#[test]
fn mining_reads_the_message_the_decoder_gives_on_every_row_and_fixture_line() {
    let keys = KeyConfig::default();
    let mut source = Source::named("formats.log");
    source.modified = parse_rfc3339(MODIFIED);
    let mut lines: Vec<String> = ROWS.iter().map(|r| r.line.to_string()).collect();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "fixtures: {files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).expect("fixture");
        lines.extend(text.lines().map(str::to_string));
    }
    let mut d = Decoder::new(&keys, false);
    let (mut checked, mut failures) = (0, Vec::new());
    for line in &lines {
        let Some(p) = d.prepare(&source, line, None) else {
            continue;
        };
        checked += 1;
        let got = mined::mining_message(
            &p.text,
            p.format,
            p.header.as_ref(),
            d.level(&p),
            Some(p.time),
        )
        .map(|m| m.into_owned());
        if payload::decode(&p.text, Some(p.time)).malformed {
            continue;
        }
        let detail = d
            .level(&p)
            .is_some_and(|l| l >= sigwatch::decode::severity::Level::Warn);
        let want = decoded_mining_message(&p.text, p.time, detail);
        if got != want {
            let cut = |s: &str| s.chars().take(160).collect::<String>();
            failures.push(format!(
                "{} ({})\n    got  {:?}\n    want {:?}",
                cut(&p.text),
                p.format,
                got.as_deref().map(cut),
                want.as_deref().map(cut)
            ));
        }
    }
    assert!(checked > 5000, "{checked} lines checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} lines:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Stack traces under their stamped lines, behind a `kubectl --prefix`
/// prefix and interleaved with another pod's lines: `templates` mines one
/// template per record (none per frame), each frame keeps its record's
/// level, and a rule matching a `Caused by:` deep in a trace still fires.
#[test]
fn a_trace_is_mined_with_its_record_and_its_frames_still_match_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("java.log");
    let mut text = String::new();
    for i in 0..4 {
        text += &format!("[pod/api-0/api] 2024-05-07 10:55:{:02},434 ERROR [main] com.example.Store: write failed for order {}\n", 10 + i, 4000 + i);
        text += "[pod/api-0/api] java.io.UncheckedIOException: flush failed\n";
        text += &format!(
            "[pod/api-0/api] \tat com.example.Store.flush(Store.java:{})\n",
            40 + i
        );
        text += "[pod/web-0/web] 2024-05-07 10:55:10,500 INFO [main] com.example.Web: served /\n";
        text += "[pod/api-0/api] \tat com.example.Store.write(Store.java:12)\n";
        text += "[pod/api-0/api] Caused by: java.io.IOException: No space left on device\n";
        text += "[pod/api-0/api] \t... 7 more\n";
    }
    std::fs::write(&path, &text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
        .args(["templates", "--json", "--lines", "--log-level", "error"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), text.lines().count());
    let mut templates = std::collections::BTreeSet::new();
    for (row, line) in rows.iter().zip(text.lines()) {
        let frame = !line.contains(" 2024-05-07 ");
        if frame {
            // A frame: no template of its own, the record's level (the web
            // pod's INFO line between them breaks nothing).
            assert!(row["template"].is_null(), "{line}: {row}");
            assert_eq!(row["level"], "error", "{line}");
        } else {
            templates.insert(row["template"].to_string());
        }
    }
    assert_eq!(templates.len(), 2, "{templates:?}");
    // A rule on the `Caused by:` line pages at once.
    let rules = dir.path().join("disk.yaml");
    std::fs::write(
        &rules,
        "rules:\n  - id: app.disk_full\n    title: disk full\n    severity: critical\n    match: {contains: [\"No space left on device\"]}\n    group_by: pod\n    detect: {count: {threshold: 3, window: 1m}}\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sigwatch"))
        .args([
            "replay",
            "--no-builtin-rules",
            "--log-level",
            "error",
            "--rules",
        ])
        .arg(&rules)
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts = String::from_utf8_lossy(&out.stdout);
    assert!(
        alerts.contains("\"rule\":\"app.disk_full\"") && alerts.contains("api-0"),
        "{alerts}"
    );
}
