"""The OTLP/gRPC receiver of ``ragmeter serve`` (``--otlp-grpc-port``): the same service as the
OTLP/HTTP one (:class:`~ragmeter.tracing.serve.EvaluationService`), for senders that speak gRPC
only, such as the OpenTelemetry Collector's loadbalancing exporter. Needs grpcio (``pip install
opentelemetry-exporter-otlp-proto-grpc``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragmeter.tracing.serve import spans_from_message

if TYPE_CHECKING:  # pragma: no cover
    from ragmeter.tracing.serve import EvaluationService

__all__ = ["grpc_server"]


def grpc_server(service: EvaluationService, host: str, port: int) -> tuple[Any, int]:
    """An OTLP/gRPC ``TraceService`` server for ``service`` and its port (needs grpcio: ``pip install
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

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ragmeter-serve-grpc"),
                         options=[("grpc.max_receive_message_length", service.max_body)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}")
    return server, bound
