"""specgen's OpenAI-compatible HTTP server (``specgen serve`` / ``python -m specgen.server``; the
``specgen[server]`` extra): FastAPI routes over an engine adapter that runs requests on one
Generator (engine.py), chat templates (specgen.chat_template), Prometheus metrics (metrics.py)."""
from specgen.server.app import create_app  # noqa: F401
