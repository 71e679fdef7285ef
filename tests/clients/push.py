"""Pushes lines to sigwatch with real client libraries, as an application
would: `push.py otlp URL FILE` exports every line through the OpenTelemetry
SDK's OTLP/HTTP log exporter (protobuf, batched); `push.py loki URL FILE`
logs every line through python-logging-loki's handler (Loki's JSON push, one
request a record). FILE has one `NANOSECONDS<TAB>LINE` per line; each record
keeps that time. Exits non-zero if the client reports a failed export."""

import logging
import sys


def records(path):
    with open(path, encoding="utf-8") as f:
        for row in f:
            ts, _, line = row.rstrip("\n").partition("\t")
            yield int(ts), line


def otlp(url, path):
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(
        resource=Resource.create({"k8s.namespace.name": "media", "service.name": "egress"})
    )
    exporter = OTLPLogExporter(endpoint=url, timeout=30)
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporter, max_export_batch_size=256, schedule_delay_millis=50)
    )
    logger = provider.get_logger("sigwatch-test")
    for ts, line in records(path):
        logger.emit(timestamp=ts, observed_timestamp=ts, body=line)
    if not provider.force_flush(60_000):
        sys.exit("the OTLP exporter did not flush")
    provider.shutdown()


def loki(url, path):
    import types

    import logging_loki
    import logging_loki.emitter

    # Its Loki v1 emitter stamps each entry with time.time(), as a shipper
    # without a timestamp stage stamps the time it read the line: here the
    # clock it reads is the record's own time, so the entries keep the
    # fixture's times.
    now = [0]
    logging_loki.emitter.time = types.SimpleNamespace(time=lambda: now[0] / 1e9)
    failures = []

    class Handler(logging_loki.LokiHandler):
        def handleError(self, record):  # noqa: N802 (logging's name)
            failures.append(sys.exc_info()[1])

    handler = Handler(url=url, tags={"namespace": "media", "job": "x"}, version="1")
    log = logging.getLogger("sigwatch-test")
    log.propagate = False
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    for ts, line in records(path):
        record = log.makeRecord(log.name, logging.INFO, __file__, 0, line, (), None)
        record.created = ts / 1e9
        now[0] = ts
        log.handle(record)
    if failures:
        sys.exit(f"{len(failures)} pushes failed: {failures[0]!r}")


if __name__ == "__main__":
    kind, url, path = sys.argv[1:4]
    {"otlp": otlp, "loki": loki}[kind](url, path)
