"""Engine adapters: how to launch an engine, read its version and --help, and read its log."""

from bringup.engines.base import Engine, EngineInfo, engine_info, get_engine

__all__ = ["Engine", "EngineInfo", "engine_info", "get_engine"]
