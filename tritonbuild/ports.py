"""The ports the image serves, by endpoint: the one place their numbers are written."""
from __future__ import annotations

__all__ = ["PORTS", "vertex_ai_port"]

PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002, "sagemaker": 8080, "vertex-ai": 8080,
         "openai": 9000}


def vertex_ai_port(endpoints: tuple[str, ...]) -> int:
    # SageMaker insists on 8080; Vertex AI reads its port from AIP_HTTP_PORT at run time.
    return 8081 if "sagemaker" in endpoints else PORTS["vertex-ai"]
