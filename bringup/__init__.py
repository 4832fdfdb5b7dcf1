"""bringup: bring an LLM inference server up on a new machine."""

__version__ = "0.1.0"
