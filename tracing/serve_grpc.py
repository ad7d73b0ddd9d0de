"""Internal: The OTLP/gRPC receiver of ``ragmeter serve`` (``--otlp-grpc-port``): the same service as the
OTLP/HTTP one (:class:`~ragmeter.tracing.serve.EvaluationService`), for senders that speak gRPC
only, such as the OpenTelemetry Collector's loadbalancing exporter. Needs grpcio (``pip install
opentelemetry-exporter-otlp-proto-grpc``).

Held to the HTTP receiver's rules: the bearer token in the ``authorization`` metadata
(``UNAUTHENTICATED`` without it), messages up to ``max_body`` bytes once decompressed
(``RESOURCE_EXHAUSTED`` beyond; gRPC checks the inflated size), TLS with the same certificate,
``workers`` threads and at most twice as many calls at once (``RESOURCE_EXHAUSTED`` beyond, which
OTLP clients retry), and idle connections closed after ``idle_timeout``."""

from __future__ import annotations

from typing import Any

from ragmeter.tracing.otlp_json import spans_from_message

__all__ = ["grpc_server"]


def grpc_server(service: Any, host: str, port: int) -> tuple[Any, int]:
    """An OTLP/gRPC ``TraceService`` server for ``service`` (the
    :class:`~ragmeter.tracing.serve.EvaluationService` that starts it) and its port (needs grpcio: ``pip install
    opentelemetry-exporter-otlp-proto-grpc``). Full or draining: status UNAVAILABLE, which OTLP
    clients retry with backoff."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        """OTLP's ``TraceService`` on the evaluation service."""

        def Export(self, request: Any, context: Any) -> Any:
            """Take one ``ExportTraceServiceRequest`` (UNAVAILABLE when full or draining)."""
            service.count("requests")
            reason = service.full()
            if reason is not None:
                service.count("requests_rejected")
                context.abort(grpc.StatusCode.UNAVAILABLE, reason)
            errors: list = []
            _, rejected, problem = service.accept(spans_from_message(request, errors), errors)
            resp = ExportTraceServiceResponse()
            if rejected:
                resp.partial_success.rejected_spans = rejected
                resp.partial_success.error_message = problem
            return resp

    def refuse(request: Any, context: Any) -> None:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "send the metadata authorization: Bearer <token>")

    class BearerToken(grpc.ServerInterceptor):
        """Lets a call through only with the service's token in its ``authorization`` metadata."""

        def intercept_service(self, continuation: Any, details: Any) -> Any:
            metadata = dict(details.invocation_metadata or ())
            if service.authorized(metadata.get("authorization")):
                return continuation(details)
            service.count("requests_unauthorized")
            return grpc.unary_unary_rpc_method_handler(refuse)

    idle_ms = int(service._server.idle_timeout * 1000)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=service.workers, thread_name_prefix="ragmeter-serve-grpc"),
        interceptors=[BearerToken()] if service.secured else None,
        maximum_concurrent_rpcs=2 * service.workers,
        options=[("grpc.max_receive_message_length", service.max_body), ("grpc.max_connection_idle_ms", idle_ms)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    if service.tls_cert:
        with open(service.tls_cert, "rb") as f:
            chain = f.read()
        key = chain
        if service.tls_key:
            with open(service.tls_key, "rb") as f:
                key = f.read()
        bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, chain)]))
    else:
        bound = server.add_insecure_port(address)
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    return server, bound
